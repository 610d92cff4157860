"""The lab's API server answers as kube-apiserver does where its clients depend on it, by the plan's RBAC."""

from __future__ import annotations

import base64
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from tests.lab.cloud.apiserver import MERGE_PATCH, LabApiServer

ROLE = {
    "kind": "Role",
    "metadata": {"name": "rotate", "namespace": "os"},
    "rules": [{"apiGroups": [""], "resources": ["secrets"], "verbs": ["get", "update"], "resourceNames": ["fernet"]}],
}
BINDING = {
    "kind": "RoleBinding",
    "metadata": {"name": "rotate", "namespace": "os"},
    "roleRef": {"kind": "Role", "name": "rotate"},
    "subjects": [{"kind": "ServiceAccount", "name": "rotator", "namespace": "os"}],
}
NODES_ROLE = {
    "kind": "ClusterRole",
    "metadata": {"name": "nodes"},
    "rules": [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["list", "patch"]}],
}
NODES_BINDING = {"kind": "ClusterRoleBinding", "metadata": {"name": "nodes"},
                 "roleRef": {"kind": "ClusterRole", "name": "nodes"},
                 "subjects": [{"kind": "ServiceAccount", "name": "maint", "namespace": "os"}]}  # fmt: skip


class World:
    def __init__(self) -> None:
        self.nodes = [{"name": "c1", "labels": {"kubernetes.io/hostname": "c1", "compute": "yes"}, "annotations": {},
                       "taints": [], "unschedulable": False, "address": "192.168.200.13"}]  # fmt: skip
        self.patched: list[dict[str, Any]] = []
        self.secrets: dict[str, Mapping[str, str]] = {}

    def api_nodes(self) -> list[dict[str, Any]]:
        return self.nodes

    def api_patch_node(self, name: str, patched: dict[str, Any]) -> None:
        self.patched.append(patched)
        self.nodes[0]["annotations"] = patched["metadata"]["annotations"]

    def api_pods(self, namespace: str) -> list[dict[str, Any]]:
        return []

    def api_delete_pod(self, namespace: str, name: str) -> bool:
        return False

    def api_update_secret(self, namespace: str, name: str, data: Mapping[str, str]) -> None:
        self.secrets[name] = data


@pytest.fixture
def api(tmp_path: Path) -> LabApiServer:
    server = LabApiServer(World(), [ROLE, BINDING, NODES_ROLE, NODES_BINDING], tmp_path, ("10.96.0.1",))
    tmp_path.joinpath("apiserver.crt").write_text("CA")
    for name in ("fernet", "other"):
        server.add_secret("os", {"metadata": {"name": name}, "stringData": {"0": "key"}})
    return server


def token(api: LabApiServer, account: str) -> str:
    return "Bearer " + api.issue("os", account)["token"]


def test_a_role_with_resource_names_grants_exactly_those(api: LabApiServer) -> None:
    rotator = token(api, "rotator")
    code, secret = api.handle("GET", "/api/v1/namespaces/os/secrets/fernet", None, rotator, None)
    assert code == 200 and base64.b64decode(secret["data"]["0"]) == b"key"
    assert api.handle("GET", "/api/v1/namespaces/os/secrets/other", None, rotator, None)[0] == 403
    assert api.handle("GET", "/api/v1/namespaces/os/secrets", None, rotator, None)[0] == 403  # list
    assert api.handle("GET", "/api/v1/nodes", None, rotator, None)[0] == 403
    assert api.handle("GET", "/api/v1/namespaces/os/secrets/fernet", None, "Bearer nobody", None)[0] == 401
    assert api.denied and "rotator" in api.denied[0]


def test_an_update_needs_the_version_it_read_and_reaches_the_pods(api: LabApiServer) -> None:
    rotator = token(api, "rotator")
    _, secret = api.handle("GET", "/api/v1/namespaces/os/secrets/fernet", None, rotator, None)
    stale = {**secret, "metadata": {**secret["metadata"], "resourceVersion": "0"}}
    assert api.handle("PUT", "/api/v1/namespaces/os/secrets/fernet", stale, rotator, None)[0] == 409
    secret["data"] = {"0": base64.b64encode(b"new").decode(), "1": base64.b64encode(b"next").decode()}
    code, stored = api.handle("PUT", "/api/v1/namespaces/os/secrets/fernet", secret, rotator, None)
    assert code == 200 and stored["metadata"]["resourceVersion"] != secret["metadata"]["resourceVersion"]
    assert api.world.secrets["fernet"] == {"0": "new", "1": "next"}  # type: ignore[attr-defined]


def test_a_secret_is_created_once_by_who_may_create_and_reaches_the_pods(tmp_path: Path) -> None:
    """As the CA bundle Job creates internal-ca-bundle on a new stack: a create needs a rule without names."""
    creator = {"kind": "Role", "metadata": {"name": "bundle", "namespace": "os"},
               "rules": [{"apiGroups": [""], "resources": ["secrets"], "verbs": ["create"]}]}  # fmt: skip
    account = {"kind": "ServiceAccount", "name": "bundle", "namespace": "os"}
    binding = {**BINDING, "metadata": {"name": "bundle", "namespace": "os"},
               "roleRef": {"kind": "Role", "name": "bundle"}, "subjects": [account]}  # fmt: skip
    api = LabApiServer(World(), [ROLE, BINDING, creator, binding], tmp_path, ("10.96.0.1",))
    tmp_path.joinpath("apiserver.crt").write_text("CA")
    body = {"metadata": {"name": "bundle"}, "data": {"ca.crt": base64.b64encode(b"PEM").decode()}}
    path = "/api/v1/namespaces/os/secrets"
    assert api.handle("POST", path, body, token(api, "rotator"), None)[0] == 403  # names only: no create
    code, created = api.handle("POST", path, body, token(api, "bundle"), None)
    assert code == 201 and created["type"] == "Opaque" and created["metadata"]["namespace"] == "os"
    assert api.world.secrets["bundle"] == {"ca.crt": "PEM"}  # type: ignore[attr-defined]
    assert api.handle("POST", path, body, token(api, "bundle"), None)[0] == 409  # AlreadyExists
    assert api.handle("GET", f"{path}/bundle", None, token(api, "bundle"), None)[0] == 403  # create only


def test_nodes_are_patched_by_merge_patch_with_a_version_precondition(api: LabApiServer) -> None:
    maint = token(api, "maint")
    code, nodes = api.handle("GET", "/api/v1/nodes?labelSelector=compute%3Dyes", None, maint, None)
    assert code == 200 and [n["metadata"]["name"] for n in nodes["items"]] == ["c1"]
    version = nodes["items"][0]["metadata"]["resourceVersion"]
    patch = {"metadata": {"annotations": {"a": "b"}, "resourceVersion": version}}
    assert api.handle("PATCH", "/api/v1/nodes/c1", patch, maint, "application/json-patch+json")[0] == 415
    code, node = api.handle("PATCH", "/api/v1/nodes/c1", patch, maint, MERGE_PATCH)
    assert code == 200 and node["metadata"]["annotations"] == {"a": "b"}
    assert api.handle("PATCH", "/api/v1/nodes/c1", patch, maint, MERGE_PATCH)[0] == 409  # the old version


def test_set_based_selectors_are_refused_not_misread(api: LabApiServer) -> None:
    maint = token(api, "maint")
    assert api.handle("GET", "/api/v1/nodes?labelSelector=compute%20in%20(yes)", None, maint, None)[0] == 400


READER = {
    "kind": "Role",
    "metadata": {"name": "reader", "namespace": "rook"},
    "rules": [
        {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"], "resourceNames": ["mons"]},
        {"apiGroups": ["ceph.rook.io"], "resources": ["cephclusters"], "verbs": ["get"], "resourceNames": ["ceph"]},
    ],
}
READER_BINDING = {"kind": "RoleBinding", "metadata": {"name": "reader", "namespace": "rook"},
                  "roleRef": {"kind": "Role", "name": "reader"},
                  "subjects": [{"kind": "ServiceAccount", "name": "keys", "namespace": "os"}]}  # fmt: skip


def test_configmaps_and_custom_resources_are_served_by_their_api_group(tmp_path: Path) -> None:
    api = LabApiServer(World(), [READER, READER_BINDING], tmp_path, ("10.96.0.1",))
    tmp_path.joinpath("apiserver.crt").write_text("CA")
    keys = "Bearer " + api.issue("os", "keys")["token"]
    cluster = "/apis/ceph.rook.io/v1/namespaces/rook/cephclusters/ceph"
    assert api.handle("GET", "/api/v1/namespaces/rook/configmaps/mons", None, keys, None)[0] == 404  # not yet there
    api.install_crd("ceph.rook.io", "cephclusters")
    assert api.handle("GET", cluster, None, keys, None)[0] == 404
    api.put_object("", "configmaps", {"metadata": {"name": "mons", "namespace": "rook"}, "data": {"data": "a=x"}})
    api.put_object("ceph.rook.io", "cephclusters", {"metadata": {"name": "ceph", "namespace": "rook"},
                                                    "status": {"ceph": {"fsid": "f"}}})  # fmt: skip
    assert api.handle("GET", "/api/v1/namespaces/rook/configmaps/mons", None, keys, None)[1]["data"] == {"data": "a=x"}
    assert api.handle("GET", cluster, None, keys, None)[1]["status"] == {"ceph": {"fsid": "f"}}
    # The rule names its group: the same resource name in another group is not granted.
    api.install_crd("other.io", "cephclusters")
    api.put_object("other.io", "cephclusters", {"metadata": {"name": "ceph", "namespace": "rook"}})
    assert api.handle("GET", "/apis/other.io/v1/namespaces/rook/cephclusters/ceph", None, keys, None)[0] == 403
    assert api.handle("GET", "/api/v1/namespaces/rook/configmaps/other", None, keys, None)[0] == 403
    with pytest.raises(ValueError, match="install its CRD"):
        api.put_object("ceph.rook.io", "cephclients", {"metadata": {"name": "c", "namespace": "rook"}})
