"""Fail closed: an object of a kind the pack does not judge may not carry a pod, since its
privileges would pass every rule unjudged."""

from __future__ import annotations

from typing import Any

import pytest

from components.roles import Topology
from policies.report import check_objects

from .builders import k8s_object, run_policy, stack_config

STAGING = stack_config(Topology.POD_PER_SERVICE)
CHART = "openstack:infra:X$kubernetes:helm.sh/v4:Chart"
SHELL = {"name": "shell", "image": "docker.io/library/busybox:1.37", "securityContext": {"privileged": True}}


def custom(api_version: str, kind: str, body: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": api_version, "kind": kind, "metadata": {"name": "x", "namespace": "openstack"}, **body}


def refused(kind: str, field: str, resource_type: str) -> str:
    return (
        f"{kind} openstack/x: pod: {field} is not allowed; allowed: a pod only in a kind the pack judges: "
        "Pod, Deployment, StatefulSet, DaemonSet, ReplicaSet, ReplicationController, Job, CronJob, PodTemplate "
        "(core, apps, extensions, batch); RabbitmqCluster (rabbitmq.com); MariaDB, MaxScale, Backup, PhysicalBackup, "
        "Restore, SqlJob (k8s.mariadb.com); and their *Patch types (the pack does not know how a "
        f"{resource_type} runs its pod, so it would pass unjudged)"
    )


@pytest.mark.parametrize(
    ("api_version", "kind", "body", "field"),
    [
        # An Argo Rollout: a Deployment's pod template in another operator's kind.
        ("argoproj.io/v1alpha1", "Rollout", {"spec": {"template": {"spec": {"containers": [SHELL]}}}},
         "spec.template.spec.containers"),
        # A well-known kind in another API group is another kind.
        ("apps.example.com/v1", "Deployment", {"spec": {"template": {"spec": {"containers": [SHELL]}}}},
         "spec.template.spec.containers"),
        ("v1", "PodGroup", {"spec": {"containers": [SHELL]}}, "spec.containers"),  # core-looking, unknown kind
        ("batch.example.com/v1", "ScheduledJob",
         {"spec": {"jobTemplate": {"spec": {"template": {"spec": {"containers": [SHELL]}}}}}},
         "spec.jobTemplate.spec.template.spec.containers"),
        ("example.com/v1", "Sandbox", {"spec": {"containers": [SHELL]}}, "spec.containers"),
        ("example.com/v1", "Recipe", {"template": {"spec": {"containers": [SHELL]}}}, "template.spec.containers"),
        ("example.com/v1", "Runner", {"spec": {"template": {"spec": {"initContainers": [SHELL]}}}},
         "spec.template.spec.initContainers"),
        ("example.com/v1", "Debugger", {"spec": {"ephemeralContainers": [SHELL]}}, "spec.ephemeralContainers"),
    ],
)  # fmt: skip
def test_an_unknown_kind_with_a_pod_is_refused(api_version: str, kind: str, body: dict, field: str) -> None:
    obj = k8s_object(custom(api_version, kind, body))
    assert run_policy("unknown-pod-kinds", custom(api_version, kind, body), STAGING) == [refused(kind, field, obj.type)]


def test_a_patch_of_an_unknown_kind_with_a_pod_is_refused() -> None:
    rollout = custom("argoproj.io/v1alpha1", "Rollout", {"spec": {"template": {"spec": {"containers": [SHELL]}}}})
    resource_type = "kubernetes:argoproj.io/v1alpha1:RolloutPatch"  # a CustomResourcePatch
    assert run_policy("unknown-pod-kinds", rollout, STAGING, resource_type=resource_type) == [
        refused("RolloutPatch", "spec.template.spec.containers", resource_type)
    ]


def test_an_unknown_kind_from_a_chart_is_refused_as_a_mandatory_violation() -> None:
    rollout = custom("argoproj.io/v1alpha1", "Rollout", {"spec": {"template": {"spec": {"containers": [SHELL]}}}})
    violations = check_objects([k8s_object(rollout, CHART)], STAGING)
    assert [(v.policy, v.enforcement) for v in violations] == [("unknown-pod-kinds", "mandatory")]
