"""tools.schemas: kubernetes_validate's verdicts, with its schemas read once."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import kubernetes_validate
import pytest

from tests.conftest import plan_of
from tools import schemas

Validate = Callable[..., str]  # kubernetes_validate.validate or tools.schemas.validate


def verdict(validate: Validate, obj: dict[str, Any], version: str) -> tuple[Any, ...]:
    try:
        return ("valid", validate(obj, version, strict=True))
    except kubernetes_validate.SchemaNotFoundError as error:
        return ("no schema", error.message)
    except kubernetes_validate.ValidationError as error:
        return ("invalid", error.message, list(error.path), list(error.schema_path), error.version)


def broken(obj: dict[str, Any]) -> list[dict[str, Any]]:
    """The object with an unknown field, and with a wrongly typed one."""
    unknown, wrong = copy.deepcopy(obj), copy.deepcopy(obj)
    unknown["metadata"]["surplus"] = "x"
    wrong["metadata"]["name"] = 5
    return [unknown, wrong]


@pytest.mark.parametrize("version", ["1.31.0", "v1.29.2"])
def test_each_kind_of_the_prod_plan_gets_the_librarys_verdict(version: str) -> None:
    one_per_kind = {r.kind: r.revealed for r in plan_of("prod").custom if r.kind}
    assert {"DaemonSet", "MariaDB", "Secret"} <= set(one_per_kind)  # built-in kinds and a custom resource
    for obj in one_per_kind.values():
        for case in [obj, *broken(obj)]:
            assert verdict(schemas.validate, case, version) == verdict(kubernetes_validate.validate, case, version)


def test_a_version_newer_than_the_schemas_is_refused_as_by_the_library() -> None:
    obj = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}}
    with pytest.raises(kubernetes_validate.utils.VersionNotSupportedError):
        kubernetes_validate.validate(obj, "9.99.0")
    with pytest.raises(kubernetes_validate.utils.VersionNotSupportedError):
        schemas.validate(obj, "9.99.0")
