"""Ceph that Rook runs (`ceph.rook`): the pools and clients the program declares in Rook's namespace
(checked against Rook's CRDs of the pinned release, tests/fixtures/rook), the Job that copies their
keys with rights to exactly those objects, and the consumers mounting the copies as they mount an
external cluster's keyrings."""

from __future__ import annotations

import base64
import json
import threading
from collections.abc import Iterator
from functools import cache
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from typing import Any, ClassVar

import jsonschema
import pytest
import yaml

from tests.conftest import plan_of
from tests.helpers import objects, pod_template, settings_problems, unknown_fields, waits_for
from tests.test_ceph import keyring_mounts
from tools.plan import Plan

CRDS = Path(__file__).parent / "fixtures" / "rook"
ROOK = {"rook": {"cluster": {"name": "ceph", "namespace": "rook-ceph"}}, "external": None}
GLANCE_CAPS = {"mon": "profile rbd", "osd": "profile rbd pool=images", "mgr": "profile rbd pool=images"}
CINDER_CAPS = {
    "mon": "profile rbd",
    "osd": "profile rbd pool=volumes, profile rbd pool=vms, profile rbd-read-only pool=images",
    "mgr": "profile rbd pool=volumes, profile rbd pool=vms",
}
BACKUP_CAPS = {"mon": "profile rbd", "osd": "profile rbd pool=backups", "mgr": "profile rbd pool=backups"}
TARGETS = ["ceph-client-glance", "ceph-client-cinder", "ceph-client-cinder-backup", "ceph-conf"]


def rook_plan() -> Plan:
    return plan_of("prod", ceph=ROOK)


@cache
def _schema(plural: str) -> dict[str, Any]:
    [crd] = [d for d in yaml.safe_load_all((CRDS / f"{plural}.ceph.rook.io.yaml").read_text()) if d]
    [version] = [v for v in crd["spec"]["versions"] if v["name"] == "v1"]
    return version["schema"]["openAPIV3Schema"]


def _in(plan: Plan, kind: str, namespace: str) -> dict[str, Any]:
    return {n: r for n, r in objects(plan, kind).items() if r.inputs["metadata"].get("namespace") == namespace}


def test_pools_and_clients_with_the_readmes_capabilities_in_rooks_namespace() -> None:
    plan = rook_plan()
    pools = _in(plan, "CephBlockPool", "rook-ceph")
    clients = _in(plan, "CephClient", "rook-ceph")
    assert set(pools) == {"images", "volumes", "vms", "backups"}
    assert {n: c.inputs["spec"] for n, c in clients.items()} == {
        "glance": {"name": "glance", "caps": GLANCE_CAPS},
        "cinder": {"name": "cinder", "caps": CINDER_CAPS},
        "cinder-backup": {"name": "cinder-backup", "caps": BACKUP_CAPS},
    }
    for plural, found in (("cephblockpools", pools), ("cephclients", clients)):
        for resource in found.values():
            manifest = {k: resource.inputs[k] for k in ("apiVersion", "kind", "metadata", "spec")}
            assert manifest["apiVersion"] == "ceph.rook.io/v1"
            assert unknown_fields(manifest, _schema(plural)) == []
            jsonschema.validate(manifest, _schema(plural))
    assert pools["vms"].inputs["spec"] == {"failureDomain": "host", "replicated": {"size": 3}}


def test_only_the_pools_and_clients_the_stack_uses() -> None:
    plan = plan_of(
        "prod", ceph=ROOK, cinder={"backend": "lvm", "backup": "none"}, compute={"ephemeralStorage": "local"}
    )
    assert set(_in(plan, "CephBlockPool", "rook-ceph")) == {"images"}
    assert set(_in(plan, "CephClient", "rook-ceph")) == {"glance"}
    role = _in(plan, "Role", "openstack")["ceph-rook-keys"]
    assert role.inputs["rules"][0]["resourceNames"] == ["ceph-client-glance", "ceph-conf"]


def test_the_keys_job_reads_and_writes_exactly_the_objects_it_copies() -> None:
    plan = rook_plan()
    reader = _in(plan, "Role", "rook-ceph")["ceph-rook-keys-openstack"]
    assert reader.inputs["rules"] == [
        {
            "apiGroups": [""],
            "resources": ["secrets"],
            "resourceNames": ["rook-ceph-client-glance", "rook-ceph-client-cinder", "rook-ceph-client-cinder-backup"],
            "verbs": ["get"],
        },
        {
            "apiGroups": [""],
            "resources": ["configmaps"],
            "resourceNames": ["rook-ceph-mon-endpoints"],
            "verbs": ["get"],
        },
        {"apiGroups": ["ceph.rook.io"], "resources": ["cephclusters"], "resourceNames": ["ceph"], "verbs": ["get"]},
    ]
    binding = _in(plan, "RoleBinding", "rook-ceph")["ceph-rook-keys-openstack"]
    assert binding.inputs["subjects"] == [
        {"kind": "ServiceAccount", "name": "ceph-rook-keys", "namespace": "openstack"}
    ]
    assert binding.inputs["roleRef"]["name"] == "ceph-rook-keys-openstack"
    writer = _in(plan, "Role", "openstack")["ceph-rook-keys"]
    assert writer.inputs["rules"] == [
        {"apiGroups": [""], "resources": ["secrets"], "resourceNames": TARGETS, "verbs": ["get", "update"]}
    ]
    # The program creates what the Job fills (RBAC cannot narrow `create` to names), empty.
    for name in TARGETS:
        assert set(objects(plan, "Secret")[name].revealed["stringData"].values()) == {""}
    job = pod_template(objects(plan, "Job")["ceph-rook-keys"])["spec"]
    assert job["serviceAccountName"] == "ceph-rook-keys" and job["automountServiceAccountToken"] is True
    # It runs once Rook reports the pools and clients Ready (their Secrets then exist).
    job_urn = objects(plan, "Job")["ceph-rook-keys"].urn
    ceph_objects = {r.urn for r in plan.custom if r.kind in ("CephClient", "CephBlockPool")}
    assert ceph_objects and ceph_objects <= set(plan.dependencies[job_urn])
    for resource in plan.custom:
        if resource.urn in ceph_objects:
            assert resource.inputs["metadata"]["annotations"]["pulumi.com/waitFor"] == "jsonpath={.status.phase}=Ready"


def test_consumers_mount_the_copied_secrets_where_an_external_clusters_are_and_wait_for_them() -> None:
    plan = rook_plan()
    assert keyring_mounts(plan) == keyring_mounts(plan_of("prod"))
    for workload in ("glance-api", "cinder-volume", "cinder-backup", "nova-compute-kvm-general", "libvirt-kvm-general"):
        assert "ceph-rook-keys" in waits_for(plan, workload), workload
        spec = pod_template(plan.by_name(workload, "Deployment" if workload == "glance-api" else "DaemonSet"))["spec"]
        [conf] = [v for v in spec["volumes"] if v.get("secret", {}).get("secretName") == "ceph-conf"]
        mounts = [m for c in spec["containers"] for m in c.get("volumeMounts", []) if m["name"] == conf["name"]]
        assert mounts and {m["mountPath"] for m in mounts} == {"/etc/ceph/ceph.conf"}, workload
    # ceph.conf is not rendered into the services' configs: the monitors are known once Rook runs.
    assert "ceph.conf" not in objects(plan, "Secret")["glance-etc"].revealed["stringData"]
    for name in ("keystone-api", "nova-api", "cinder-api", "cinder-scheduler"):
        spec = pod_template(plan.by_name(name, "Deployment"))["spec"]
        assert not [v for v in spec["volumes"] if v.get("secret", {}).get("secretName") in TARGETS], name


@pytest.mark.parametrize(
    ("raw", "key", "fragment"),
    [
        ({"ceph": {"rook": {"cluster": {"name": "ceph"}}, "pools": {"vms": "VMs"}}}, "openstack:ceph.pools.vms", "DNS"),
        (
            {
                "ceph": {
                    "rook": {"cluster": {"name": "ceph"}},
                    "clients": {"cinderBackup": {"user": "cinder-backup", "keyringSecret": "ceph-client-cinder"}},
                }
            },
            "openstack:ceph.clients.cinderBackup.keyringSecret",
            "client.cinder's Secret too",
        ),
        ({"operators": {"rook": {"chartVersion": "1.20.6"}}}, "openstack:operators.rook.chartVersion", "^v[0-9]"),
        # Rook's operator refuses these CephClients (ValidateClient's reserved names): Pulumi would wait 20 minutes.
        (
            {
                "ceph": {
                    "rook": {"cluster": {"name": "ceph"}},
                    "clients": {"glance": {"user": "admin", "keyringSecret": "ceph-client-glance"}},
                }
            },
            "openstack:ceph.clients.glance.user",
            "Rook keeps for its own daemons",
        ),
        (
            {
                "ceph": {
                    "rook": {"cluster": {"name": "ceph"}},
                    "clients": {"cinderBackup": {"user": "rgw-backup", "keyringSecret": "ceph-client-backup"}},
                }
            },
            "openstack:ceph.clients.cinderBackup.user",
            "Rook keeps for its own daemons",
        ),
    ],
)
def test_rook_settings_errors_name_the_key(raw: dict[str, Any], key: str, fragment: str) -> None:
    found = [p for p in settings_problems(raw) if p.startswith(f"{key}: ")]
    assert found and fragment in found[0], settings_problems(raw)


# The keys Job's script against a stand-in of the API server: what it reads and writes.
class _Api(BaseHTTPRequestHandler):
    objects: ClassVar[dict[str, Any]] = {}
    puts: ClassVar[list[tuple[str, Any]]] = []

    def _answer(self, code: int, body: Any) -> None:
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        found = self.objects.get(self.path)
        self._answer(200 if found else 404, found or {"kind": "Status", "code": 404})

    def do_PUT(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.puts.append((self.path, body))
        self.objects[self.path] = body
        self._answer(200, body)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def api() -> Iterator[tuple[type[_Api], str]]:
    server = HTTPServer(("127.0.0.1", 0), _Api)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    _Api.objects, _Api.puts = {}, []
    yield _Api, f"http://127.0.0.1:{server.server_port}"
    server.shutdown()


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def test_the_keys_script_writes_keyrings_and_ceph_conf_in_the_shape_of_an_external_cluster(
    api: tuple[type[_Api], str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import importlib

    fake, url = api
    key = "AQBvaBFmAAAAABAAx4Pj0l6q4tYr2bN1lK4ZqA=="
    fsid = "5c3f8a2e-7d41-4b9e-a6c0-2f1e9d8b7a63"
    fake.objects = {
        "/api/v1/namespaces/rook-ceph/secrets/rook-ceph-client-glance": {
            "data": {"glance": _b64(key), "userID": _b64("glance"), "userKey": _b64(key)}
        },
        "/api/v1/namespaces/rook-ceph/configmaps/rook-ceph-mon-endpoints": {
            "data": {"data": "a=10.0.0.1:6789,b=10.0.0.2:6789,c=10.0.0.3:3300", "maxMonId": "2"}
        },
        "/apis/ceph.rook.io/v1/namespaces/rook-ceph/cephclusters/ceph": {"status": {"ceph": {"fsid": fsid}}},
        "/api/v1/namespaces/openstack/secrets/ceph-client-glance": {"metadata": {"resourceVersion": "7"}},
        "/api/v1/namespaces/openstack/secrets/ceph-conf": {"metadata": {"resourceVersion": "8"}},
    }
    for name, value in {
        "ROOK_NAMESPACE": "rook-ceph",
        "ROOK_CLUSTER": "ceph",
        "CEPH_CLIENTS": "rook-ceph-client-glance=ceph-client-glance=glance",
        "CEPH_CONF_TARGET": "ceph-conf",
    }.items():
        monkeypatch.setenv(name, value)
    monkeypatch.syspath_prepend(str(Path(__file__).parents[1] / "components" / "scripts"))
    script = importlib.import_module("ceph_rook_keys")
    client = importlib.import_module("kube_api").KubeApi(url, lambda: "t", "openstack")
    script.main(client)
    written = {path.rsplit("/", 1)[1]: body for path, body in fake.puts}
    assert set(written) == {"ceph-client-glance", "ceph-conf"}
    assert written["ceph-client-glance"]["metadata"]["resourceVersion"] == "7"  # a PUT of what it read
    keyring = base64.b64decode(written["ceph-client-glance"]["data"]["keyring"]).decode()
    assert keyring == f"[client.glance]\n\tkey = {key}\n"
    conf = base64.b64decode(written["ceph-conf"]["data"]["ceph.conf"]).decode()
    assert conf == f"[global]\nfsid = {fsid}\nmon_host = 10.0.0.1:6789,10.0.0.2:6789,10.0.0.3:3300\n"
    # Run again: nothing changes, nothing is written.
    fake.puts = []
    script.main(client)
    assert fake.puts == []


def test_the_policy_pack_passes_the_rook_plan() -> None:
    """The Roles name what they grant (resourceNames), in the stack's namespace and in Rook's:
    the pack's RBAC rules, which refuse reading every Secret of a namespace, find nothing."""
    from policies.report import load_config
    from tools.plan import policy_report

    plan = rook_plan()
    violations = policy_report(plan, load_config("prod"))
    assert [v["message"] for v in violations if v["enforcement"] == "mandatory"] == []
    assert any(r.kind == "CephClient" for r in plan.registrations)  # the pack saw them
