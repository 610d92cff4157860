"""Where the scheduler puts a pod, and which nodes a DaemonSet runs on, from the pod's own spec.

What kube-scheduler and the DaemonSet controller read, and nothing else: `nodeSelector`,
required node affinity (`matchExpressions`, `matchFields` on `metadata.name`), taints and
`tolerations`, a cordoned node (`spec.unschedulable`; DaemonSet pods tolerate it, as the
DaemonSet controller adds that toleration), and pod anti-affinity on `kubernetes.io/hostname`:
required terms keep two matching pods off one node, preferred terms spread them where they can
(the node with the least weight of matching pods wins, ties to the first node). A scheduling
field the lab does not implement is an error, not ignored.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Protocol

Manifest = dict[str, Any]
HOSTNAME = "kubernetes.io/hostname"
# What the DaemonSet controller adds to every DaemonSet pod (pkg/controller/daemon/util).
DAEMONSET_TOLERATIONS = (
    {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute"},
    {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute"},
    {"key": "node.kubernetes.io/disk-pressure", "operator": "Exists", "effect": "NoSchedule"},
    {"key": "node.kubernetes.io/memory-pressure", "operator": "Exists", "effect": "NoSchedule"},
    {"key": "node.kubernetes.io/pid-pressure", "operator": "Exists", "effect": "NoSchedule"},
    {"key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": "NoSchedule"},
)
UNSCHEDULABLE = {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}
_AFFINITY_FIELDS = {"nodeAffinity", "podAntiAffinity"}


class SchedulingError(ValueError):
    """A scheduling rule of the manifest that the lab does not implement."""


class SchedulableNode(Protocol):
    name: str
    labels: dict[str, str]
    taints: list[dict[str, Any]]
    unschedulable: bool


def admits(node: SchedulableNode, spec: Manifest, daemonset: bool = False) -> tuple[bool, str]:
    """Would this pod run on the node? (and if not, why, as `kubectl describe` would say)."""
    labels = {HOSTNAME: node.name, **node.labels}
    for key, value in (spec.get("nodeSelector") or {}).items():
        if labels.get(key) != value:
            return False, f"node {node.name} didn't match Pod's node selector {key}={value}"
    affinity = spec.get("affinity") or {}
    unknown = set(affinity) - _AFFINITY_FIELDS
    if unknown:
        raise SchedulingError(f"affinity {sorted(unknown)} is not implemented by the lab's scheduler")
    required = (affinity.get("nodeAffinity") or {}).get("requiredDuringSchedulingIgnoredDuringExecution")
    if required and not any(_term_matches(node.name, labels, term) for term in required["nodeSelectorTerms"]):
        return False, f"node {node.name} didn't match Pod's node affinity"
    tolerations = [*(spec.get("tolerations") or []), *(DAEMONSET_TOLERATIONS if daemonset else ())]
    taints = [*node.taints, *([UNSCHEDULABLE] if node.unschedulable else [])]
    for taint in taints:
        if taint.get("effect") in ("NoSchedule", "NoExecute") and not any(_tolerates(t, taint) for t in tolerations):
            return False, f"node {node.name} had untolerated taint {taint['key']}: {taint.get('value', '')}"
    return True, ""


def _term_matches(name: str, labels: Mapping[str, str], term: Manifest) -> bool:
    unknown = set(term) - {"matchExpressions", "matchFields"}
    if unknown:
        raise SchedulingError(f"nodeSelectorTerm fields {sorted(unknown)} are not implemented")
    fields = {"metadata.name": name}
    return all(_expression(labels, e) for e in term.get("matchExpressions", [])) and all(
        _expression(fields, e) for e in term.get("matchFields", [])
    )


def _expression(labels: Mapping[str, str], expression: Manifest) -> bool:
    key, operator, values = expression["key"], expression["operator"], expression.get("values", [])
    if operator == "In":
        return labels.get(key) in values
    if operator == "NotIn":
        return labels.get(key) not in values
    if operator == "Exists":
        return key in labels
    if operator == "DoesNotExist":
        return key not in labels
    if operator in ("Gt", "Lt") and key in labels:
        number, bound = int(labels[key]), int(values[0])
        return number > bound if operator == "Gt" else number < bound
    if operator in ("Gt", "Lt"):
        return False
    raise SchedulingError(f"node selector operator {operator!r} is not implemented")


def _tolerates(toleration: Manifest, taint: Manifest) -> bool:
    if toleration.get("effect") and toleration["effect"] != taint.get("effect"):
        return False
    if toleration.get("operator", "Equal") == "Exists":
        return not toleration.get("key") or toleration["key"] == taint["key"]
    return toleration.get("key") == taint["key"] and toleration.get("value", "") == taint.get("value", "")


def _selects(selector: Manifest, labels: Mapping[str, str]) -> bool:
    unknown = set(selector) - {"matchLabels", "matchExpressions"}
    if unknown:
        raise SchedulingError(f"label selector fields {sorted(unknown)} are not implemented")
    return all(labels.get(k) == v for k, v in (selector.get("matchLabels") or {}).items()) and all(
        _expression(labels, e) for e in selector.get("matchExpressions", [])
    )


def place(
    spec: Manifest,
    nodes: Sequence[SchedulableNode],
    running: Iterable[tuple[str, Mapping[str, str]]],
) -> tuple[SchedulableNode | None, str]:
    """The node for one more pod of this spec, given the pods already running (node name, labels)."""
    anti = (spec.get("affinity") or {}).get("podAntiAffinity") or {}
    unknown = set(anti) - {
        "requiredDuringSchedulingIgnoredDuringExecution",
        "preferredDuringSchedulingIgnoredDuringExecution",
    }
    if unknown:
        raise SchedulingError(f"podAntiAffinity {sorted(unknown)} is not implemented")
    required = anti.get("requiredDuringSchedulingIgnoredDuringExecution") or []
    preferred = anti.get("preferredDuringSchedulingIgnoredDuringExecution") or []
    for term in [*required, *(p["podAffinityTerm"] for p in preferred)]:
        if term.get("topologyKey") != HOSTNAME:
            raise SchedulingError(f"pod anti-affinity over {term.get('topologyKey')!r} is not implemented")
    pods = list(running)
    reasons = []
    candidates = []
    for node in nodes:
        ok, why = admits(node, spec)
        if ok and any(_selects(t["labelSelector"], labels) for t in required for n, labels in pods if n == node.name):
            ok, why = False, f"node {node.name} didn't satisfy existing pods anti-affinity rules"
        if ok:
            weight = sum(
                p["weight"] for p in preferred for n, labels in pods
                if n == node.name and _selects(p["podAffinityTerm"]["labelSelector"], labels)
            )  # fmt: skip
            candidates.append((weight, node))
        else:
            reasons.append(why)
    if not candidates:
        return None, f"0/{len(nodes)} nodes are available: " + "; ".join(reasons)
    return min(candidates, key=lambda c: c[0])[1], ""
