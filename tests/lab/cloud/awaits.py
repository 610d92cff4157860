"""When `pulumi up` stops waiting for an object, and for how long it waits: pulumi-kubernetes' awaiters.

From pulumi-kubernetes (provider/pkg/await: awaiters.go, deployment.go, statefulset.go,
daemonset.go, job.go, service.go): a Deployment is done when all its replicas are updated and
available, a StatefulSet when all are ready, a DaemonSet when its pod on every node it is
scheduled to is ready, a Job when it completed (a failed Job fails the update), a Service with
a selector and a cluster address when it has Ready endpoints and no unready ones (headless
Services, Services without a selector and ExternalName ones at once), a PersistentVolumeClaim
when it is bound (or pending, for a WaitForFirstConsumer class), a custom resource with
`pulumi.com/waitFor` when the condition holds, anything else at once. `pulumi.com/skipAwait`
turns every wait off. Each wait ends with an error after its timeout: the resource's customTimeouts
of the operation (create, update, delete), else `pulumi.com/timeoutSeconds`, else the kind's default
(10 minutes; 5 for claims): provider/pkg/metadata/overrides.go TimeoutDuration takes the engine's
timeout first, await.go Creation, Update and Deletion pass it the operation's.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

SKIP_AWAIT = "pulumi.com/skipAwait"
TIMEOUT_ANNOTATION = "pulumi.com/timeoutSeconds"
WAIT_FOR = "pulumi.com/waitFor"
DEFAULT_TIMEOUTS = {"PersistentVolumeClaim": 300, "PersistentVolume": 300}
DEFAULT_TIMEOUT = 600
# Kinds whose creation pulumi-kubernetes does not wait on beyond the API server's answer.
AWAITED_KINDS = {"Deployment", "StatefulSet", "DaemonSet", "Job", "Service", "PersistentVolumeClaim", "Pod"}
_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ns|us|µs|ms|s|m|h)")
_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1, "m": 60, "h": 3600}


def go_duration(text: str) -> float:
    """Seconds of a Go duration as customTimeouts carry it ('30m', '1h30m', '90s')."""
    parts = _DURATION.findall(text)
    if not parts or "".join(n + u for n, u in parts) != text:
        raise ValueError(f"not a Go duration: {text!r}")
    return sum(float(n) * _UNITS[u] for n, u in parts)


def timeout_seconds(
    kind: str, metadata: Mapping[str, Any], custom_timeouts: Mapping[str, str], operation: str = "create"
) -> float:
    """How long pulumi-kubernetes waits for an object's `operation` (create, update or delete)."""
    annotations = metadata.get("annotations") or {}
    if custom_timeouts.get(operation):
        return go_duration(custom_timeouts[operation])
    if TIMEOUT_ANNOTATION in annotations:
        return float(annotations[TIMEOUT_ANNOTATION])
    return float(DEFAULT_TIMEOUTS.get(kind, DEFAULT_TIMEOUT)) if operation == "create" else float(DEFAULT_TIMEOUT)


def awaited(kind: str, manifest: Mapping[str, Any]) -> bool:
    """Does `pulumi up` wait for this object at all?"""
    annotations = (manifest.get("metadata") or {}).get("annotations") or {}
    if annotations.get(SKIP_AWAIT) == "true":
        return False
    if WAIT_FOR in annotations:
        return True
    if kind == "Service":
        spec = manifest.get("spec") or {}
        return (
            spec.get("type", "ClusterIP") != "ExternalName"
            and spec.get("clusterIP") != "None"
            and bool(spec.get("selector"))
        )
    return kind in AWAITED_KINDS


# kubectl wait's JSONPath as pulumi-kubernetes' waitFor takes it (provider/pkg/await/condition): dotted keys,
# indexes and filters `[?(@.key=='value')]`, the forms a status condition is read with.
_STEP = re.compile(r"\.([A-Za-z0-9_-]+)|\[(\d+)\]|\[\?\(@\.([A-Za-z0-9_-]+)\s*==\s*['\"]([^'\"]*)['\"]\)\]")


def jsonpath(document: Any, path: str) -> list[Any]:
    """The values `{.a.b[?(@.k=='v')].c}` selects in `document` (a list: a filter may select several)."""
    inner = path.strip()
    if not (inner.startswith("{") and inner.endswith("}")):
        raise ValueError(f"not a JSONPath in braces: {path!r}")
    inner, position, found = inner[1:-1], 0, [document]
    while position < len(inner):
        step = _STEP.match(inner, position)
        if step is None:
            raise ValueError(f"JSONPath {path!r}: {inner[position:]!r} is not a form the lab reads")
        key, index, field, value = step.groups()
        selected: list[Any] = []
        for item in found:
            if key is not None and isinstance(item, dict) and key in item:
                selected.append(item[key])
            elif index is not None and isinstance(item, list) and int(index) < len(item):
                selected.append(item[int(index)])
            elif field is not None and isinstance(item, list):
                selected += [e for e in item if isinstance(e, dict) and str(e.get(field)) == value]
        found, position = selected, step.end()
    return found


def wait_for_met(expression: str, document: Any) -> bool:
    """Whether an object (its `status` included) meets a `pulumi.com/waitFor`: `condition=Type` (True) or
    `jsonpath={...}=value` (or `jsonpath={...}`: the path selects something)."""
    if expression.startswith("condition="):
        wanted = expression.removeprefix("condition=")
        conditions = (document.get("status") or {}).get("conditions") or []
        return any(c.get("type") == wanted and c.get("status") == "True" for c in conditions)
    if expression.startswith("jsonpath="):
        body = expression.removeprefix("jsonpath=")
        path, separator, value = body.partition("}=")
        if separator:
            return any(str(v) == value for v in jsonpath(document, path + "}"))
        return bool(jsonpath(document, body))
    raise ValueError(f"waitFor {expression!r}: the lab reads condition= and jsonpath= only")
