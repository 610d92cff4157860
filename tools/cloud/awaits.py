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
