"""YAML read as the tools that consume it read it, so what is judged is what is applied.

- `KubectlLoader`: manifests as kubectl reads them. kubectl turns YAML into JSON with
  sigs.k8s.io/yaml, which decodes with go-yaml v2: YAML 1.1 booleans, `y`, `Y`, `n` and `N`
  among them (go-yaml v2 resolve.go), where PyYAML reads `y` as a string. `privileged: y` is
  true to the API server, so it must be true to the pack. kubectl refuses a mapping with a
  key twice ("mapping key ... already defined", e.g. k8up-io/k8up#452); PyYAML would keep the
  last value, so a file could show the pack another value than the one a reader sees first.
- `PulumiCliLoader`: stack files as the Pulumi CLI reads them, with go-yaml v3: a key twice is
  an error ("mapping key ... already defined"), and only `true`/`false` (any case variant the
  YAML 1.2 core schema has) are booleans; `yes`, `on`, `y` stay text (go-yaml v3 README,
  "Compatibility": YAML 1.1 booleans only when decoding into a bool).
"""

from __future__ import annotations

import re
from typing import Any, ClassVar

import yaml
from yaml.constructor import ConstructorError

BOOL = "tag:yaml.org,2002:bool"
MERGE = "tag:yaml.org,2002:merge"
# go-yaml v2's boolean words (resolve.go, resolveMapList).
GO_YAML_V2_BOOLS = {
    **dict.fromkeys(("y", "Y", "yes", "Yes", "YES", "true", "True", "TRUE", "on", "On", "ON"), True),
    **dict.fromkeys(("n", "N", "no", "No", "NO", "false", "False", "FALSE", "off", "Off", "OFF"), False),
}
# The YAML 1.2 core schema's, which go-yaml v3 resolves into an untyped value.
YAML_1_2_BOOLS = {**dict.fromkeys(("true", "True", "TRUE"), True), **dict.fromkeys(("false", "False", "FALSE"), False)}


def duplicate_key(node: yaml.Node) -> tuple[str, yaml.Mark] | None:
    """The first key written twice in one mapping anywhere under `node`, with where it is."""
    todo = [node]
    while todo:
        current = todo.pop()
        if isinstance(current, yaml.MappingNode):
            seen: set[tuple[str, str]] = set()
            for key, value in current.value:
                if isinstance(key, yaml.ScalarNode) and key.tag != MERGE:
                    if (key.tag, key.value) in seen:
                        return key.value, key.start_mark
                    seen.add((key.tag, key.value))
                todo += [key, value]
        elif isinstance(current, yaml.SequenceNode):
            todo += current.value
    return None


# go-yaml refuses a document whose aliases expand it far beyond its own size ("document contains
# excessive aliasing": decode.go allowedAliasRatio), the defence against alias bombs; so does this
# reader, before it builds a single value. And a document nested deeper than Python's parser can
# recurse is refused with a message, not a RecursionError.
MAX_EXPANDED_NODES = 1_000_000
ALIAS_RATIO = 10


class ExcessiveAliasingError(yaml.YAMLError):
    pass


def expanded_size(node: yaml.Node) -> tuple[int, int]:
    """(nodes the document has, nodes it has once every alias is expanded), without expanding it."""
    sizes: dict[int, int] = {}
    order: list[yaml.Node] = []
    todo = [node]
    while todo:  # each distinct node once, children after their parent
        current = todo.pop()
        if id(current) in sizes:
            continue
        sizes[id(current)] = 0
        order.append(current)
        if isinstance(current, yaml.MappingNode):
            todo += [part for pair in current.value for part in pair]
        elif isinstance(current, yaml.SequenceNode):
            todo += current.value
    for current in reversed(order):  # children first
        children: list[yaml.Node] = []
        if isinstance(current, yaml.MappingNode):
            children = [part for pair in current.value for part in pair]
        elif isinstance(current, yaml.SequenceNode):
            children = current.value
        sizes[id(current)] = min(1 + sum(sizes[id(c)] for c in children), 10 * MAX_EXPANDED_NODES)
    return len(order), sizes[id(node)]


def check_expansion(node: yaml.Node) -> None:
    distinct, expanded = expanded_size(node)
    if expanded > MAX_EXPANDED_NODES and expanded > ALIAS_RATIO * distinct:
        raise ExcessiveAliasingError(
            f"document contains excessive aliasing: {distinct} nodes expand to more than {MAX_EXPANDED_NODES:,} "
            "(go-yaml, which kubectl and the Pulumi CLI read YAML with, refuses it too)"
        )


def compose_all(text: str, loader: type[yaml.SafeLoader]) -> list[yaml.Node]:
    """Every document's node tree, each checked for alias bombs; a clear error for too deep a nesting."""
    try:
        nodes = [node for node in yaml.compose_all(text, Loader=loader) if node is not None]
    except RecursionError:
        raise yaml.YAMLError("nested too deeply to read (more levels than a manifest or stack file has)") from None
    for node in nodes:
        check_expansion(node)
    return nodes


def load_all(text: str, loader: type[_Strict]) -> list[Any]:
    """The documents' values, as `loader` reads them, after compose_all's checks."""
    try:
        return [loader("").construct_document(node) for node in compose_all(text, loader)]
    except RecursionError:
        raise yaml.YAMLError("nested too deeply to read (more levels than a manifest or stack file has)") from None


class _Strict(yaml.SafeLoader):
    """SafeLoader that refuses a mapping with a key twice, and resolves booleans from `bools` only."""

    bools: ClassVar[dict[str, bool]] = {}

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        found = duplicate_key(node)
        if found is not None:
            key, mark = found
            raise ConstructorError(None, None, f'duplicate key "{key}"', mark)
        return super().construct_mapping(node, deep=deep)

    def flatten_mapping(self, node: yaml.MappingNode) -> None:
        """Merge keys as go-yaml merges them (v2 and v3, decode.go `merge`): of the maps `<<: [*a, *b]`
        lists, the first one's value wins, and the mapping's own keys win over every merged one.
        PyYAML lets the last listed map win, so it would judge `<<: [*privileged, *unprivileged]`
        unprivileged where the cluster runs it privileged. A new node per list: aliases share nodes."""
        node.value = [
            (key, yaml.SequenceNode(value.tag, value.value[::-1], value.start_mark, value.end_mark))
            if key.tag == MERGE and isinstance(value, yaml.SequenceNode)
            else (key, value)
            for key, value in node.value
        ]
        super().flatten_mapping(node)

    def construct_yaml_bool(self, node: yaml.ScalarNode) -> bool:
        return self.bools[self.construct_scalar(node)]  # type: ignore[index]


def _with_bools(loader: type[_Strict], words: dict[str, bool]) -> None:
    """Make `words`, and only them, booleans for this loader (a resolver per first character)."""
    loader.bools = words
    resolvers = {first: [r for r in found if r[0] != BOOL] for first, found in loader.yaml_implicit_resolvers.items()}
    pattern = re.compile("^(?:" + "|".join(map(re.escape, words)) + ")$")
    for first in {word[0] for word in words}:
        resolvers.setdefault(first, []).insert(0, (BOOL, pattern))
    loader.yaml_implicit_resolvers = resolvers
    loader.add_constructor(BOOL, _Strict.construct_yaml_bool)


class KubectlLoader(_Strict):
    pass


class PulumiCliLoader(_Strict):
    pass


_with_bools(KubectlLoader, GO_YAML_V2_BOOLS)
_with_bools(PulumiCliLoader, YAML_1_2_BOOLS)
