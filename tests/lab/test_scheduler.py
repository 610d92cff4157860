"""The lab places pods as kube-scheduler and the DaemonSet controller would, from the pod spec alone."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from tests.lab.cloud.scheduler import SchedulingError, admits, place


@dataclass
class FakeNode:
    name: str
    labels: dict[str, str]
    taints: list[dict[str, Any]] = field(default_factory=list)
    unschedulable: bool = False


CP = FakeNode("cp", {"openstack-control-plane": "enabled"})
NET = FakeNode("net", {"openstack-network-node": "enabled"})
C1 = FakeNode("c1", {"openstack-compute-node": "enabled", "group": "a"})
C2 = FakeNode("c2", {"openstack-compute-node": "enabled", "group": "b"})


def test_node_selector_and_required_affinity_decide() -> None:
    spec = {
        "nodeSelector": {"openstack-compute-node": "enabled"},
        "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": "group", "operator": "In", "values": ["b"]}]}
        ]}}},
    }  # fmt: skip
    assert [n.name for n in (CP, NET, C1, C2) if admits(n, spec)[0]] == ["c2"]
    ok, why = admits(C1, spec)
    assert not ok and "node affinity" in why


def test_a_network_node_that_is_also_compute_is_left_to_the_compute_pods() -> None:
    both = FakeNode("both", {"openstack-network-node": "enabled", "openstack-compute-node": "enabled"})
    spec = {
        "nodeSelector": {"openstack-network-node": "enabled"},
        "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": "openstack-compute-node", "operator": "NotIn", "values": ["enabled"]}]}
        ]}}},
    }  # fmt: skip
    assert admits(NET, spec)[0] and not admits(both, spec)[0]


def test_taints_keep_pods_off_unless_tolerated() -> None:
    tainted = FakeNode("t", {}, [{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}])
    assert not admits(tainted, {})[0]
    assert admits(tainted, {"tolerations": [{"key": "dedicated", "operator": "Equal", "value": "gpu"}]})[0]
    assert admits(tainted, {"tolerations": [{"operator": "Exists"}]})[0]
    assert not admits(tainted, {"tolerations": [{"key": "dedicated", "value": "cpu"}]})[0]


def test_a_cordoned_node_takes_daemonset_pods_only() -> None:
    cordoned = FakeNode("c", {}, unschedulable=True)
    assert not admits(cordoned, {})[0]
    assert admits(cordoned, {}, daemonset=True)[0]


def test_preferred_anti_affinity_spreads_and_required_refuses_a_second_pod() -> None:
    term = {"labelSelector": {"matchLabels": {"app": "api"}}, "topologyKey": "kubernetes.io/hostname"}
    preferred = {"affinity": {"podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": 100, "podAffinityTerm": term}]}}}  # fmt: skip
    nodes = [C1, C2]
    first, _ = place(preferred, nodes, [])
    second, _ = place(preferred, nodes, [(first.name, {"app": "api"})])  # type: ignore[union-attr]
    assert {first.name, second.name} == {"c1", "c2"}  # type: ignore[union-attr]
    third, _ = place(preferred, nodes, [("c1", {"app": "api"}), ("c2", {"app": "api"})])
    assert third is not None  # preferred: still placed when every node has one
    required = {"affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}}
    none, why = place(required, nodes, [("c1", {"app": "api"}), ("c2", {"app": "api"})])
    assert none is None and "0/2 nodes are available" in why


def test_what_the_scheduler_does_not_implement_is_an_error() -> None:
    with pytest.raises(SchedulingError, match="podAffinity"):
        admits(C1, {"affinity": {"podAffinity": {}}})
    zone = {"labelSelector": {}, "topologyKey": "topology.kubernetes.io/zone"}
    with pytest.raises(SchedulingError, match="zone"):
        place({"affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [zone]}}}, [C1], [])
