"""Storage that reaches the host (host-storage): PersistentVolumes on a node's paths, raw block
devices in a container, inline CSI and flexVolume drivers, and claims bound by name to a
volume someone else made. The program's claims (by storage class) pass."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from components.tables.roles import Topology
from policies.report import check_objects

from .builders import control_plane, k8s_object, pod_spec, stack_config

STAGING = stack_config(Topology.POD_PER_SERVICE)
CHART = "openstack:infra:X$kubernetes:helm.sh/v4:Chart"


def volume(source: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": "pv"},
            "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"], **source}}  # fmt: skip


def claim(**spec: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "c", "namespace": "openstack"},
            "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}},
                     **spec}}  # fmt: skip


def with_pod(change: Any) -> dict[str, Any]:
    deployment = copy.deepcopy(control_plane())
    change(pod_spec(deployment))
    return deployment


def block_device(spec: dict[str, Any]) -> None:
    spec["volumes"].append({"name": "disk", "persistentVolumeClaim": {"claimName": "c"}})
    spec["containers"][0]["volumeDevices"] = [{"name": "disk", "devicePath": "/dev/xvda"}]


def inline_csi(spec: dict[str, Any]) -> None:
    spec["volumes"].append({"name": "x", "csi": {"driver": "hostpath.csi.k8s.io", "volumeAttributes": {}}})


def flex(spec: dict[str, Any]) -> None:
    spec["volumes"].append({"name": "x", "flexVolume": {"driver": "example/lvm"}})


REFUSED: list[tuple[str, dict[str, Any], str]] = [
    ("pv-hostpath", volume({"hostPath": {"path": "/etc"}}), "spec.hostPath"),
    ("pv-local", volume({"local": {"path": "/dev/sda"},
                         "nodeAffinity": {"required": {"nodeSelectorTerms": []}}}), "spec.local"),
    ("pv-flex", volume({"flexVolume": {"driver": "example/lvm"}}), "spec.flexVolume"),
    ("claim-by-volume-name", claim(volumeName="someones-hostpath"), "spec.volumeName"),
    ("volume-devices", with_pod(block_device), "volumeDevices"),
    ("inline-csi", with_pod(inline_csi), ".csi"),
    ("flex-volume", with_pod(flex), ".flexVolume"),
]  # fmt: skip


@pytest.mark.parametrize(("manifest", "field"), [c[1:] for c in REFUSED], ids=[c[0] for c in REFUSED])
def test_storage_that_reaches_the_host_is_refused(manifest: dict[str, Any], field: str) -> None:
    violations = [v for v in check_objects([k8s_object(manifest)], STAGING) if v.policy == "host-storage"]
    assert [v.enforcement for v in violations] == ["mandatory"]
    assert field in violations[0].message


@pytest.mark.parametrize("manifest", [volume({"hostPath": {"path": "/"}}), with_pod(inline_csi)], ids=["pv", "csi"])
def test_charts_are_held_to_it_too(manifest: dict[str, Any]) -> None:
    assert "host-storage" in {v.policy for v in check_objects([k8s_object(manifest, CHART)], STAGING)}


def test_an_operators_pod_is_held_to_it() -> None:
    mariadb = {"apiVersion": "k8s.mariadb.com/v1alpha1", "kind": "MariaDB", "metadata": {"name": "m"},
               "spec": {"volumes": [{"name": "x", "csi": {"driver": "d"}}]}}  # fmt: skip
    assert "host-storage" in {v.policy for v in check_objects([k8s_object(mariadb)], STAGING)}


PASSING: list[tuple[str, dict[str, Any]]] = [
    ("claim", claim()),
    ("claim-with-class", claim(storageClassName="cephfs")),
    ("pv-nfs", volume({"nfs": {"server": "nfs.example.com", "path": "/exports/glance"}})),
    ("pv-csi", volume({"csi": {"driver": "rbd.csi.ceph.com", "volumeHandle": "x"}})),
    ("pod-claim",
     with_pod(lambda spec: spec["volumes"].append({"name": "d", "persistentVolumeClaim": {"claimName": "c"}}))),
]  # fmt: skip


@pytest.mark.parametrize("manifest", [c[1] for c in PASSING], ids=[c[0] for c in PASSING])
def test_storage_through_the_cluster_passes(manifest: dict[str, Any]) -> None:
    assert [v.policy for v in check_objects([k8s_object(manifest)], STAGING) if v.policy == "host-storage"] == []
