"""Control-plane hardening: the restricted profile on the program's own pods, its scope,
and exceptions that are as narrow as a node role (labels AND image AND namespace)."""

from __future__ import annotations

from pathlib import Path

import pytest

from components.tables.roles import Topology, node_pods
from policies.exceptions import CONTROLS, EXCEPTIONS, RestrictedException
from policies.restricted import control_plane_restricted
from policies.settings import PackSettings

from .builders import (
    container,
    control_plane,
    image,
    k8s_object,
    node_daemonset,
    pod_spec,
    run_policy,
    stack_config,
)

STAGING = stack_config(Topology.POD_PER_SERVICE)
WHO = "Deployment openstack/keystone-api: container 'keystone-api'"


def restricted(deployment: dict) -> list[str]:
    return run_policy("control-plane-restricted", deployment, STAGING)


def test_a_pod_built_to_the_profile_passes() -> None:
    assert restricted(control_plane()) == []


def test_privilege_escalation_must_be_refused_explicitly() -> None:
    deployment = control_plane()
    del container(deployment)["securityContext"]["allowPrivilegeEscalation"]
    assert restricted(deployment) == [
        f"{WHO}: spec.template.spec.containers[0].securityContext.allowPrivilegeEscalation is not set; required: false"
    ]
    container(deployment)["securityContext"]["allowPrivilegeEscalation"] = True
    assert restricted(deployment) == [
        f"{WHO}: spec.template.spec.containers[0].securityContext.allowPrivilegeEscalation=true is not allowed; "
        "allowed: false"
    ]


def test_capabilities_drop_all_and_add_at_most_net_bind_service() -> None:
    deployment = control_plane()
    container(deployment)["securityContext"]["capabilities"] = {
        "drop": ["NET_RAW"],
        "add": ["NET_BIND_SERVICE", "CHOWN"],
    }
    assert restricted(deployment) == [
        f'{WHO}: spec.template.spec.containers[0].securityContext.capabilities.drop=["NET_RAW"] is not allowed; '
        "allowed: a list containing ALL",
        f'{WHO}: spec.template.spec.containers[0].securityContext.capabilities.add[1]="CHOWN" is not allowed; '
        "allowed: NET_BIND_SERVICE only",
    ]


def test_non_root_is_judged_on_what_each_container_ends_up_with() -> None:
    deployment = control_plane()
    del pod_spec(deployment)["securityContext"]["runAsNonRoot"]
    assert restricted(deployment) == [
        f"{WHO}: spec.template.spec.containers[0].securityContext.runAsNonRoot is not set; required: true, here or "
        "in the pod's securityContext"
    ]
    container(deployment)["securityContext"]["runAsNonRoot"] = True
    assert restricted(deployment) == []
    pod_spec(deployment)["securityContext"]["runAsUser"] = 0.0
    assert restricted(deployment) == [
        f"{WHO}: spec.template.spec.securityContext.runAsUser=0 is not allowed; allowed: a non-zero UID or unset "
        "(UID 0 is root)"
    ]


def test_seccomp_runtime_default_inherited_or_set() -> None:
    deployment = control_plane()
    pod_spec(deployment)["securityContext"]["seccompProfile"] = {"type": "Unconfined"}
    assert restricted(deployment) == [
        f'{WHO}: spec.template.spec.securityContext.seccompProfile.type="Unconfined" is not allowed; allowed: '
        "RuntimeDefault or Localhost (inherited from the pod's securityContext)"
    ]
    container(deployment)["securityContext"]["seccompProfile"] = {"type": "Localhost", "localhostProfile": "os.json"}
    assert restricted(deployment) == []  # the container's own profile wins (the baseline rule still flags the pod's)


def test_volume_types_are_those_of_the_restricted_profile() -> None:
    deployment = control_plane()
    pod_spec(deployment)["volumes"].append({"name": "images", "nfs": {"server": "nfs", "path": "/glance"}})
    assert restricted(deployment) == [
        "Deployment openstack/keystone-api: volume 'images': spec.template.spec.volumes[1].nfs is not allowed; "
        "allowed: volume types configMap, csi, downwardAPI, emptyDir, ephemeral, image, persistentVolumeClaim, "
        "projected, secret"
    ]


def test_jobs_init_and_ephemeral_containers_are_held_to_it() -> None:
    job = control_plane("keystone-db-sync", component="db-sync")
    job.update(apiVersion="batch/v1", kind="Job")
    job["metadata"]["name"] = "keystone-db-sync"
    pod_spec(job)["initContainers"] = [{"name": "wait", "image": image("kolla-toolbox")}]
    pod_spec(job)["ephemeralContainers"] = [{"name": "debug", "image": image("kolla-toolbox")}]
    fields = [m.split(": ")[2].split(" ")[0] for m in run_policy("control-plane-restricted", job, STAGING)]
    assert fields == [
        "spec.template.spec.initContainers[0].securityContext.allowPrivilegeEscalation",
        "spec.template.spec.initContainers[0].securityContext.capabilities.drop",
        "spec.template.spec.ephemeralContainers[0].securityContext.allowPrivilegeEscalation",
        "spec.template.spec.ephemeralContainers[0].securityContext.capabilities.drop",
    ]


def test_scope_the_programs_own_pods_without_a_node_role() -> None:
    foreign = control_plane()
    for labels in (foreign["metadata"]["labels"], foreign["spec"]["template"]["metadata"]["labels"]):
        del labels["app.kubernetes.io/part-of"]
    del container(foreign)["securityContext"]["allowPrivilegeEscalation"]
    assert restricted(foreign) == []  # other teams' manifests are held to the baseline only
    libvirt = node_daemonset(next(p for p in node_pods(Topology.POD_PER_SERVICE) if p.name == "libvirt"))
    assert restricted(libvirt) == []  # node pods are judged by their roles


def test_windows_pods_skip_the_linux_only_controls() -> None:
    deployment = control_plane()
    pod_spec(deployment)["os"] = {"name": "windows"}
    del pod_spec(deployment)["securityContext"]["seccompProfile"]
    container(deployment)["securityContext"] = {}
    assert restricted(deployment) == []


KEYSTONE_ROOT = RestrictedException(
    service="keystone", component="api", image="keystone", controls=("runAsNonRoot",), reason="test: httpd as root"
)


def _as_root() -> dict:
    deployment = control_plane()
    pod_spec(deployment)["securityContext"]["runAsNonRoot"] = None
    return deployment


@pytest.mark.parametrize(
    ("change", "excused"),
    [
        (lambda d: None, True),
        (lambda d: container(d).update(image=image("glance-api")), False),  # another image under the same labels
        (lambda d: d["metadata"].update(namespace="elsewhere"), False),
        (lambda d: d["spec"]["template"]["metadata"]["labels"].update({"app.kubernetes.io/component": "x"}), False),
    ],
    ids=["exact", "other-image", "other-namespace", "other-labels"],
)
def test_an_exception_excuses_one_control_for_one_image(change, excused: bool) -> None:
    deployment = _as_root()
    change(deployment)
    settings = PackSettings.from_config(STAGING["control-plane-restricted"])
    found = control_plane_restricted(k8s_object(deployment), settings, (KEYSTONE_ROOT,))
    assert (found == []) is excused
    assert all("runAsNonRoot" in m for m in found)


def test_an_exception_does_not_excuse_other_controls() -> None:
    deployment = _as_root()
    del container(deployment)["securityContext"]["allowPrivilegeEscalation"]
    settings = PackSettings.from_config(STAGING["control-plane-restricted"])
    found = control_plane_restricted(k8s_object(deployment), settings, (KEYSTONE_ROOT,))
    assert [m.split(": ")[2].split(" ")[0] for m in found] == [
        "spec.template.spec.containers[0].securityContext.allowPrivilegeEscalation"
    ]


def test_the_exception_table_is_documented() -> None:
    """Each exception names real controls and says why; the README lists them (or says none)."""
    readme = (Path(__file__).parents[2] / "policies" / "README.md").read_text()
    section = readme.split("## Exceptions", 1)[1].split("\n## ", 1)[0]
    for exception in EXCEPTIONS:
        assert set(exception.controls) <= set(CONTROLS) and exception.reason
        assert f"{exception.service}/{exception.component}" in section and exception.reason in section
    if not EXCEPTIONS:
        assert "No control-plane image needs an exception" in section
