"""What a shell script runs, read with a real parser (tree-sitter's bash grammar), not a regex.

`script_events(text, env, args)` walks the syntax tree in execution order and returns every
simple command (a `Call`: its words after the expansions the script itself makes known) and
every redirection (a `Redirect`), including those inside functions, pipelines, conditions,
loops, command substitutions and here-documents. What cannot be known before the script runs
(a variable the script does not set to a literal, `$(...)`, arithmetic) is None, so the
checker reports it as unresolved instead of passing it.

Functions are walked where they are defined, with unknown positional parameters. A command
inside `if command -v NAME ...; then` carries NAME in its `guards`: the script asks for NAME
before it runs it. Loops are walked once, and what their bodies assign or `shift` is unknown
throughout them.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache

import tree_sitter_bash
from tree_sitter import Language, Node, Parser

# A word's value: None where the script cannot know it before it runs.
Words = list[str | None]
# Stands for "$@" when the walk has lost the positional parameters (`shift` in a loop): the
# checker may still know them from how the script was called.
ALL_ARGS = "\x00$@"
# How a script can ask whether a command exists without running it.
PROBES = {"command": "-v", "type": None, "which": None, "hash": None}


@dataclass(frozen=True)
class Call:
    """One simple command: its words (None where unknown) and where it is."""

    words: tuple[str | None, ...]
    raw: tuple[str, ...]  # the source text of each word (for messages)
    line: int
    guards: frozenset[str] = frozenset()  # names an enclosing `if command -v NAME` asked about
    function: bool = False  # its name is a function the script defined


@dataclass(frozen=True)
class Redirect:
    path: str | None
    writes: bool
    line: int


Event = Call | Redirect


@cache
def _parser() -> Parser:
    return Parser(Language(tree_sitter_bash.language()))


def parse_errors(text: str) -> list[int]:
    """Lines where the grammar found a syntax error (empty when the script parses)."""
    root = _parser().parse(text.encode()).root_node
    found: list[int] = []

    def visit(node: Node) -> None:
        if node.type == "ERROR" or node.is_missing:
            found.append(node.start_point[0] + 1)
        for child in node.children:
            visit(child)

    if root.has_error:
        visit(root)
    return found


def script_events(text: str, env: Mapping[str, str] | None = None, args: Sequence[str] | None = None) -> list[Event]:
    """Every command and redirection of `text`, in order; `env` and `args` are what is known at its start."""
    walker = _Walker(dict(env or {}), list(args) if args is not None else None)
    walker.visit(_parser().parse(text.encode()).root_node)
    return walker.events


@dataclass
class _Walker:
    variables: dict[str, list[str] | None]
    positional: list[str] | None
    events: list[Event] = field(default_factory=list)
    functions: set[str] = field(default_factory=set)
    guards: frozenset[str] = frozenset()
    loops: int = 0

    def __init__(self, env: dict[str, str], args: list[str] | None) -> None:
        self.variables = {name: [value] for name, value in env.items()}
        self.positional = args
        self.events = []
        self.functions = set()
        self.guards = frozenset()
        self.loops = 0

    # -- statements -------------------------------------------------------------------------

    def visit(self, node: Node) -> None:
        handler = getattr(self, f"_visit_{node.type}", None)
        if handler is not None:
            handler(node)
        else:
            self._children(node)

    def _children(self, node: Node) -> None:
        for child in node.named_children:
            self.visit(child)

    def _visit_comment(self, node: Node) -> None:
        pass

    def _visit_command(self, node: Node) -> None:
        words: Words = []
        raw: list[str] = []
        for child in node.named_children:
            if child.type == "variable_assignment":  # FOO=1 cmd: only for that command
                self._substitutions(child)
                continue
            if child.type in ("file_redirect", "heredoc_redirect", "herestring_redirect"):
                self._redirect(child)
                continue
            target = child.named_children[0] if child.type == "command_name" else child
            self._substitutions(target)
            values = self.expand(target)
            words.extend(values)
            raw.extend([_text(target)] * len(values))
        if not words:
            return
        name = words[0]
        self.events.append(
            Call(
                tuple(words),
                tuple(raw),
                _line(node),
                guards=self.guards,
                function=name in self.functions,
            )
        )
        if name == "shift":
            self._shift(words[1:])

    def _shift(self, args: Words) -> None:
        if self.positional is None:
            return
        count = args[0] if args else "1"
        if self.loops or count is None or not count.isdigit():
            self.positional = None
            return
        self.positional = self.positional[int(count) :]

    def _visit_variable_assignment(self, node: Node) -> None:
        self._substitutions(node)
        name = node.child_by_field_name("name")
        value = node.child_by_field_name("value")
        if name is None:
            return
        key = _text(name)
        appends = any(child.type == "+=" for child in node.children)
        if value is None:
            values: list[str] | None = [""]
        elif value.type == "array":
            expanded = [v for element in value.named_children for v in self.expand(element)]
            values = None if None in expanded else [str(v) for v in expanded]
        else:
            joined = self._joined(value)
            values = None if joined is None else [joined]
        if appends:
            before = self.variables.get(key)
            values = None if before is None or values is None else before + values
        # A value set inside a loop or a function depends on how often it ran.
        self.variables[key] = None if self.loops else values

    def _visit_function_definition(self, node: Node) -> None:
        name = node.child_by_field_name("name")
        body = node.child_by_field_name("body")
        if name is not None:
            self.functions.add(_text(name))
        if body is not None:
            saved = self.positional
            self.positional = None  # a function's own arguments
            self.loops += 1  # what it assigns depends on when it is called
            self.visit(body)
            self.loops -= 1
            self.positional = saved

    def _visit_if_statement(self, node: Node) -> None:
        conditions = [c for i, c in enumerate(node.children) if node.field_name_for_child(i) == "condition"]
        before = len(self.events)
        for condition in conditions:
            self.visit(condition)
        probed = frozenset(_probed(self.events[before:]))
        saved = self.guards
        for child in node.named_children:
            if child in conditions:
                continue
            if child.type in ("elif_clause", "else_clause"):
                self.guards = saved
                self.visit(child)
            else:
                self.guards = saved | probed
                self.visit(child)
        self.guards = saved

    def _visit_for_statement(self, node: Node) -> None:
        for i, child in enumerate(node.children):
            if node.field_name_for_child(i) == "value":
                self._substitutions(child)
        variable = node.child_by_field_name("variable")
        if variable is not None:
            self.variables[_text(variable)] = None
        body = node.child_by_field_name("body")
        if body is not None:
            self._loop(body)

    def _visit_while_statement(self, node: Node) -> None:
        self._loop(node)

    def _loop(self, node: Node) -> None:
        # What the body assigns or shifts differs from one pass to the next: unknown throughout.
        for name in _assigned(node):
            self.variables[name] = None
        if _shifts(node):
            self.positional = None
        self.loops += 1
        if node.type == "while_statement":
            self._children(node)
        else:
            self.visit(node)
        self.loops -= 1

    _visit_c_style_for_statement = _visit_while_statement

    def _visit_redirected_statement(self, node: Node) -> None:
        for child in node.named_children:
            if child.type in ("file_redirect", "heredoc_redirect", "herestring_redirect"):
                self._redirect(child)
            else:
                self.visit(child)

    def _redirect(self, node: Node) -> None:
        self._substitutions(node)
        if node.type != "file_redirect":
            return
        destination = node.child_by_field_name("destination")
        operator = next((c.type for c in node.children if not c.is_named), "")
        if destination is None:
            return
        if operator in (">&", "<&") and (destination.type == "number" or _text(destination) == "-"):
            return  # 2>&1: a descriptor, not a file
        path = self._joined(destination)
        self.events.append(Redirect(path, writes=operator != "<", line=_line(node)))

    # -- words ------------------------------------------------------------------------------

    def _substitutions(self, node: Node) -> None:
        """Commands that run while a word is expanded: $(...), `...`, <(...)."""
        if node.type in ("command_substitution", "process_substitution"):
            self._children(node)
            return
        for child in node.named_children:
            if child.type in ("command_substitution", "process_substitution"):
                self._children(child)
            else:
                self._substitutions(child)

    def expand(self, node: Node) -> Words:
        """The words a word node becomes (several for "${array[@]}", "$@" or an unquoted expansion)."""
        kind = node.type
        if kind in ("string",):
            parts = node.named_children
            if len(parts) == 1 and parts[0].type in ("expansion", "simple_expansion"):
                multi = self._multi(parts[0])
                if multi is not None:
                    return multi
            joined = self._joined(node)
            return [joined]
        if kind in ("simple_expansion", "expansion"):
            multi = self._multi(node)
            if multi is not None:
                return multi
            value = self._joined(node)
            return [*value.split()] if value is not None else [None]
        return [self._joined(node)]

    def _multi(self, node: Node) -> Words | None:
        """The words of "$@" or "${name[@]}"; None when the node is not one of them."""
        text = _text(node)
        if text in ("$@", "${@}", "$*", "${*}"):
            return [ALL_ARGS] if self.positional is None else list(self.positional)
        subscript = next((c for c in node.named_children if c.type == "subscript"), None)
        if subscript is not None and text.endswith("[@]}") and text.count("[") == 1:
            name = subscript.child_by_field_name("name")
            values = self.variables.get(_text(name)) if name is not None else None
            return [None] if values is None else list(values)
        return None

    def _joined(self, node: Node) -> str | None:
        """The single string a node expands to, or None when any part of it is unknown."""
        kind = node.type
        if kind in ("word", "number", "extglob_pattern", "test_operator", "string_content"):
            return _text(node).replace("\\\n", "")
        if kind == "raw_string":
            return _text(node)[1:-1]
        if kind == "ansi_c_string":
            return _text(node)[2:-1]
        if kind in ("string", "concatenation"):
            pieces = _pieces(node)
            values = [self._joined(p) if not isinstance(p, str) else p for p in pieces]
            return None if None in values else "".join(str(v) for v in values)
        if kind in ("simple_expansion", "expansion"):
            return self._variable(node)
        return None  # $(...), $((...)), <(...): only known when the script runs

    def _variable(self, node: Node) -> str | None:
        named = node.named_children
        if len(named) != 1 or named[0].type not in ("variable_name", "special_variable_name"):
            return None  # ${X:-y}, ${X%%=*}, ${#X}, ${X[1]}: operators the walk does not evaluate
        if node.type == "expansion" and any(not c.is_named and c.type not in ("${", "}") for c in node.children):
            return None
        name = _text(named[0])
        if name.isdigit():
            index = int(name) - 1
            if self.positional is None or name == "0" or index >= len(self.positional):
                return None
            return self.positional[index]
        values = self.variables.get(name)
        return None if values is None else " ".join(values)


def _pieces(node: Node) -> list[Node | str]:
    """A string's parts, with the text between its named children (quotes dropped) kept as text."""
    text = node.text or b""
    start = node.start_byte
    pieces: list[Node | str] = []
    cursor = start + (1 if node.type == "string" else 0)
    end = node.end_byte - (1 if node.type == "string" else 0)
    for child in node.named_children:
        if child.start_byte > cursor:
            pieces.append(text[cursor - start : child.start_byte - start].decode())
        pieces.append(child)
        cursor = child.end_byte
    if end > cursor:
        pieces.append(text[cursor - start : end - start].decode())
    return pieces


def _assigned(node: Node) -> Iterator[str]:
    for child in node.named_children:
        if child.type == "variable_assignment":
            name = child.child_by_field_name("name")
            if name is not None:
                yield _text(name)
        yield from _assigned(child)


def _shifts(node: Node) -> bool:
    if node.type == "command_name" and node.text == b"shift":
        return True
    return any(_shifts(child) for child in node.named_children)


def _probed(events: Sequence[Event]) -> Iterator[str]:
    """The names a condition asks about: `command -v NAME`, `type NAME`, `which NAME`, `hash NAME`."""
    for event in events:
        if isinstance(event, Call) and event.words and event.words[0] in PROBES:
            flag = PROBES[event.words[0] or ""]
            args = list(event.words[1:])
            if flag is not None:
                if flag not in args:
                    continue
                args.remove(flag)
            yield from (a for a in args if a is not None and not a.startswith("-"))


def _text(node: Node) -> str:
    return (node.text or b"").decode(errors="replace")


def _line(node: Node) -> int:
    return node.start_point[0] + 1
