"""What Kubernetes' controllers do to a workload's pods when its template or size changes, one step at a time.

Each function is one sync of a controller: from the pods as they are (their template revision,
readiness, node, ordinal) it says which pods to create and which to delete now; nothing when it
waits for readiness or is done. tests/lab/cloud/apply.py runs the steps against the lab's pods until
the workload is rolled. From Kubernetes (pkg/controller/deployment rolling.go, recreate.go and
util/deployment_util.go ResolveFenceposts; pkg/controller/daemon update.go and
util/daemonset_util.go SurgeCount, UnavailableCount; pkg/controller/statefulset
stateful_set_control.go) and its documentation (Deployments, StatefulSets "Rolling Updates",
DaemonSets "Perform a Rolling Update"):

- Deployment, RollingUpdate: maxSurge (25% by default, rounded up) and maxUnavailable (25%, rounded
  down; 1 when both come to 0) of the replicas. A sync either creates new pods, while all pods stay
  within replicas + surge, or deletes old ones: first those not ready, then ready ones while the
  ready pods stay at least replicas - unavailable. With one replica, maxSurge 1 and maxUnavailable 0
  (the program's singletons that may overlap), the new pod is ready before the old one goes.
- Deployment, Recreate: every old pod gone before the first new one is created.
- StatefulSet, RollingUpdate: missing ordinals created; then, once every pod is ready, the highest
  ordinal at or above `partition` still on an older revision is deleted (created again under its
  name by the next sync); ordinals below the partition stay as they are. OnDelete: none.
- DaemonSet, RollingUpdate: a pod on every node that admits it. Without maxSurge, old pods are
  deleted on as many nodes as maxUnavailable (1 by default; a percentage rounded up) leaves room
  for, counting nodes whose pod is not ready, unready old pods first; the next sync creates the new
  pods there. With maxSurge, the new pod starts beside the old one on that many nodes, and the old
  one goes once the new one is ready. OnDelete: only nodes without a pod get one.

Deleting a pod returns once the kubelet stopped it, so a sync sees the pods that remain. Scaling
(replicas changed) is the same step with the template unchanged. Where the lab runs fewer replicas
of a Deployment than the plan asks, its rolling update keeps the plan's share available
(`at_lab_scale`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

DEFAULT_SURGE = DEFAULT_UNAVAILABLE = "25%"  # a Deployment's RollingUpdate defaults
DAEMONSET_DEFAULT_UNAVAILABLE = 1


@dataclass(frozen=True)
class Pod:
    """A pod as its controller sees it."""

    name: str
    revision: int
    ready: bool
    index: int = 0  # a StatefulSet's ordinal (a Deployment's pods: the lab's index for their names)
    node: str = ""


@dataclass(frozen=True)
class Create:
    revision: int
    index: int = 0
    node: str | None = None  # a DaemonSet's node; None: where the scheduler places it


@dataclass(frozen=True)
class Delete:
    name: str


Action = Create | Delete


def scaled(value: int | str | None, total: int, default: int | str, round_up: bool) -> int:
    """An IntOrString of a rolling update against `total` (intstr.GetScaledValueFromIntOrPercent)."""
    value = default if value is None else value
    if isinstance(value, int) or str(value).isdigit():
        return int(value)
    if not str(value).endswith("%") or not str(value)[:-1].isdigit():
        raise ValueError(f"{value!r} is neither a number nor a percentage")
    share = int(str(value)[:-1]) * total / 100
    return math.ceil(share) if round_up else math.floor(share)


def fenceposts(strategy: Mapping[str, Any], replicas: int) -> tuple[int, int]:
    """A Deployment's (surge, unavailable) for `replicas` (ResolveFenceposts)."""
    rolling = strategy.get("rollingUpdate") or {}
    surge = scaled(rolling.get("maxSurge"), replicas, DEFAULT_SURGE, round_up=True)
    unavailable = scaled(rolling.get("maxUnavailable"), replicas, DEFAULT_UNAVAILABLE, round_up=False)
    return (surge, 1) if surge == 0 and unavailable == 0 else (surge, unavailable)


def at_lab_scale(strategy: Mapping[str, Any], planned: int, running: int) -> Mapping[str, Any]:
    """A Deployment's RollingUpdate for the `running` replicas the lab runs where the plan asks `planned`
    (tests/lab/cloud/deploy.py `deployment_replicas`): the share of the replicas the plan keeps available
    through a rollout is kept, so that the lab does not take down its only pod where the plan's two may
    lose one (maxUnavailable 1 of 2 replicas is half of them available; of one, that one)."""
    if strategy.get("type") == "Recreate" or running >= planned or running == 0:
        return strategy
    surge, unavailable = fenceposts(strategy, planned)
    kept = math.ceil(running * (planned - unavailable) / planned)
    return {**strategy, "rollingUpdate": {"maxSurge": surge, "maxUnavailable": running - kept}}


def _free_indexes(pods: Sequence[Pod], count: int) -> list[int]:
    taken = {p.index for p in pods}
    found: list[int] = []
    index = 0
    while len(found) < count:
        if index not in taken:
            found.append(index)
        index += 1
    return found


def deployment(strategy: Mapping[str, Any], replicas: int, pods: Sequence[Pod], revision: int) -> list[Action]:
    new = [p for p in pods if p.revision == revision]
    old = [p for p in pods if p.revision != revision]
    if strategy.get("type") == "Recreate":
        if old:
            return [Delete(p.name) for p in old]
        return [Create(revision, i) for i in _free_indexes(pods, replicas - len(new))] + [
            Delete(p.name) for p in sorted(new, key=lambda p: -p.index)[: max(0, len(new) - replicas)]
        ]
    surge, unavailable = fenceposts(strategy, replicas)
    room = min(replicas + surge - len(pods), replicas - len(new))
    if room > 0:
        return [Create(revision, i) for i in _free_indexes(pods, room)]
    if len(new) > replicas:  # scaled down with nothing old left: the newest ordinals go
        return [Delete(p.name) for p in sorted(new, key=lambda p: -p.index)[: len(new) - replicas]]
    minimum = replicas - unavailable
    new_unavailable = sum(not p.ready for p in new)
    budget = len(pods) - minimum - new_unavailable
    if budget <= 0 or not old:
        return []
    unready = [p for p in old if not p.ready][:budget]
    ready_left = sum(p.ready for p in pods)
    ready_old = [p for p in old if p.ready][: max(0, min(budget - len(unready), ready_left - minimum))]
    return [Delete(p.name) for p in [*unready, *ready_old]]


def statefulset(strategy: Mapping[str, Any], replicas: int, pods: Sequence[Pod], revision: int,
                current: int) -> list[Action]:  # fmt: skip
    """`current` is the revision pods below the partition are created at (the StatefulSet's currentRevision)."""
    rolling = strategy.get("rollingUpdate") or {}
    partition = int(rolling.get("partition", 0))
    on_delete = strategy.get("type") == "OnDelete"
    extra = sorted((p for p in pods if p.index >= replicas), key=lambda p: -p.index)
    if extra:
        return [Delete(extra[0].name)]  # scaled down: the highest ordinal first
    present = {p.index for p in pods}
    missing = [i for i in range(replicas) if i not in present]
    if missing:
        return [Create(revision if on_delete or i >= partition else current, i) for i in missing]
    if on_delete or not all(p.ready for p in pods):
        return []
    stale = sorted((p for p in pods if p.index >= partition and p.revision != revision), key=lambda p: -p.index)
    return [Delete(stale[0].name)] if stale else []


def daemonset(strategy: Mapping[str, Any], nodes: Sequence[str], pods: Sequence[Pod], revision: int) -> list[Action]:
    on_delete = strategy.get("type") == "OnDelete"
    rolling = strategy.get("rollingUpdate") or {}
    surge = 0 if on_delete else scaled(rolling.get("maxSurge"), len(nodes), 0, round_up=True)
    unavailable = scaled(rolling.get("maxUnavailable"), len(nodes), DAEMONSET_DEFAULT_UNAVAILABLE, round_up=True)
    actions: list[Action] = [Delete(p.name) for p in pods if p.node not in nodes]
    by_node = {n: [p for p in pods if p.node == n] for n in nodes}
    actions += [Create(revision, node=n) for n, found in by_node.items() if not found]
    if on_delete or actions:
        return actions
    if surge:
        rolling_nodes = [n for n, found in by_node.items() if any(p.revision == revision for p in found)
                         and any(p.revision != revision for p in found)]  # fmt: skip
        for node in rolling_nodes:  # the new pod is ready: its predecessor goes
            new = next(p for p in by_node[node] if p.revision == revision)
            if new.ready:
                actions += [Delete(p.name) for p in by_node[node] if p.revision != revision]
        waiting = [n for n, found in by_node.items() if all(p.revision != revision for p in found)]
        # Old pods that are not ready are replaced at once, without surging (daemon/update.go).
        for node in waiting:
            if not any(p.ready for p in by_node[node]):
                actions += [Delete(p.name) for p in by_node[node]]
        room = surge - len(rolling_nodes)
        ready_waiting = [n for n in waiting if any(p.ready for p in by_node[n])]
        return actions + [Create(revision, node=n) for n in ready_waiting[: max(0, room)]]
    down = sum(1 for found in by_node.values() if not any(p.ready for p in found))
    stale = [(n, p) for n, found in by_node.items() for p in found if p.revision != revision]
    unready = [(n, p) for n, p in stale if not p.ready]
    ready = [(n, p) for n, p in stale if p.ready][: max(0, unavailable - down)]
    return [Delete(p.name) for _, p in [*unready, *ready]]
