"""Names, labels and checksums shared by every object the program declares."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

PART_OF = "openstack"
MANAGED_BY = "pulumi"


def labels(service: str, component: str, **extra: str) -> dict[str, str]:
    """The recommended Kubernetes labels; `name` is the OpenStack service, `component` its part."""
    return {
        "app.kubernetes.io/name": service,
        "app.kubernetes.io/component": component,
        "app.kubernetes.io/part-of": PART_OF,
        "app.kubernetes.io/managed-by": MANAGED_BY,
        **extra,
    }


def selector(service: str, component: str, **extra: str) -> dict[str, str]:
    """The immutable subset of `labels` that workloads select their pods by."""
    return {"app.kubernetes.io/name": service, "app.kubernetes.io/component": component, **extra}


def metadata(name: str, namespace: str, service: str, component: str, **annotations: str) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": namespace, "labels": labels(service, component)}
    if annotations:
        meta["annotations"] = dict(annotations)
    return meta


def labelled(meta: dict[str, Any], object_labels: Mapping[str, str]) -> dict[str, Any]:
    """`meta` with labels of the object's own, never its pods' (a change rolls no pod)."""
    return {**meta, "labels": {**meta["labels"], **object_labels}} if object_labels else meta


def checksum(*parts: Any) -> str:
    """A stable digest of config content; put on pod templates so a config change rolls the pods."""
    digest = hashlib.sha256()
    for part in parts:
        digest.update(json.dumps(part, sort_keys=True, default=str).encode())
    return digest.hexdigest()
