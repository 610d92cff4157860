"""pulumi-kubernetes *Patch resources are judged like the objects they patch: a partial
object server-side-applied onto an existing one can add a privileged container or a
hostPath as well as the whole object can. A patch is judged as if it were the whole
object, so what it leaves out counts as unset."""

from __future__ import annotations

from typing import Any

import pytest

from components.tables.roles import NodePod, Topology, node_pods
from policies.report import check_stack

from .builders import (
    container,
    control_plane,
    image,
    k8s_object,
    node_daemonset,
    patch_type,
    pod_spec,
    run_policy,
    stack_config,
)

STAGING = stack_config(Topology.POD_PER_SERVICE)
ALLOWED_SECRET = "allowed: a Secret, mounted or referenced with env[].valueFrom.secretKeyRef"
NOT_LABELLED = "no node role: the pod is not labelled app.kubernetes.io/part-of=openstack"


def node_pod(name: str) -> NodePod:
    return next(p for p in node_pods(Topology.POD_PER_SERVICE) if p.name == name)


def debug_container(**security: Any) -> dict[str, Any]:
    return {"name": "debug", "image": "docker.io/library/busybox:1.37", "securityContext": security}


def partial(api_version: str, kind: str, name: str, pod: dict[str, Any], path: tuple[str, ...]) -> dict[str, Any]:
    """A patch as one writes it: the object's identity and the few fields it changes."""
    body: dict[str, Any] = pod
    for key in reversed(path):
        body = {key: body}
    return {"apiVersion": api_version, "kind": kind, "metadata": {"name": name, "namespace": "openstack"}, **body}


TEMPLATE = ("spec", "template", "spec")
JOB_TEMPLATE = ("spec", "jobTemplate", "spec", "template", "spec")


@pytest.mark.parametrize(
    ("api_version", "kind", "path"),
    [
        ("apps/v1", "DaemonSet", TEMPLATE),
        ("apps/v1", "Deployment", TEMPLATE),
        ("apps/v1", "StatefulSet", TEMPLATE),
        ("apps/v1", "ReplicaSet", TEMPLATE),
        ("v1", "ReplicationController", TEMPLATE),
        ("batch/v1", "Job", TEMPLATE),
        ("batch/v1", "CronJob", JOB_TEMPLATE),
        ("v1", "PodTemplate", ("template", "spec")),
        ("v1", "Pod", ("spec",)),
        ("apps/v1beta2", "DaemonSet", TEMPLATE),
        ("extensions/v1beta1", "Deployment", TEMPLATE),
    ],
)
def test_a_patch_adding_a_privileged_container_is_judged_like_its_kind(
    api_version: str, kind: str, path: tuple[str, ...]
) -> None:
    patch = partial(api_version, kind, "libvirt", {"containers": [debug_container(privileged=True)]}, path)
    field = ".".join(path) + ".containers[0].securityContext.privileged"
    assert run_policy("privileged-containers", patch, STAGING, resource_type=patch_type(patch)) == [
        f"{kind}Patch openstack/libvirt: container 'debug': {field}=true is not allowed; allowed: false or unset "
        f"({NOT_LABELLED})"
    ]


def test_a_daemonset_patch_of_a_node_pod_gets_the_roles_of_a_daemonset_and_no_more() -> None:
    libvirt = node_daemonset(node_pod("libvirt"))
    assert run_policy("host-path-volumes", libvirt, STAGING, resource_type=patch_type(libvirt)) == []
    pod_spec(libvirt)["volumes"].append({"name": "etc", "hostPath": {"path": "/etc"}})
    found = run_policy("host-path-volumes", libvirt, STAGING, resource_type=patch_type(libvirt))
    assert [m.split(" is not allowed")[0] for m in found] == [
        "DaemonSetPatch openstack/libvirt: volume 'etc': spec.template.spec.volumes[7].hostPath.path=\"/etc\""
    ]


def test_a_deployment_patch_cannot_share_the_hosts_network() -> None:
    patch = partial("apps/v1", "Deployment", "keystone-api", {"hostNetwork": True}, TEMPLATE)
    assert run_policy("host-namespaces", patch, STAGING, resource_type=patch_type(patch)) == [
        "DeploymentPatch openstack/keystone-api: pod: spec.template.spec.hostNetwork=true is not allowed; allowed: "
        f"false or unset ({NOT_LABELLED})"
    ]


def test_a_statefulset_patch_cannot_add_capabilities() -> None:
    patch = partial(
        "apps/v1", "StatefulSet", "memcached", {"containers": [debug_container(capabilities={"add": ["SYS_ADMIN"]})]},
        TEMPLATE,
    )  # fmt: skip
    found = run_policy("added-capabilities", patch, STAGING, resource_type=patch_type(patch))
    assert [m.split(" is not allowed")[0] for m in found] == [
        "StatefulSetPatch openstack/memcached: container 'debug': "
        'spec.template.spec.containers[0].securityContext.capabilities.add[0]="SYS_ADMIN"'
    ]


def test_a_pod_patch_cannot_open_a_host_port() -> None:
    debug = {**debug_container(), "ports": [{"containerPort": 22.0, "hostPort": 22.0}]}
    patch = partial("v1", "Pod", "keystone-api-0", {"containers": [debug]}, ("spec",))
    assert run_policy("host-ports", patch, STAGING, resource_type=patch_type(patch)) == [
        "PodPatch openstack/keystone-api-0: container 'debug': spec.containers[0].ports[0].hostPort=22 is not "
        f"allowed; allowed: 0 or unset ({NOT_LABELLED})"
    ]


def test_a_job_patch_is_held_to_the_baseline() -> None:
    pod = {"securityContext": {"seccompProfile": {"type": "Unconfined"}}}
    patch = partial("batch/v1", "Job", "keystone-db-sync", pod, TEMPLATE)
    assert run_policy("pod-security-baseline", patch, STAGING, resource_type=patch_type(patch)) == [
        "JobPatch openstack/keystone-db-sync: pod: spec.template.spec.securityContext.seccompProfile.type="
        '"Unconfined" is not allowed; allowed: RuntimeDefault, Localhost or unset'
    ]


def test_a_cronjob_patch_cannot_mount_the_host() -> None:
    pod = {"volumes": [{"name": "root", "hostPath": {"path": "/"}}]}
    patch = partial("batch/v1", "CronJob", "keystone-fernet-rotate", pod, JOB_TEMPLATE)
    found = run_policy("host-path-volumes", patch, STAGING, resource_type=patch_type(patch))
    assert [m.split(" is not allowed")[0] for m in found] == [
        "CronJobPatch openstack/keystone-fernet-rotate: volume 'root': "
        'spec.jobTemplate.spec.template.spec.volumes[0].hostPath.path="/"'
    ]


def test_a_patch_of_an_own_pod_is_held_to_the_restricted_profile() -> None:
    api = control_plane()
    container(api)["securityContext"]["allowPrivilegeEscalation"] = True
    assert run_policy("control-plane-restricted", api, STAGING, resource_type=patch_type(api)) == [
        "DeploymentPatch openstack/keystone-api: container 'keystone-api': spec.template.spec.containers[0]"
        ".securityContext.allowPrivilegeEscalation=true is not allowed; allowed: false"
    ]


def test_a_patch_is_held_to_hygiene_like_its_kind() -> None:
    api = control_plane()
    container(api)["image"] = "quay.io/openstack.kolla/keystone:latest"
    found = run_policy("image-pinned", api, STAGING, resource_type=patch_type(api))
    assert [m.split(": ")[0] for m in found] == ["DeploymentPatch openstack/keystone-api"]


def config_map(kind: str = "ConfigMap") -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": kind,
        "metadata": {"name": "keystone-etc", "namespace": "openstack"},
        "data": {"keystone.conf": "[database]\nconnection = mysql+pymysql://keystone:hunter2@mariadb/keystone\n"},
    }


def test_a_config_map_patch_is_held_to_the_password_rule_and_a_secret_patch_is_not() -> None:
    assert run_policy("no-plaintext-passwords", config_map(), STAGING, resource_type=patch_type(config_map())) == [
        "ConfigMapPatch openstack/keystone-etc: data['keystone.conf'] line 2 holds a URL with a password; "
        f"{ALLOWED_SECRET}"
    ]
    secret = config_map("Secret")
    assert run_policy("no-plaintext-passwords", secret, STAGING, resource_type=patch_type(secret)) == []


def test_a_daemonset_patch_must_keep_a_vm_holding_pod_on_delete() -> None:
    libvirt = node_daemonset(node_pod("libvirt"), vm_safe=False)
    config = stack_config(Topology.POD_PER_SERVICE, vm_safe=True)
    found = check_stack([k8s_object(libvirt, resource_type=patch_type(libvirt))], config)
    assert [(v.policy, v.message.split(" is not allowed")[0]) for v in found] == [
        ("vm-safe-updates", 'DaemonSetPatch openstack/libvirt: DaemonSet: spec.updateStrategy.type="RollingUpdate"')
    ]


@pytest.mark.parametrize(
    ("resource_type", "kind", "field"),
    [
        # CustomResource(api_version="v1", kind="Pod") registers as kubernetes:v1:Pod, not core/v1.
        ("kubernetes:v1:Pod", "Pod", "spec.containers[0]"),
        ("kubernetes:v1:PodPatch", "PodPatch", "spec.containers[0]"),  # CustomResourcePatch
    ],
)
def test_a_core_kind_declared_as_a_custom_resource_is_judged_as_that_kind(
    resource_type: str, kind: str, field: str
) -> None:
    pod = partial("v1", "Pod", "shell", {"containers": [debug_container(privileged=True)]}, ("spec",))
    assert run_policy("privileged-containers", pod, STAGING, resource_type=resource_type) == [
        f"{kind} openstack/shell: container 'debug': {field}.securityContext.privileged=true is not allowed; "
        f"allowed: false or unset ({NOT_LABELLED})"
    ]


def test_a_config_map_declared_as_a_custom_resource_patch_is_held_to_the_password_rule() -> None:
    found = run_policy("no-plaintext-passwords", config_map(), STAGING, resource_type="kubernetes:v1:ConfigMapPatch")
    assert [m.split(": ")[0] for m in found] == ["ConfigMapPatch openstack/keystone-etc"]


def test_a_patch_of_a_node_pod_image_elsewhere_is_still_refused() -> None:
    compute = node_daemonset(node_pod("nova-compute"))
    container(compute)["image"] = image("keystone")
    found = run_policy("privileged-containers", compute, STAGING, resource_type=patch_type(compute))
    assert len(found) == 1 and found[0].startswith("DaemonSetPatch openstack/nova-compute: container 'nova-compute'")
