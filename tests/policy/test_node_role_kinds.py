"""Node roles are bound to the workload kind too: node pods are DaemonSets (components/tables/roles.py,
components/nodes/nodepod.py), so only a DaemonSet, or a DaemonSetPatch judged as one, holds a node
role. The node pod's labels, namespace and image in any other kind unlock nothing."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from components.tables.roles import Topology, node_pods
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
        "no node role: node pod nova-compute runs as a DaemonSet (components/tables/roles.py), and a "
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


# The pods the RabbitMQ and MariaDB operators build are no Pulumi resources, but the pod fields
# the program sets in their custom resources are: judged as a third-party pod (the baseline).
OPERATOR = "no node role: the {} operator builds this pod, and roles are only for the program's DaemonSets"
SHELL = {"name": "shell", "image": "busybox:1.37"}
OWN = {"app.kubernetes.io/part-of": "openstack"}
RABBITMQ = OPERATOR.format("RabbitmqCluster")


def rabbitmq(pod: dict[str, Any], labels: dict[str, str] | None = None) -> dict[str, Any]:
    template = {"metadata": {"labels": labels or {}}, "spec": pod}
    return {
        "apiVersion": "rabbitmq.com/v1beta1",
        "kind": "RabbitmqCluster",
        "metadata": {"name": "rabbitmq", "namespace": "openstack", "labels": OWN},
        "spec": {"image": "rabbitmq:4.2.8-management", "override": {"statefulSet": {"spec": {"template": template}}}},
    }


def mariadb(kind: str = "MariaDB", **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "k8s.mariadb.com/v1alpha1",
        "kind": kind,
        "metadata": {"name": "mariadb", "namespace": "openstack", "labels": OWN},
        "spec": {"rootPasswordSecretKeyRef": {"name": "mariadb-root", "key": "password"}, "replicas": 3, **spec},
    }


OVERRIDE = "spec.override.statefulSet.spec.template.spec"
NET_ADMIN = {"add": ["NET_ADMIN"]}
LITERAL_PASS = {**SHELL, "env": [{"name": "RABBITMQ_DEFAULT_PASS", "value": "y"}]}


@pytest.mark.parametrize(
    ("policy", "pod", "found"),
    [
        ("privileged-containers", {"containers": [{**SHELL, "securityContext": {"privileged": True}}]},
         f"container 'shell': {OVERRIDE}.containers[0].securityContext.privileged=true is not allowed; allowed: "
         f"false or unset ({RABBITMQ})"),
        ("host-namespaces", {"hostPID": True},
         f"pod: {OVERRIDE}.hostPID=true is not allowed; allowed: false or unset ({RABBITMQ})"),
        ("host-path-volumes", {"volumes": [{"name": "root", "hostPath": {"path": "/"}}]},
         f"volume 'root': {OVERRIDE}.volumes[0].hostPath.path=\"/\" is not allowed; allowed: no hostPath volume "
         f"({RABBITMQ})"),
        ("added-capabilities", {"initContainers": [{**SHELL, "securityContext": {"capabilities": NET_ADMIN}}]},
         f"init container 'shell': {OVERRIDE}.initContainers[0].securityContext.capabilities.add[0]=\"NET_ADMIN\" is "
         "not allowed"),
        ("host-ports", {"containers": [{**SHELL, "ports": [{"containerPort": 15672.0, "hostPort": 15672.0}]}]},
         f"container 'shell': {OVERRIDE}.containers[0].ports[0].hostPort=15672 is not allowed; allowed: 0 or unset "
         f"({RABBITMQ})"),
        ("pod-security-baseline", {"securityContext": {"seccompProfile": {"type": "Unconfined"}}},
         f"pod: {OVERRIDE}.securityContext.seccompProfile.type=\"Unconfined\" is not allowed; allowed: "
         "RuntimeDefault, Localhost or unset"),
        ("no-plaintext-passwords", {"containers": [LITERAL_PASS]},
         f"container 'shell': {OVERRIDE}.containers[0].env[0].value (RABBITMQ_DEFAULT_PASS) is a literal password; "
         "allowed: a Secret, mounted or referenced with env[].valueFrom.secretKeyRef"),
    ],
)  # fmt: skip
def test_the_rabbitmq_pod_override_is_judged_as_a_third_party_pod(policy: str, pod: dict, found: str) -> None:
    messages = run_policy(policy, rabbitmq(pod), STAGING)
    assert len(messages) == 1 and messages[0].startswith(f"RabbitmqCluster openstack/rabbitmq: {found}")


def test_a_node_pod_copied_into_the_rabbitmq_override_holds_no_role() -> None:
    template = node_daemonset(COMPUTE)["spec"]["template"]
    cluster = rabbitmq(template["spec"], template["metadata"]["labels"])
    found = run_policy("privileged-containers", cluster, STAGING)
    assert found == [
        f"RabbitmqCluster openstack/rabbitmq: container 'nova-compute': {OVERRIDE}.containers[0].securityContext"
        f".privileged=true is not allowed; allowed: false or unset ({RABBITMQ})"
    ]
    patch = run_policy("privileged-containers", cluster, STAGING, resource_type=PATCH_OF_RABBITMQ)
    assert [m.split(": ")[0] for m in patch] == ["RabbitmqClusterPatch openstack/rabbitmq"]


PATCH_OF_RABBITMQ = "kubernetes:rabbitmq.com/v1beta1:RabbitmqClusterPatch"  # a CustomResourcePatch
MARIADB = OPERATOR.format("MariaDB")
PRIVILEGED = {"privileged": True}


@pytest.mark.parametrize(
    ("policy", "spec", "found"),
    [
        ("privileged-containers", {"securityContext": PRIVILEGED},
         f"container 'mariadb': spec.securityContext.privileged=true is not allowed; allowed: false or unset "
         f"({MARIADB})"),
        ("added-capabilities", {"securityContext": {"capabilities": {"add": ["SYS_ADMIN"]}}},
         "container 'mariadb': spec.securityContext.capabilities.add[0]=\"SYS_ADMIN\" is not allowed"),
        ("host-path-volumes", {"volumes": [{"name": "data", "hostPath": {"path": "/var/lib/mysql"}}]},
         f"volume 'data': spec.volumes[0].hostPath.path=\"/var/lib/mysql\" is not allowed; allowed: no hostPath "
         f"volume ({MARIADB})"),
        # No field of the CRD; judged all the same (the API server drops it, or a later CRD has it).
        ("host-namespaces", {"hostNetwork": True},
         f"pod: spec.hostNetwork=true is not allowed; allowed: false or unset ({MARIADB})"),
        ("privileged-containers", {"sidecarContainers": [{**SHELL, "securityContext": PRIVILEGED}]},
         "container 'shell': spec.sidecarContainers[0].securityContext.privileged=true is not allowed"),
        ("privileged-containers", {"initContainers": [{**SHELL, "securityContext": PRIVILEGED}]},
         "init container 'shell': spec.initContainers[0].securityContext.privileged=true is not allowed"),
        ("privileged-containers", {"galera": {"enabled": True, "agent": {"securityContext": PRIVILEGED}}},
         "container 'agent': spec.galera.agent.securityContext.privileged=true is not allowed"),
        ("added-capabilities",
         {"replication": {"initContainer": {"securityContext": {"capabilities": {"add": ["NET_ADMIN"]}}}}},
         "init container 'init': spec.replication.initContainer.securityContext.capabilities.add[0]=\"NET_ADMIN\" is "
         "not allowed"),
        ("pod-security-baseline", {"podSecurityContext": {"seLinuxOptions": {"type": "spc_t"}}},
         "pod: spec.podSecurityContext.seLinuxOptions.type=\"spc_t\" is not allowed"),
        ("pod-security-baseline",
         {"podMetadata": {"annotations": {"container.apparmor.security.beta.kubernetes.io/mariadb": "unconfined"}}},
         "pod: spec.podMetadata.annotations.container.apparmor.security.beta.kubernetes.io/mariadb=\"unconfined\" is "
         "not allowed"),
        ("privileged-containers", {"metrics": {"enabled": True, "exporter": {"securityContext": PRIVILEGED}}},
         "container 'exporter': spec.metrics.exporter.securityContext.privileged=true is not allowed"),
        ("no-plaintext-passwords", {"env": [{"name": "MARIADB_ROOT_PASSWORD", "value": "x1"}]},
         "container 'mariadb': spec.env[0].value (MARIADB_ROOT_PASSWORD) is a literal password"),
    ],
)  # fmt: skip
def test_the_mariadb_pod_fields_are_judged_as_a_third_party_pod(policy: str, spec: dict, found: str) -> None:
    messages = run_policy(policy, mariadb(**spec), STAGING)
    assert len(messages) == 1 and messages[0].startswith(f"MariaDB openstack/mariadb: {found}")


@pytest.mark.parametrize("kind", ["Backup", "Restore", "SqlJob", "PhysicalBackup", "MaxScale"])
def test_the_other_mariadb_operator_pods_are_judged_too(kind: str) -> None:
    assert run_policy("privileged-containers", mariadb(kind, securityContext=PRIVILEGED), STAGING) == [
        f"{kind} openstack/mariadb: container '{kind.lower()}': spec.securityContext.privileged=true is not allowed; "
        f"allowed: false or unset (no node role: the {kind} operator builds this pod, and roles are only for the "
        "program's DaemonSets)"
    ]
