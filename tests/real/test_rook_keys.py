"""`ceph.rook` against a real Ceph: Rook's objects made by a stand-in of its operator, the plan's own
ceph-rook-keys Job run for real, and the copied keys used on the cluster.

A real Ceph (tests/lab/cloud/ceph.py's recipe: one monitor, one manager, one OSD, Debian 12's Ceph 16)
runs alone in a network namespace of its own, on its loopback. Rook's operator is NOT run (no
Kubernetes runs here): tests/lab/cloud/rook_standin.py does what Rook v1.20's controllers do with the
plan's CephBlockPools and CephClients (pools, CRUSH rules, the rbd application, `rbd pool init`,
clients with exactly spec.caps, the client Secrets, the monitors' ConfigMap and the CephCluster's
fsid, in Rook's formats), with one difference it reports: one OSD, so each pool's size is 1.

The Job runs as its pod would: the plan's container args and env, the scripts of its ConfigMap,
the pod's user (runAsUser), and the ServiceAccount's token, CA and namespace mounted where the
kubelet mounts them (a mount namespace of its own), against the lab's API server
(tests/lab/cloud/apiserver.py), which authorises every request by the plan's Roles. Then each
client, with nothing but the files the Job wrote, does on the cluster what its caps allow and is
refused the rest.

Run it under the lab's lock (`flock /work/lab.lock ...`): its Ceph lives in a cgroup of the lab's
tree, which a starting lab would end.
"""

from __future__ import annotations

import base64
import json
import shutil
import subprocess
import tempfile
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import SecretsOnlyWorld
from tests.lab.cloud.apiserver import LabApiServer
from tests.lab.cloud.ceph import CephStandIn
from tests.lab.cloud.rook_standin import MON_ENDPOINTS, RookStandIn
from tests.test_rook import rook_plan
from tools.plan import Plan
from tools.runtime import Registration

NETNS = "real-rook-ceph"
ADDRESS = "127.0.0.1"
API_PORT = 6443
ACCOUNT_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"
RBAC_KINDS = ("Role", "RoleBinding", "ClusterRole", "ClusterRoleBinding")
OP_TIMEOUT = "20"  # seconds a client waits for an OSD or monitor: a refusal is an answer, not a wait


@dataclass
class Rig:
    plan: Plan
    ceph: CephStandIn
    api: LabApiServer
    world: SecretsOnlyWorld
    rook: RookStandIn
    work: Path

    def run_job(self, name: str) -> subprocess.CompletedProcess[str]:
        """The Job's container as its pod runs it: args, env, mounted scripts, user and ServiceAccount."""
        job = self.plan.by_name(name, "Job")
        pod = job.revealed["spec"]["template"]["spec"]
        (container,) = pod["containers"]
        root = self.work / "pods" / name
        shutil.rmtree(root, ignore_errors=True)
        volumes = {v["name"]: v for v in pod["volumes"]}
        for mount in container["volumeMounts"]:
            source = volumes[mount["name"]]["configMap"]
            target = root / mount["mountPath"].lstrip("/")
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(self.plan.by_name(source["name"], "ConfigMap").revealed["data"][mount["subPath"]])
            target.chmod(source["defaultMode"])
        account = root / "serviceaccount"
        account.mkdir(parents=True)
        namespace = self.plan.settings.namespace
        for file, text in self.api.issue(namespace, pod["serviceAccountName"]).items():
            (account / file).write_text(text)
        uid, gid = pod["securityContext"]["runAsUser"], pod["securityContext"]["fsGroup"]
        subprocess.run(["chown", "-R", f"{uid}:{gid}", str(self.work / "pods")], check=True)
        # The scripts at their mount paths, here under the pod's root; the command as the plan gives it.
        args = [str(root / a.lstrip("/")) if a.startswith("/scripts/") else a for a in container["args"]]
        env = {e["name"]: e["value"] for e in container["env"]}  # the plan gives literal values only
        env |= {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "LANG": "C.UTF-8", "KUBERNETES_SERVICE_HOST": ADDRESS,
                "KUBERNETES_SERVICE_PORT": str(API_PORT)}  # fmt: skip
        # A clean machine has no ServiceAccount directory; an empty mount point left on the host's /run is harmless,
        # and the bind mount stays inside the Job's own mount namespace.
        mount = (
            f"mkdir -p {ACCOUNT_DIR} && mount --bind {account} {ACCOUNT_DIR}"
            f' && exec setpriv --reuid={uid} --regid={gid} --clear-groups "$@"'
        )
        command = ["ip", "netns", "exec", NETNS, "unshare", "--mount", "sh", "-c", mount, "sh", *args]
        return subprocess.run(command, env=env, capture_output=True, text=True, timeout=120)

    def written(self, name: str) -> dict[str, str]:
        return self.world.secrets[(self.plan.settings.namespace, name)]

    def admin_get(self, path: str) -> tuple[int, dict[str, Any]]:
        return self.api.handle("GET", path, None, f"Bearer {self.api.admin_token()}", None)

    def ceph_json(self, *args: str) -> Any:
        done = subprocess.run(self.ceph.ceph_command(*args, "-f", "json"), capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout)


def _objects(plan: Plan, *kinds: str) -> list[Registration]:
    return [r for r in plan.custom if r.kind in kinds]


@pytest.fixture(scope="module")
def rig() -> Iterator[Rig]:
    plan = rook_plan()
    assert plan.settings.ceph is not None
    # Not pytest's directory (mode 0700 above it): the pod's user reads its scripts and token under it.
    work = Path(tempfile.mkdtemp(prefix="rook-keys-"))
    work.chmod(0o755)
    ceph = CephStandIn(plan.settings.ceph, work / "ceph", address=ADDRESS, netns=NETNS, cgroup=NETNS,
                       fsid=str(uuid.uuid4()))  # fmt: skip
    world = SecretsOnlyWorld("ceph-rook-keys")
    rbac = [r.revealed for r in _objects(plan, *RBAC_KINDS)]
    api = LabApiServer(world, rbac, work / "apiserver", (ADDRESS,))
    try:
        ceph.start_alone()
        api.start(f"/run/netns/{NETNS}", API_PORT)
        for secret in _objects(plan, "Secret"):
            api.add_secret(plan.settings.namespace, secret.revealed)
        rook = RookStandIn(ceph, api, "rook-ceph", "ceph")
        rook.install()
        rook.reconcile(r.revealed for r in _objects(plan, "CephBlockPool", "CephClient"))
        yield Rig(plan, ceph, api, world, rook, work)
    finally:
        api.stop()
        ceph.stop()
        shutil.rmtree(work, ignore_errors=True)


@pytest.fixture(scope="module")
def job_run(rig: Rig) -> subprocess.CompletedProcess[str]:
    return rig.run_job("ceph-rook-keys")


def test_the_stand_in_says_what_it_reduces(rig: Rig) -> None:
    # One OSD: every pool's size is 1 (its spec asks 3), and the report of the stand-in says so.
    assert set(rig.rook.reduced) == {f"CephBlockPool {p}" for p in ("images", "volumes", "vms", "backups")}
    assert all("size 3 → 1" in why for why in rig.rook.reduced.values())


def test_pools_and_clients_are_ready_and_as_declared_on_the_real_cluster(rig: Rig) -> None:
    for pool in _objects(rig.plan, "CephBlockPool"):
        name = pool.revealed["metadata"]["name"]
        code, found = rig.admin_get(f"/apis/ceph.rook.io/v1/namespaces/rook-ceph/cephblockpools/{name}")
        assert code == 200 and found["status"]["phase"] == "Ready", found
        assert "rbd" in rig.ceph_json("osd", "pool", "application", "get", name)
        rule = rig.ceph_json("osd", "pool", "get", name, "crush_rule")["crush_rule"]
        steps = rig.ceph_json("osd", "crush", "rule", "dump", rule)["steps"]
        assert {"op": "chooseleaf_firstn", "num": 0, "type": pool.revealed["spec"]["failureDomain"]} in steps
    for client in _objects(rig.plan, "CephClient"):
        spec = client.revealed["spec"]
        [entry] = rig.ceph_json("auth", "get", f"client.{spec['name']}")
        assert entry["caps"] == spec["caps"]  # exactly the CephClient's caps, no more
        name = client.revealed["metadata"]["name"]
        code, found = rig.admin_get(f"/apis/ceph.rook.io/v1/namespaces/rook-ceph/cephclients/{name}")
        assert code == 200 and found["status"]["phase"] == "Ready", found
        assert found["status"]["info"]["secretName"] == f"rook-ceph-client-{name}"


def test_the_job_copies_rooks_keys_and_monitors_within_its_rights(
    rig: Rig, job_run: subprocess.CompletedProcess[str]
) -> None:
    assert job_run.returncode == 0, job_run.stdout + job_run.stderr
    assert rig.api.denied == []
    # It read Rook's objects by name, and wrote the stack's Secrets only.
    job_requests = [(verb, path) for who, verb, path, _ in rig.api.requests if who == "openstack:ceph-rook-keys"]
    reads = sorted(p for v, p in job_requests if v == "GET" and "/namespaces/rook-ceph/" in p)
    assert reads == sorted([
        *(f"/api/v1/namespaces/rook-ceph/secrets/rook-ceph-client-{n}" for n in ("glance", "cinder", "cinder-backup")),
        f"/api/v1/namespaces/rook-ceph/configmaps/{MON_ENDPOINTS}",
        "/apis/ceph.rook.io/v1/namespaces/rook-ceph/cephclusters/ceph",
    ])  # fmt: skip
    assert {p.rsplit("/", 1)[1] for v, p in job_requests if v == "PUT"} == {
        "ceph-client-glance", "ceph-client-cinder", "ceph-client-cinder-backup", "ceph-conf"}  # fmt: skip
    for user in ("glance", "cinder", "cinder-backup"):
        key = rig.ceph_json("auth", "get-key", f"client.{user}")["key"]
        assert rig.written(f"ceph-client-{user}") == {"keyring": f"[client.{user}]\n\tkey = {key}\n"}
    conf = rig.written("ceph-conf")["ceph.conf"]
    assert conf == f"[global]\nfsid = {rig.ceph.cluster_fsid}\nmon_host = {ADDRESS}:6789\n"
    # Run again: the Secrets are up to date, nothing is written.
    puts = sum(1 for _, verb, *_ in rig.api.requests if verb == "PUT")
    again = rig.run_job("ceph-rook-keys")
    assert again.returncode == 0 and sum(1 for _, verb, *_ in rig.api.requests if verb == "PUT") == puts


def rbd(rig: Rig, user: str, *args: str) -> subprocess.CompletedProcess[str]:
    """`rbd` as a consumer runs it: the Job's ceph.conf and the client's keyring, nothing else."""
    files = rig.work / "consumer" / user
    files.mkdir(parents=True, exist_ok=True)
    (files / "ceph.conf").write_text(rig.written("ceph-conf")["ceph.conf"])
    (files / "keyring").write_text(rig.written(f"ceph-client-{user}")["keyring"])
    command = ["ip", "netns", "exec", NETNS, "rbd", "-c", str(files / "ceph.conf"), "--keyring", str(files / "keyring"),
               "--id", user, f"--rados-osd-op-timeout={OP_TIMEOUT}", f"--rados-mon-op-timeout={OP_TIMEOUT}",
               *args]  # fmt: skip
    return subprocess.run(command, capture_output=True, text=True, timeout=90)


# (client, pool) → may it write there, may it read there (the README's capabilities, kolla-ansible's).
ACCESS = {
    ("glance", "images"): (True, True),
    ("glance", "volumes"): (False, False),
    ("cinder", "volumes"): (True, True),
    ("cinder", "vms"): (True, True),
    ("cinder", "images"): (False, True),  # reads images to clone them
    ("cinder", "backups"): (False, False),
    ("cinder-backup", "backups"): (True, True),
    ("cinder-backup", "volumes"): (False, False),
}


@pytest.mark.usefixtures("job_run")
def test_each_client_does_on_the_cluster_exactly_what_its_caps_allow(rig: Rig) -> None:
    found = {}
    for (user, pool), _ in ACCESS.items():
        image = f"{pool}/{user}-{uuid.uuid4().hex[:6]}"
        wrote = rbd(rig, user, "create", image, "--size", "4M")
        listed = rbd(rig, user, "ls", pool)
        found[(user, pool)] = (wrote.returncode == 0, listed.returncode == 0)
        for refused in (r for r in (wrote, listed) if r.returncode != 0):
            assert "Operation not permitted" in refused.stderr or "(1)" in refused.stderr, refused.stderr
        if wrote.returncode == 0:
            assert image.split("/")[1] in listed.stdout.split()
    assert found == ACCESS


def test_rooks_secret_is_what_rook_writes(rig: Rig) -> None:
    code, secret = rig.admin_get("/api/v1/namespaces/rook-ceph/secrets/rook-ceph-client-cinder-backup")
    assert code == 200 and secret["type"] == "kubernetes.io/rook"
    data = {k: base64.b64decode(v).decode() for k, v in secret["data"].items()}
    key = rig.ceph_json("auth", "get-key", "client.cinder-backup")["key"]
    assert data == {"cinder-backup": key, "userID": "cinder-backup", "userKey": key}
    code, endpoints = rig.admin_get(f"/api/v1/namespaces/rook-ceph/configmaps/{MON_ENDPOINTS}")
    assert endpoints["data"]["data"] == f"a={ADDRESS}:6789" and endpoints["data"]["maxMonId"] == "0"
    assert json.loads(endpoints["data"]["mapping"])["node"]["a"]["Address"] == ADDRESS
