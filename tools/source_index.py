"""Where components/**/*.py spell a Kubernetes object's name: a literal, or the f-string that builds it.

Names are data in the service modules (`Step(name="keystone-bootstrap")`), built by shared
code (`f"{service}-db-sync"` in `db_sync`) or held in constants (`MEMCACHED = "memcached"`).
This reads the source with `ast`, so every site is a real file:line, and says which kind it
is: a literal, an f-string (and, when the f-string's parts are parameters of its function,
the call that fills them in), or a constant used where an object is declared.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SOURCES = "components"
# What pods run, not the program's modules: the scripts declare nothing of the plan.
SCRIPTS = REPO / SOURCES / "scripts"
# Calls whose first argument (or `name=`) is the name of the object they declare.
DECLARERS = {
    "Step",
    "Process",
    "NodePod",
    "Claim",
    "wsgi_api",
    "rpc_daemon",
    "_daemon",
    "_agent",
    "_script_step",
    "_key_check",
    "secret",
    "config_map",
    "job",
    "cron_job",
    "deployment",
    "statefulset",
    "daemonset",
    "service",
    "volume_claim",
    "disruption_budget",
    "operator_chart",
    "operator_manifest",
    "CustomResource",
    "Namespace",
    "NetworkPolicy",
    "ConfigFile",
}
# An f-string needs this much literal text to say something about a name (f"{a}-{b}" does not).
MIN_LITERAL = 3


@dataclass(frozen=True)
class Site:
    path: str  # relative to the repository, e.g. components/services/glance.py
    line: int
    code: str  # the literal, f-string or constant as written
    call: str | None  # the function it is the name argument of, e.g. "Step"
    function: str | None  # the function it is written in

    @property
    def declares(self) -> bool:
        return self.call in DECLARERS

    def __str__(self) -> str:
        where = f" in {self.function}()" if self.function else ""
        call = f"{self.call}({self.code}, ...)" if self.call else self.code
        return f"{self.path}:{self.line}  {call}{where}"


@dataclass(frozen=True)
class Found:
    """Where a name is declared, and where else it is written."""

    declared: tuple[Site, ...]  # the name argument of a declaring call
    filled_in: tuple[Site, ...]  # calls whose arguments complete a declaring f-string
    mentioned: tuple[Site, ...]  # everywhere else (e.g. in another object's `needs`)


@dataclass(frozen=True)
class _Candidate:
    site: Site
    node: ast.expr
    fstring: ast.JoinedStr | None
    enclosing: ast.FunctionDef | None


def _call_name(call: ast.Call) -> str | None:
    func = call.func
    if isinstance(func, ast.Attribute):
        return func.attr
    return func.id if isinstance(func, ast.Name) else None


def _name_argument_of(node: ast.AST, parents: dict[ast.AST, ast.AST]) -> str | None:
    """The called function if `node` is its first positional argument or its `name=`."""
    parent = parents.get(node)
    if isinstance(parent, ast.keyword) and parent.arg in ("name", "workload_name"):
        call = parents.get(parent)
        return _call_name(call) if isinstance(call, ast.Call) else None
    if isinstance(parent, ast.Call) and parent.args and parent.args[0] is node:
        return _call_name(parent)
    return None


def _pattern(fstring: ast.JoinedStr) -> re.Pattern[str] | None:
    literal = "".join(v.value for v in fstring.values if isinstance(v, ast.Constant) and isinstance(v.value, str))
    if len(literal.strip("-_./:")) < MIN_LITERAL:
        return None
    parts = []
    for v in fstring.values:
        if not isinstance(v, ast.Constant):
            parts.append("[A-Za-z0-9._-]+?")
        elif isinstance(v.value, str):
            parts.append(re.escape(v.value))
    return re.compile("".join(parts))


def program_modules() -> list[Path]:
    """The Pulumi program's modules under components/, in every layer; not the scripts pods run."""
    return sorted(f for f in (REPO / SOURCES).rglob("*.py") if SCRIPTS not in f.parents)


@cache
def _parsed() -> tuple[tuple[str, str, ast.Module], ...]:
    return tuple((str(f.relative_to(REPO)), f.read_text(), ast.parse(f.read_text())) for f in program_modules())


def _walk(tree: ast.Module) -> tuple[dict[ast.AST, ast.AST], dict[ast.AST, ast.FunctionDef]]:
    parents: dict[ast.AST, ast.AST] = {}
    functions: dict[ast.AST, ast.FunctionDef] = {}

    def visit(node: ast.AST, function: ast.FunctionDef | None) -> None:
        for child in ast.iter_child_nodes(node):
            parents[child] = node
            inner = child if isinstance(child, ast.FunctionDef) else function
            if inner is not None:
                functions[child] = inner
            visit(child, inner)

    visit(tree, None)
    return parents, functions


@cache
def _indexed() -> tuple[tuple[str, str, ast.Module, dict, dict], ...]:
    return tuple((path, text, tree, *_walk(tree)) for path, text, tree in _parsed())


def _site(path: str, text: str, node: ast.expr, parents: dict, functions: dict) -> Site:
    function = functions.get(node)
    code = ast.get_source_segment(text, node) or ""
    return Site(path, node.lineno, code, _name_argument_of(node, parents), function.name if function else None)


def _candidates(name: str) -> list[_Candidate]:
    found = []
    for path, text, tree, parents, functions in _indexed():
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and node.value == name:
                found.append(_Candidate(_site(path, text, node, parents, functions), node, None, functions.get(node)))
            elif isinstance(node, ast.JoinedStr) and not isinstance(parents.get(node), ast.FormattedValue):
                pattern = _pattern(node)
                if pattern and pattern.fullmatch(name):
                    site = _site(path, text, node, parents, functions)
                    found.append(_Candidate(site, node, node, functions.get(node)))
    return found


def _constant_uses(constant: str) -> list[Site]:
    """Declaring calls whose name argument is the module constant `constant` (or `module.CONSTANT`)."""
    uses = []
    for path, text, tree, parents, functions in _indexed():
        for node in ast.walk(tree):
            if isinstance(node, ast.Name):
                named = node.id == constant
            elif isinstance(node, ast.Attribute):
                named = node.attr == constant
            else:
                continue
            if named and isinstance(parents.get(node), ast.Call | ast.keyword):
                site = _site(path, text, node, parents, functions)
                if site.declares:
                    uses.append(site)
    return uses


def _filled_in(candidate: _Candidate, name: str) -> list[Site]:
    """Calls of the f-string's function whose literal arguments make it spell `name`."""
    function, fstring = candidate.enclosing, candidate.fstring
    if function is None or fstring is None:
        return []
    params = [a.arg for a in (*function.args.posonlyargs, *function.args.args)]
    holes = [v.value for v in fstring.values if isinstance(v, ast.FormattedValue)]
    if not all(isinstance(h, ast.Name) and h.id in params for h in holes):
        return []
    calls = []
    for path, text, tree, _parents, functions in _indexed():
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Call) and _call_name(node) == function.name):
                continue
            given = {params[i]: a for i, a in enumerate(node.args[: len(params)])}
            given |= {k.arg: k.value for k in node.keywords if k.arg}
            arguments = {h.id: given.get(h.id) for h in holes if isinstance(h, ast.Name)}
            values = {
                hole: v for hole, v in arguments.items() if isinstance(v, ast.Constant) and isinstance(v.value, str)
            }
            if len(values) != len(arguments):
                continue
            filled = {hole: str(value.value) for hole, value in values.items()}
            spelled = "".join(_spelled(v, filled) for v in fstring.values)
            if spelled == name:
                first = next(iter(values.values()))
                code = ast.get_source_segment(text, node.func) or function.name
                calls.append(
                    Site(path, first.lineno, f"{code}({first.value!r}, ...)", None, _enclosing(functions, node))
                )
    return calls


def _spelled(part: ast.expr, filled: dict[str, str]) -> str:
    """A part of an f-string as written out: its literal text, or the value filling its hole."""
    if isinstance(part, ast.Constant):
        return str(part.value)
    if not isinstance(part, ast.FormattedValue):
        raise TypeError(f"an f-string part is a Constant or a FormattedValue, not {ast.dump(part)}")
    return filled[ast.unparse(part.value)]


def _enclosing(functions: dict, node: ast.AST) -> str | None:
    function = functions.get(node)
    return function.name if function else None


def locate(name: str) -> Found:
    """Every place components/**/*.py spells `name`: declarations first."""
    declared: list[Site] = []
    filled: list[Site] = []
    mentioned: list[Site] = []
    for candidate in _candidates(name):
        site = candidate.site
        if site.declares:
            declared.append(site)
            filled += _filled_in(candidate, name)
            continue
        assigned = _assigned_constant(candidate)
        uses = _constant_uses(assigned) if assigned else []
        if uses:
            declared += uses
            filled.append(site)
        else:
            mentioned.append(site)
    return Found(tuple(dict.fromkeys(declared)), tuple(dict.fromkeys(filled)), tuple(dict.fromkeys(mentioned)))


def _assigned_constant(candidate: _Candidate) -> str | None:
    """The module constant a literal is assigned to (`MEMCACHED = "memcached"`), if any."""
    for path, _text, _tree, parents, _functions in _indexed():
        if path != candidate.site.path:
            continue
        parent = parents.get(candidate.node)
        if isinstance(parent, ast.Assign) and len(parent.targets) == 1 and isinstance(parent.targets[0], ast.Name):
            target = parent.targets[0].id
            return target if target.isupper() else None
    return None
