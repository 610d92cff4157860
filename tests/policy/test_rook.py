"""What the program asks of Rook (rook-ceph): CephClients hold rbd profiles on the stack's pools only,
no CephCluster and no other Rook kind; the program's own pools and clients pass."""

from __future__ import annotations

from typing import Any

import pytest

from policies.report import load_config
from tests.conftest import plan_of
from tests.helpers import objects

from .builders import run_policy

PROD = load_config("prod")  # ceph: the default pools images, volumes, vms, backups
ROOK = {"rook": {"cluster": {"name": "ceph", "namespace": "rook-ceph"}}, "external": None}


def client(**caps: str) -> dict[str, Any]:
    return {
        "apiVersion": "ceph.rook.io/v1",
        "kind": "CephClient",
        "metadata": {"name": "glance", "namespace": "rook-ceph"},
        "spec": {"name": "glance", "caps": caps},
    }


def test_the_stacks_pools_are_its_settings() -> None:
    assert PROD["rook-ceph"]["cephPools"] == ["backups", "images", "vms", "volumes"]
    assert load_config("staging")["rook-ceph"]["cephPools"] == []


def test_the_programs_pools_and_clients_pass() -> None:
    plan = plan_of("prod", ceph=ROOK)
    declared = {**objects(plan, "CephClient"), **objects(plan, "CephBlockPool")}
    assert {r.kind for r in declared.values()} == {"CephClient", "CephBlockPool"}
    for found in declared.values():
        manifest = {k: found.inputs[k] for k in ("apiVersion", "kind", "metadata", "spec")}
        assert run_policy("rook-ceph", manifest, PROD) == [], found.k8s_name
    caps = {r.inputs["spec"]["caps"]["osd"] for r in declared.values() if r.kind == "CephClient"}
    assert any("rbd-read-only" in c for c in caps)  # the program's caps (components/infrastructure/rook.py)


@pytest.mark.parametrize(
    ("caps", "found"),
    [
        ({"mon": "allow *"}, 'spec.caps.mon="allow *" is not allowed'),
        ({"mon": "profile rbd", "osd": "allow *"}, 'spec.caps.osd="allow *"'),
        ({"osd": "profile rbd"}, 'spec.caps.osd="profile rbd"'),  # every pool
        ({"osd": "profile rbd pool=images, profile rbd pool=other-stack"}, '"profile rbd pool=other-stack"'),
        ({"osd": "profile admin"}, '"profile admin"'),
        ({"mgr": "profile rbd-read-only pool=images"}, 'spec.caps.mgr="profile rbd-read-only pool=images"'),
        ({"mds": "allow"}, 'spec.caps.mds="allow"'),
        ({"osd": "profile rbd pool=images namespace=x"}, "namespace=x"),
    ],
)
def test_caps_beyond_the_stacks_pools_are_refused(caps: dict[str, str], found: str) -> None:
    messages = run_policy("rook-ceph", client(**caps), PROD)
    assert len(messages) == 1 and found in messages[0], messages
    assert "on the stack's pools: backups, images, vms, volumes" in messages[0]


def test_a_stack_without_ceph_asks_for_no_client() -> None:
    [message] = run_policy("rook-ceph", client(mon="profile rbd"), load_config("staging"))
    assert "CephClient is not allowed; allowed: a CephClient only where the stack uses Ceph pools" in message


@pytest.mark.parametrize("kind", ["CephCluster", "CephObjectStoreUser", "CephFilesystem"])
def test_a_ceph_cluster_or_any_other_rook_kind_is_refused(kind: str) -> None:
    manifest = {"apiVersion": "ceph.rook.io/v1", "kind": kind, "metadata": {"name": "ceph", "namespace": "rook-ceph"},
                "spec": {"dataDirHostPath": "/var/lib/rook"}}  # fmt: skip
    [message] = run_policy("rook-ceph", manifest, PROD)
    assert message.startswith(f"{kind} rook-ceph/ceph: ") and f"{kind} is not allowed" in message


def test_a_patch_of_the_clusters_ceph_cluster_is_refused() -> None:
    metadata = {"name": "ceph", "namespace": "rook-ceph"}
    spec = {"mon": {"count": 1}}
    patch = {"apiVersion": "ceph.rook.io/v1", "kind": "CephCluster", "metadata": metadata, "spec": spec}
    resource_type = "kubernetes:ceph.rook.io/v1:CephClusterPatch"
    [message] = run_policy("rook-ceph", patch, PROD, resource_type=resource_type)
    assert "CephClusterPatch rook-ceph/ceph: cluster: CephCluster is not allowed" in message
