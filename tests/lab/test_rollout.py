"""Kubernetes' controllers rolling a workload to a new template (tests/lab/cloud/rollout.py), sync by sync.

The pods here are a small simulation (a test double: no kubelet runs in a unit test): a created pod
becomes ready after `ready_after` syncs, a deleted one is gone at once. Each test follows one
rollout to its end and checks what the controller guarantees on the way: how many pods were ready
at every moment, in which order pods were replaced, what OnDelete and a partition leave alone.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

import pytest

from tests.lab.cloud import rollout
from tests.lab.cloud.rollout import Create, Delete, Pod

ROLLING = {"type": "RollingUpdate"}


@dataclass
class World:
    """Pods as a controller sees them, and what happened to them."""

    pods: list[Pod]
    ready_after: int = 2  # syncs until a created pod is ready
    log: list[str] = field(default_factory=list)
    ready_counts: list[int] = field(default_factory=list)
    totals: list[int] = field(default_factory=list)  # pods at every moment
    _age: dict[str, int] = field(default_factory=dict)
    _made: int = 0

    def tick(self) -> None:
        for name in list(self._age):
            self._age[name] += 1
            if self._age[name] >= self.ready_after:
                self.pods = [replace(p, ready=True) if p.name == name else p for p in self.pods]
                del self._age[name]
        self.ready_counts.append(sum(p.ready for p in self.pods))

    def do(self, actions: list[rollout.Action]) -> None:
        for action in actions:
            if isinstance(action, Delete):
                self.pods = [p for p in self.pods if p.name != action.name]
                self.log.append(f"delete {action.name}")
            else:
                self._made += 1
                name = f"new-{action.node or action.index}-{self._made}"
                self.pods.append(Pod(name, action.revision, False, action.index, action.node or ""))
                self._age[name] = 0
                self.log.append(f"create {action.node or action.index}@{action.revision}")
            self.ready_counts.append(sum(p.ready for p in self.pods))
            self.totals.append(len(self.pods))

    def run(self, sync: Any, limit: int = 200) -> None:
        for _ in range(limit):
            actions = sync(self.pods)
            if not actions and not self._age:
                return
            self.do(actions)
            self.tick()
        raise AssertionError(f"no end after {limit} syncs: {self.log}")


def old_pods(count: int, nodes: list[str] | None = None) -> list[Pod]:
    return [Pod(f"old-{i}", 0, True, i, (nodes or [""] * count)[i]) for i in range(count)]


def test_fenceposts_round_surge_up_and_unavailability_down() -> None:
    assert rollout.fenceposts({}, 4) == (1, 1)  # 25% of 4 each
    assert rollout.fenceposts({}, 1) == (1, 0)  # surge rounds up to 1, unavailable down to 0
    assert rollout.fenceposts({"rollingUpdate": {"maxSurge": 0, "maxUnavailable": "10%"}}, 3) == (0, 1)  # never 0/0
    assert rollout.fenceposts({"rollingUpdate": {"maxSurge": "50%", "maxUnavailable": 0}}, 3) == (2, 0)
    with pytest.raises(ValueError, match="percentage"):
        rollout.fenceposts({"rollingUpdate": {"maxSurge": "one"}}, 3)


def test_a_single_replica_with_surge_one_is_replaced_only_once_its_successor_is_ready() -> None:
    strategy = {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}}
    world = World(old_pods(1))
    world.run(lambda pods: rollout.deployment(strategy, 1, pods, 1))
    assert world.log == ["create 1@1", "delete old-0"]  # (1: the index its name is made from, 0 being taken)
    assert min(world.ready_counts) == 1  # a ready pod at every moment
    assert [p.revision for p in world.pods] == [1]


def test_the_lab_running_one_of_the_plans_two_replicas_keeps_it_until_its_successor_is_ready() -> None:
    # staging's APIs: two replicas, maxUnavailable 1 (one of them always serves); the lab runs one.
    strategy = {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 1}}
    at_lab = rollout.at_lab_scale(strategy, 2, 1)
    assert at_lab["rollingUpdate"] == {"maxSurge": 1, "maxUnavailable": 0}
    world = World(old_pods(1))
    world.run(lambda pods: rollout.deployment(at_lab, 1, pods, 1))
    assert world.log == ["create 1@1", "delete old-0"] and min(world.ready_counts) == 1
    # As planned (no cap), or Recreate, the strategy is the plan's.
    assert rollout.at_lab_scale(strategy, 2, 2) == strategy
    assert rollout.at_lab_scale({"type": "Recreate"}, 3, 1) == {"type": "Recreate"}
    assert rollout.at_lab_scale({}, 8, 4)["rollingUpdate"] == {"maxSurge": 2, "maxUnavailable": 1}  # 25% of 8: 6 of 8


def test_a_deployment_keeps_its_minimum_available_through_the_rollout() -> None:
    world = World(old_pods(4))
    world.run(lambda pods: rollout.deployment(ROLLING, 4, pods, 1))
    assert min(world.ready_counts) >= 3  # replicas - maxUnavailable (25% of 4)
    assert max(world.totals) <= 5  # replicas + maxSurge (25% of 4)
    assert sorted(p.revision for p in world.pods) == [1, 1, 1, 1]
    assert sum(line.startswith("delete old-") for line in world.log) == 4


def test_recreate_deletes_every_old_pod_before_the_first_new_one() -> None:
    world = World(old_pods(2))
    world.run(lambda pods: rollout.deployment({"type": "Recreate"}, 2, pods, 1))
    assert world.log[:2] == ["delete old-0", "delete old-1"]
    assert all(line.startswith("create") for line in world.log[2:])
    assert len(world.pods) == 2 and {p.revision for p in world.pods} == {1}


def test_scaling_alone_creates_or_deletes_pods_of_the_same_revision() -> None:
    world = World(old_pods(1))
    world.run(lambda pods: rollout.deployment(ROLLING, 2, pods, 0))
    assert world.log == ["create 1@0"]
    assert rollout.deployment(ROLLING, 1, world.pods, 0) == [Delete("new-1-1")]  # the newest ordinal goes


def test_a_statefulset_rolls_from_the_highest_ordinal_one_pod_at_a_time() -> None:
    world = World(old_pods(3))
    world.run(lambda pods: rollout.statefulset(ROLLING, 3, pods, 1, 0))
    assert world.log == ["delete old-2", "create 2@1", "delete old-1", "create 1@1", "delete old-0", "create 0@1"]
    # The next pod goes only once every pod is ready again: never two missing at once.
    assert min(world.ready_counts) >= 2


def test_a_partition_keeps_lower_ordinals_and_a_deleted_one_comes_back_old() -> None:
    strategy = {"type": "RollingUpdate", "rollingUpdate": {"partition": 2}}
    world = World(old_pods(3))
    world.run(lambda pods: rollout.statefulset(strategy, 3, pods, 1, 0))
    assert world.log == ["delete old-2", "create 2@1"]
    world.pods = [p for p in world.pods if p.name != "old-0"]  # someone deletes pod 0
    assert rollout.statefulset(strategy, 3, world.pods, 1, 0) == [Create(0, 0)]


def test_statefulset_and_daemonset_on_delete_change_no_pod() -> None:
    on_delete = {"type": "OnDelete"}
    assert rollout.statefulset(on_delete, 2, old_pods(2), 1, 0) == []
    assert rollout.daemonset(on_delete, ["a", "b"], old_pods(2, ["a", "b"]), 1) == []
    # A pod deleted under OnDelete comes back with the new template; a node that now admits it gets one.
    assert rollout.daemonset(on_delete, ["a", "b", "c"], old_pods(1, ["a"]), 1) == [
        Create(1, node="b"), Create(1, node="c")]  # fmt: skip


def test_a_daemonset_replaces_one_node_at_a_time_without_surge() -> None:
    nodes = ["a", "b", "c"]
    world = World(old_pods(3, nodes))
    world.run(lambda pods: rollout.daemonset({"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1}},
                                             nodes, pods, 1))  # fmt: skip
    assert world.log == ["delete old-0", "create a@1", "delete old-1", "create b@1", "delete old-2", "create c@1"]
    assert min(world.ready_counts) >= 2  # one node without a ready pod at most
    assert sorted(p.node for p in world.pods) == nodes


def test_a_daemonset_with_surge_starts_the_new_pod_beside_the_old_one() -> None:
    strategy = {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}}
    world = World(old_pods(2, ["a", "b"]))
    world.run(lambda pods: rollout.daemonset(strategy, ["a", "b"], pods, 1))
    assert world.log == ["create a@1", "delete old-0", "create b@1", "delete old-1"]
    assert min(world.ready_counts) >= 2


def test_a_daemonset_leaves_a_node_that_no_longer_admits_it() -> None:
    assert rollout.daemonset(ROLLING, ["a"], old_pods(2, ["a", "b"]), 0) == [Delete("old-1")]


def test_an_unready_old_pod_goes_first_whatever_the_budget() -> None:
    pods = [Pod("old-0", 0, False, 0, "a"), Pod("old-1", 0, True, 1, "b"), Pod("old-2", 0, True, 2, "c")]
    assert rollout.daemonset(ROLLING, ["a", "b", "c"], pods, 1) == [Delete("old-0")]
