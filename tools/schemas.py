"""Kubernetes API schema validation with every schema read once per process.

`kubernetes_validate.validate` reads and parses the kind's schema and the version's
`_definitions.json` (1.3 MB of JSON) for every object it validates, and builds a new
reference registry each time; a plan validates hundreds of objects of a dozen kinds.
`validate` here does what it does (the same version resolution, schema files, validator
class and exceptions, so the same verdicts and messages) with one validator per
(version, kind, apiVersion, strictness).
"""

from __future__ import annotations

import re
from functools import cache
from typing import Any

import jsonschema
import kubernetes_validate
from jsonschema.protocols import Validator
from jsonschema.validators import Draft202012Validator
from kubernetes_validate import utils
from referencing import Registry, Resource


@cache
def _resolved(desired_version: str) -> str:
    """The newest schema version not newer than `desired_version` (as kubernetes_validate picks it)."""
    if utils.major_minor(desired_version) > utils.latest_version():
        raise utils.VersionNotSupportedError(version=utils.major_minor(desired_version))
    return [v for v in utils.all_versions() if utils.major_minor(v) <= utils.major_minor(desired_version)][-1]


@cache
def _definitions(schema_dir: str, desired_version: str) -> Resource:
    path = f"kubernetes-json-schema/{schema_dir}/_definitions.json"
    return Resource.from_contents(utils.schema_contents(path, desired_version))


@cache
def _validator(desired_version: str, strict: bool, kind: str, api_version: str) -> Validator | None:
    """The validator of a kind, or None when the version has no schema for it (a custom resource)."""
    schema_dir = f"v{_resolved(desired_version)}-local" + ("-strict" if strict else "")
    # rbac.authorization.k8s.io/v1 → rbac-v1, as the schema files are named
    group_version = re.sub(r"^([^./]*)(?:\.[^/]*)?/", r"\1-", api_version)
    try:
        schema = utils.schema_contents(
            f"kubernetes-json-schema/{schema_dir}/{kind.lower()}-{group_version}.json", desired_version
        )
    except FileNotFoundError:
        return None
    registry: Registry = Resource.from_contents(schema) @ Registry()
    registry = _definitions(schema_dir, desired_version) @ registry
    return Draft202012Validator(schema, registry=registry)


def validate(data: dict[str, Any], desired_version: str, strict: bool = False) -> str:
    """Validate one object; raises kubernetes_validate's SchemaNotFoundError or ValidationError.

    Returns the major.minor version of the schema used, as kubernetes_validate.validate does.
    """
    desired_version = desired_version.removeprefix("v")
    validator = _validator(desired_version, strict, data["kind"], data["apiVersion"])
    if validator is None:
        raise kubernetes_validate.SchemaNotFoundError(
            version=utils.major_minor(desired_version), kind=data["kind"], api_version=data["apiVersion"]
        )
    version = utils.major_minor(_resolved(desired_version))
    try:
        validator.validate(data)
    except jsonschema.ValidationError as error:
        raise kubernetes_validate.ValidationError(error, version=version)  # noqa: B904 (as the library raises it)
    return version
