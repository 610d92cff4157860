"""manifests.yaml exactly as `yaml.safe_dump_all(documents, sort_keys=False)` writes it, faster.

libyaml's emitter (PyYAML's CSafeDumper) is several times faster than PyYAML's own, but
does not always write the same text: it folds long double-quoted strings (scripts, text
with tabs, non-ASCII, line breaks next to spaces) differently, and writes empty or long
(128+ characters) keys as simple keys where PyYAML writes `? key`. Where every string of
a document is one line of printable ASCII and every key is 1 to 100 characters, neither
case arises and both write the same text (plain or single-quoted scalars, folded alike):
such documents, most of a plan, go through libyaml, the others through PyYAML's emitter.
tests/test_manifest_yaml.py holds the result to safe_dump_all.
"""

from __future__ import annotations

import re
from typing import Any

import yaml

_ONE_PRINTABLE_LINE = re.compile(r"[\x20-\x7e]*")
_LONGEST_KEY = 100


def _libyaml_writes_alike(value: Any) -> bool:
    if isinstance(value, str):
        return _ONE_PRINTABLE_LINE.fullmatch(value) is not None
    if isinstance(value, dict):
        return all(
            isinstance(key, str) and 0 < len(key) <= _LONGEST_KEY and _libyaml_writes_alike(key) for key in value
        ) and all(_libyaml_writes_alike(item) for item in value.values())
    if isinstance(value, list):
        return all(_libyaml_writes_alike(item) for item in value)
    return value is None or isinstance(value, bool | int | float)


def dump_all(documents: list[Any]) -> str:
    """The documents as YAML, each after the first behind a `---` line, as safe_dump_all writes them."""
    if not yaml.__with_libyaml__ or not all(isinstance(d, dict) and d for d in documents):
        # Without libyaml, or a document that is not a block mapping (whose `---` shares its line).
        return yaml.safe_dump_all(documents, sort_keys=False)
    return "---\n".join(
        yaml.dump(d, Dumper=yaml.CSafeDumper if _libyaml_writes_alike(d) else yaml.SafeDumper, sort_keys=False)
        for d in documents
    )
