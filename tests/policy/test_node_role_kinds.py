"""Node roles are bound to the workload kind too: node pods are DaemonSets (components/roles.py,
components/nodepod.py), so only a DaemonSet, or a DaemonSetPatch judged as one, holds a node
role. The node pod's labels, namespace and image in any other kind unlock nothing."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from components.roles import Topology, node_pods
from policies.report import check_stack

from .builders import k8s_object, node_daemonset, run_policy, stack_config

STAGING = stack_config(Topology.POD_PER_SERVICE)
COMPUTE = next(p for p in node_pods(Topology.POD_PER_SERVICE) if p.name == "nova-compute")


def in_kind(api_version: str, kind: str, path: tuple[str, ...]) -> dict[str, Any]:
    """The nova-compute node pod (labels, namespace, role image) in another kind at `path`."""
    daemonset = node_daemonset(COMPUTE)
    pod: dict[str, Any] = copy.deepcopy(daemonset["spec"]["template"])
    body: dict[str, Any] = pod if path else {}
    for key in reversed(path):
        body = {key: body}
    if not path:  # a Pod is the pod itself
        body = {"spec": pod["spec"]}
    metadata = {**daemonset["metadata"], "labels": pod["metadata"]["labels"]}
    return {"apiVersion": api_version, "kind": kind, "metadata": metadata, **body}


def reason(kind: str) -> str:
    return (
        "no node role: node pod nova-compute runs as a DaemonSet (components/roles.py), and a "
        f"{kind} holds no node role"
    )


@pytest.mark.parametrize(
    ("api_version", "kind", "path", "field"),
    [
        ("batch/v1", "CronJob", ("spec", "jobTemplate", "spec", "template"), "spec.jobTemplate.spec.template.spec"),
        ("batch/v1", "Job", ("spec", "template"), "spec.template.spec"),
        ("apps/v1", "Deployment", ("spec", "template"), "spec.template.spec"),
        ("apps/v1", "ReplicaSet", ("spec", "template"), "spec.template.spec"),
        ("apps/v1", "StatefulSet", ("spec", "template"), "spec.template.spec"),
        ("v1", "ReplicationController", ("spec", "template"), "spec.template.spec"),
        ("v1", "PodTemplate", ("template",), "template.spec"),
        ("v1", "Pod", (), "spec"),
        ("extensions/v1beta1", "DaemonSet", ("spec", "template"), "spec.template.spec"),  # not served since 1.16
    ],
)
def test_a_node_pod_in_another_kind_holds_no_role(api_version: str, kind: str, path: tuple, field: str) -> None:
    workload = in_kind(api_version, kind, path)
    assert run_policy("privileged-containers", workload, STAGING) == [
        f"{kind} openstack/nova-compute: container 'nova-compute': {field}.containers[0].securityContext"
        f".privileged=true is not allowed; allowed: false or unset ({reason(kind)})"
    ]
    assert run_policy("host-namespaces", workload, STAGING) == [
        f"{kind} openstack/nova-compute: pod: {field}.hostNetwork=true is not allowed; allowed: false or unset "
        f"({reason(kind)})"
    ]
    volumes = run_policy("host-path-volumes", workload, STAGING)
    assert volumes and all(reason(kind) in m for m in volumes)


def test_a_deployment_patch_of_a_node_pod_holds_no_role() -> None:
    deployment = in_kind("apps/v1", "Deployment", ("spec", "template"))
    found = run_policy("privileged-containers", deployment, STAGING, resource_type="kubernetes:apps/v1:DeploymentPatch")
    assert len(found) == 1 and found[0].endswith(f"({reason('DeploymentPatch')})")


def test_a_cronjob_of_a_node_pod_is_no_node_pod_for_the_stack_rules() -> None:
    """Not pinned to compute nodes, it is no agent on its node: a CronJob gets no node role to check."""
    cronjob = in_kind("batch/v1", "CronJob", ("spec", "jobTemplate", "spec", "template"))
    del cronjob["spec"]["jobTemplate"]["spec"]["template"]["spec"]["nodeSelector"]
    assert check_stack([k8s_object(cronjob)], STAGING) == []
    daemonset = node_daemonset(COMPUTE)
    del daemonset["spec"]["template"]["spec"]["nodeSelector"]
    assert [v.policy for v in check_stack([k8s_object(daemonset)], STAGING)] == ["agents-on-their-nodes"]
