"""What a Python script needs of its image, read with `ast`: imports, programs it runs, paths.

An import inside `try: ... except ImportError` (or ModuleNotFoundError) is optional: the
script copes without it. Programs are the first element of a literal list or tuple given to
subprocess's run/call/check_call/check_output/Popen or os.exec*; anything built at run time
is not seen. Paths are string constants that are absolute paths, which the script may read.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

_RUNNERS = {"run", "call", "check_call", "check_output", "Popen"}
_EXECS = {"execv", "execve", "execvp", "execvpe", "execl", "execlp", "execle", "execlpe", "spawnv", "spawnvp"}
_IMPORT_ERRORS = {"ImportError", "ModuleNotFoundError", "Exception", "BaseException"}


@dataclass(frozen=True)
class Import:
    module: str  # dotted name that must import (for `from a.b import c`, a.b; c may be a name)
    line: int
    optional: bool = False
    names: tuple[str, ...] = ()  # what `from module import ...` takes: submodules or attributes


@dataclass(frozen=True)
class Program:
    name: str
    line: int


@dataclass(frozen=True)
class ScriptNeeds:
    imports: tuple[Import, ...]
    programs: tuple[Program, ...]
    paths: tuple[tuple[str, int], ...]


def script_needs(source: str) -> ScriptNeeds:
    tree = ast.parse(source)
    imports: list[Import] = []
    programs: list[Program] = []
    paths: list[tuple[str, int]] = []
    optional_lines = _optional_import_lines(tree)
    for node in ast.walk(tree):
        optional = node.lineno in optional_lines if isinstance(node, ast.stmt) else False
        if isinstance(node, ast.Import):
            imports.extend(Import(alias.name, node.lineno, optional) for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module and node.module != "__future__":
            names = tuple(alias.name for alias in node.names if alias.name != "*")
            imports.append(Import(node.module, node.lineno, optional, names))
        elif isinstance(node, ast.Call):
            program = _program(node)
            if program is not None:
                programs.append(Program(program, node.lineno))
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and _looks_like_path(node.value):
            paths.append((node.value, node.lineno))
    return ScriptNeeds(tuple(imports), tuple(programs), tuple(paths))


def _optional_import_lines(tree: ast.AST) -> set[int]:
    lines: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Try) and any(_catches_import_error(h) for h in node.handlers):
            for statement in node.body:
                for inner in ast.walk(statement):
                    if isinstance(inner, ast.Import | ast.ImportFrom):
                        lines.add(inner.lineno)
    return lines


def _catches_import_error(handler: ast.ExceptHandler) -> bool:
    caught = handler.type
    if caught is None:
        return True
    names = caught.elts if isinstance(caught, ast.Tuple) else [caught]
    return any(isinstance(n, ast.Name) and n.id in _IMPORT_ERRORS for n in names)


def _program(call: ast.Call) -> str | None:
    function = call.func
    if not isinstance(function, ast.Attribute) or not isinstance(function.value, ast.Name):
        return None
    module, name = function.value.id, function.attr
    if not ((module == "subprocess" and name in _RUNNERS) or (module == "os" and name in _EXECS)):
        return None
    if not call.args:
        return None
    first = call.args[0]
    if module == "os" and isinstance(first, ast.Constant) and isinstance(first.value, str):
        return first.value
    if isinstance(first, ast.List | ast.Tuple) and first.elts:
        head = first.elts[0]
        if isinstance(head, ast.Constant) and isinstance(head.value, str):
            return head.value
    return None


# The top directories of a Linux filesystem: a constant under one of them is a path, while
# "/api/v1/nodes" (a URL's path) is not.
_ROOTS = {"bin", "boot", "dev", "etc", "home", "lib", "lib64", "media", "mnt", "opt", "proc", "root", "run"}
_ROOTS |= {"sbin", "srv", "sys", "tmp", "usr", "var"}


def _looks_like_path(text: str) -> bool:
    return (
        text.startswith("/")
        and text.split("/")[1] in _ROOTS
        and len(text) > 1
        and not any(c.isspace() for c in text)
        and not any(c in text for c in "{}%*?<>\"'")
        and "//" not in text
    )
