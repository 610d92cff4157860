"""Tolerations per node role and node group, and priority classes for node agents and data stores
(`tolerations`, `compute.nodeGroups[].tolerations`, `priorityClasses`)."""

from __future__ import annotations

from typing import Any

import pytest

from components.settings.problems import PROJECT
from tests.conftest import plan_of
from tests.helpers import objects, pod_template, settings_problems
from tools.plan import Plan

CONTROL = {"key": "node-role.kubernetes.io/control-plane", "operator": "Exists", "effect": "NoSchedule"}
HYPERVISOR = {"key": "dedicated", "operator": "Equal", "value": "hypervisor", "effect": "NoSchedule"}
GPU = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
NETWORK = {"key": "network", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 30}


def _tainted() -> Plan:
    return plan_of(
        "prod",
        tolerations={"controlPlane": [CONTROL], "compute": [HYPERVISOR], "network": [NETWORK]},
        priorityClasses={"nodeAgents": "openstack-node-critical", "dataStores": "openstack-data"},
        compute={
            "nodeGroups": [
                {"name": "general", "nodeSelector": {"gpu": "no"}},
                {"name": "gpu", "nodeSelector": {"gpu": "yes"}, "tolerations": [GPU]},
            ]
        },
    )


def _pods(plan: Plan) -> dict[tuple[str, str], dict[str, Any]]:
    kinds = ("Deployment", "DaemonSet", "StatefulSet", "Job", "CronJob")
    return {(kind, name): pod_template(o)["spec"] for kind in kinds for name, o in objects(plan, kind).items()}


def _node_kind(spec: dict[str, Any]) -> str:
    selector = spec.get("nodeSelector", {})
    for kind, label in (("compute", "openstack-compute-node"), ("network", "openstack-network-node"),
                        ("storage", "openstack-storage-node"), ("control", "openstack-control-plane")):  # fmt: skip
        if label in selector:
            return kind
    raise AssertionError(f"a pod of no node role: {selector}")


def test_every_pod_tolerates_its_roles_taints_and_a_group_adds_its_own() -> None:
    pods = _pods(_tainted())
    expected: dict[str, list[dict[str, Any]]] = {
        "control": [CONTROL],
        "compute": [HYPERVISOR],
        "network": [NETWORK],
        "storage": [],
    }
    seen = set()
    for (kind, name), spec in pods.items():
        role = _node_kind(spec)
        seen.add(role)
        wanted = expected[role] + ([GPU] if spec["nodeSelector"].get("gpu") == "yes" else [])
        assert spec.get("tolerations", []) == wanted, (kind, name)
    assert seen == {"control", "compute", "network", "storage"}
    assert any(spec["nodeSelector"].get("gpu") == "yes" for spec in pods.values())


def test_node_agents_and_data_stores_get_their_priority_class_and_nothing_else_does() -> None:
    plan = _tainted()
    pods = _pods(plan)
    for (kind, name), spec in pods.items():
        if _node_kind(spec) != "control":
            assert spec.get("priorityClassName") == "openstack-node-critical", (kind, name)
        elif (kind, name) == ("StatefulSet", "memcached"):
            assert spec.get("priorityClassName") == "openstack-data"
        else:
            assert "priorityClassName" not in spec, (kind, name)
    mariadb = objects(plan, "MariaDB")["mariadb"].inputs["spec"]
    assert mariadb["priorityClassName"] == "openstack-data" and mariadb["tolerations"] == [CONTROL]
    rabbitmq = objects(plan, "RabbitmqCluster")["rabbitmq"].inputs["spec"]
    assert rabbitmq["tolerations"] == [CONTROL]
    template = rabbitmq["override"]["statefulSet"]["spec"]["template"]["spec"]
    assert template == {"containers": [], "priorityClassName": "openstack-data"}
    backups = objects(plan, "Backup").values()
    assert backups
    for backup in backups:
        assert backup.inputs["spec"]["tolerations"] == [CONTROL]


def test_a_stack_without_them_plans_no_tolerations_or_priority() -> None:
    plan = plan_of("prod")
    for key, spec in _pods(plan).items():
        assert "tolerations" not in spec and "priorityClassName" not in spec, key
    assert "override" not in objects(plan, "RabbitmqCluster")["rabbitmq"].inputs["spec"]


@pytest.mark.parametrize(
    ("toleration", "fragment"),
    [
        ({"value": "x"}, "operator must be Exists when key is unset"),
        ({"key": "a", "operator": "Exists", "value": "x"}, "value must be unset when operator is Exists"),
        ({"key": "a", "effect": "NoSchedule", "tolerationSeconds": 5}, "tolerationSeconds needs effect NoExecute"),
        ({"key": "a", "operator": "Lt"}, "'Equal' or 'Exists'"),
        ({"key": "a", "effect": "NoRun"}, "'NoSchedule', 'PreferNoSchedule' or 'NoExecute'"),
        ({"key": "a b"}, "label key"),
    ],
)
def test_a_toleration_the_api_server_would_refuse_is_a_settings_error(toleration: dict, fragment: str) -> None:
    problems = settings_problems({"tolerations": {"compute": [toleration]}})
    assert any(p.startswith(f"{PROJECT}:tolerations.compute") and fragment in p for p in problems), problems


def test_a_priority_class_must_be_an_object_name() -> None:
    problems = settings_problems({"priorityClasses": {"nodeAgents": "Node_Critical"}})
    assert any(p.startswith(f"{PROJECT}:priorityClasses.nodeAgents: ") for p in problems), problems
