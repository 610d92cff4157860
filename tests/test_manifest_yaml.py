"""tools.manifest_yaml writes what yaml.safe_dump_all writes, through libyaml where that is the same."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from tests.conftest import STACKS, plan_of
from tools import manifest_yaml
from tools.plan import manifests

SCRIPT = '#!/bin/bash\nset -euo pipefail\nif [ -S "$1" ]; then\n  echo "ready \u2192 go"\nfi\n' * 4
# Documents where libyaml's emitter alone would write other text than PyYAML's.
DIFFICULT: list[dict[str, Any]] = [
    {"kind": "ConfigMap", "data": {"start.sh": SCRIPT}},  # a long double-quoted string, folded
    {"kind": "X", "data": {"": "empty key", "k" * 130: "long key"}},  # `? ` keys
    {"kind": "X", "data": {"tab": "a\tb " * 30, "unicode": "caf\u00e9 " * 30, "trailing": "line \nnext"}},
]
SIMPLE: list[dict[str, Any]] = [
    {
        "apiVersion": "v1",
        "kind": "X",
        "metadata": {"name": "x", "labels": {"a": "true", "b": "1.31", "c": "- x", "d": "#x", "e": "", "f": "'q'"}},
        "spec": {"long": " ".join(["word"] * 40), "list": [1, True, None, 1.5, {}, [], {"k": "v: w"}]},
    }
]


def test_every_stacks_manifests_are_written_as_safe_dump_all_writes_them() -> None:
    for stack in STACKS:
        for reveal in (False, True):
            documents = manifests(plan_of(stack), reveal=reveal)
            assert manifest_yaml.dump_all(documents) == yaml.safe_dump_all(documents, sort_keys=False)


def test_documents_libyaml_would_write_otherwise_are_written_as_safe_dump_all_writes_them() -> None:
    documents = SIMPLE + DIFFICULT + SIMPLE
    assert manifest_yaml.dump_all(documents) == yaml.safe_dump_all(documents, sort_keys=False)
    assert manifest_yaml.dump_all([]) == yaml.safe_dump_all([], sort_keys=False)


@pytest.mark.skipif(not yaml.__with_libyaml__, reason="PyYAML without libyaml")
def test_libyaml_alone_would_write_the_difficult_documents_otherwise() -> None:
    """Why the documents are sorted at all; if this fails, libyaml and PyYAML agree more than they did."""
    for document in DIFFICULT:
        assert yaml.dump(document, Dumper=yaml.CSafeDumper, sort_keys=False) != yaml.safe_dump(
            document, sort_keys=False
        )
    for document in SIMPLE:
        assert yaml.dump(document, Dumper=yaml.CSafeDumper, sort_keys=False) == yaml.safe_dump(
            document, sort_keys=False
        )
