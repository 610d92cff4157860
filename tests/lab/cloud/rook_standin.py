"""A stand-in for Rook's operator, over a real Ceph cluster: what Rook v1.20's controllers do with
the objects a stack on `ceph.rook` declares (components/infrastructure/rook.py). It is not Rook.

No Kubernetes runs here, so no operator watches the objects: this does, once and in order, what
Rook's controllers do for them (read from github:rook/rook at v1.20.6, the chart the settings pin),
with the same Ceph commands against a real cluster (tests/lab/cloud/ceph.py), and writes what they
write into the lab's API server (tests/lab/cloud/apiserver.py):

- the CephCluster, Ready, with the cluster's fsid at status.ceph.fsid (ClusterStatus.CephStatus),
  and the ConfigMap rook-ceph-mon-endpoints with Rook's keys (mon/mon.go,
  persistExpectedMonDaemonsInConfigMap): `data` as `a=<ip>:6789,...` (flattenMonEndpoints, the
  msgr1 port unless msgr2 is required), `mapping` ({"node": {mon: {Name, Hostname, Address}}}),
  `maxMonId`, `outOfQuorum`, `externalMons` and ceph-csi's `csi-cluster-config-json`;
- per CephBlockPool (pool/controller.go createPool, client/pool.go createReplicatedPoolForApp):
  Rook's validation (pool/validate.go), a CRUSH rule named after the pool over the failure domain,
  `ceph osd pool create <pool> 0 replicated <rule> --size <n>`, the application `rbd`, `rbd pool
  init`, then status.phase Ready with the pool's id;
- per CephClient (client/controller.go): Rook's validation (reserved names, caps), the Ceph name
  spec.name (else metadata.name), `ceph auth get-key`, then `auth caps` if it exists or `auth
  get-or-create-key` with exactly spec.caps, the Secret `rook-ceph-client-<metadata.name>` (unless
  spec.secretName) of type kubernetes.io/rook, annotated cephx-keyring, owned by the CephClient,
  with the keys `<Ceph name>`, `userID` (metadata.name, as Rook writes it) and `userKey`, then
  status.phase Ready with info.secretName.

Where it differs from Rook, and why:
- the cluster has one OSD (the lab's Ceph), so a pool's size is at most 1: a larger size would
  leave every placement group without enough OSDs and no write would complete. The failure domain
  is kept (the CRUSH rule spreads over it; one host holds the one OSD). `reduced` says what was
  reduced, and the report of the test says so;
- Ceph is Debian 12's 16 (Pacific); Rook v1.20 runs Reef or later. The commands used here are
  the same in both;
- Rook reconciles again on every change and retries failures; this runs once. A validation Rook
  refuses sets status.phase Failure (as Rook's) and raises RookRefusalError.
"""

from __future__ import annotations

import json
import re
import subprocess
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from tests.lab.cloud.apiserver import LabApiServer
from tests.lab.cloud.ceph import CephStandIn

Manifest = dict[str, Any]
GROUP = "ceph.rook.io"
API_VERSION = f"{GROUP}/v1"
MON_ENDPOINTS = "rook-ceph-mon-endpoints"  # mon.EndpointConfigMapName
MSGR1_PORT = 6789  # mon.DefaultMsgr1Port: the endpoint's port unless the cluster requires msgr2
SECRET_TYPE = "kubernetes.io/rook"  # k8sutil.RookType
KEYRING_ANNOTATION = "cephx-keyring"  # keyring.KeyringAnnotation
DISASTER_PROTECTION = f"{GROUP}/disaster-protection"  # the ConfigMap's finalizer
# client/controller.go ValidateClient: names Rook keeps for its own daemons.
RESERVED_CLIENT = re.compile(
    r"^admin$|^rgw.*$|^rbd-mirror$|^osd.[0-9]*$|^bootstrap-(mds|mgr|mon|osd|rgw|rbd-mirror)$|^rbd-mirror-peer$"
)
CRUSH_ROOT = "default"  # cephv1.DefaultCRUSHRoot
TIMEOUT = 120.0


class RookRefusalError(RuntimeError):
    """What Rook's validation refuses: the object's status is Failure, as Rook sets it."""


@dataclass
class RookStandIn:
    ceph: CephStandIn  # the real cluster, running
    api: LabApiServer
    namespace: str  # the CephCluster's, where Rook keeps its objects
    cluster: str  # the CephCluster's name
    log: Callable[[str], None] = print
    reduced: dict[str, str] = field(default_factory=dict)  # object → what differs from its spec, and why
    cluster_uid: str = field(default_factory=lambda: str(uuid.uuid4()))

    def install(self) -> None:
        """Rook's CRDs (its chart installs them), the CephCluster Ready and the monitors' ConfigMap."""
        for resource in ("cephclusters", "cephblockpools", "cephclients"):
            self.api.install_crd(GROUP, resource)
        fsid = self._ceph_json("fsid")["fsid"]
        self.api.put_object(GROUP, "cephclusters", {
            "apiVersion": API_VERSION, "kind": "CephCluster",
            "metadata": {"name": self.cluster, "namespace": self.namespace, "uid": self.cluster_uid, "generation": 1},
            "spec": {"dataDirHostPath": "/var/lib/rook", "mon": {"count": 1}},
            "status": {"phase": "Ready", "state": "Created", "message": "Cluster created successfully",
                       "ceph": {"health": "HEALTH_OK", "fsid": fsid}},
        })  # fmt: skip
        self.api.put_object("", "configmaps", self.mon_endpoints())

    def mon_endpoints(self) -> Manifest:
        """rook-ceph-mon-endpoints as Rook writes it, from the cluster's monmap."""
        mons = {m["name"]: self._msgr1_address(m) for m in self._ceph_json("mon", "dump")["mons"]}
        ids = [ord(name) - ord("a") for name in mons if len(name) == 1 and name.isalpha()]  # Rook's names: a, b, ...
        ip = {name: endpoint.rsplit(":", 1)[0].strip("[]") for name, endpoint in mons.items()}
        # The node each monitor runs on: here the Ceph host (its network namespace names it).
        mapping = {"node": {name: {"Name": self.ceph.netns, "Hostname": self.ceph.netns, "Address": ip[name]}
                            for name in mons}}  # fmt: skip
        csi = [{"clusterID": self.namespace, "monitors": list(mons.values()), "namespace": self.namespace}]
        return {
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": MON_ENDPOINTS, "namespace": self.namespace, "finalizers": [DISASTER_PROTECTION],
                         "ownerReferences": [self._owner("CephCluster", self.cluster, self.cluster_uid)]},
            "data": {
                "data": ",".join(f"{name}={endpoint}" for name, endpoint in mons.items()),
                "externalMons": "",
                "maxMonId": str(max(ids, default=0)),
                "mapping": json.dumps(mapping, separators=(",", ":")),
                "outOfQuorum": "",
                "csi-cluster-config-json": json.dumps(csi, separators=(",", ":")),
            },
        }  # fmt: skip

    @staticmethod
    def _msgr1_address(mon: Manifest) -> str:
        """The monitor's msgr1 address (ip:6789), as Rook's MonInfo.Endpoint has it."""
        for entry in mon["public_addrs"]["addrvec"]:
            address = entry["addr"].split("/", 1)[0]  # Ceph appends a nonce: 127.0.0.1:6789/0
            if entry["type"] == "v1" and address.endswith(f":{MSGR1_PORT}"):
                return address
        raise RookRefusalError(f"monitor {mon['name']} has no msgr1 address: {mon['public_addrs']}")

    # -- the controllers ---------------------------------------------------------------------------

    def reconcile(self, manifests: Iterable[Manifest]) -> None:
        """The plan's CephBlockPools and CephClients, as Pulumi creates them and Rook reconciles them."""
        for manifest in manifests:
            if manifest["metadata"].get("namespace") != self.namespace:
                continue  # Rook's controllers act on a CephCluster's namespace only
            resource = {"CephBlockPool": "cephblockpools", "CephClient": "cephclients"}[manifest["kind"]]
            stored = {**manifest, "metadata": {**manifest["metadata"], "uid": str(uuid.uuid4()), "generation": 1}}
            self.api.put_object(GROUP, resource, stored)
            try:
                status = self.pool(stored) if resource == "cephblockpools" else self.client(stored)
            except RookRefusalError:
                self._status(resource, stored, {"phase": "Failure"})
                raise
            self._status(resource, stored, {"phase": "Ready", "observedGeneration": 1, **status})

    def pool(self, pool: Manifest) -> Manifest:
        name, spec = pool["metadata"]["name"], pool["spec"]
        replicated = spec.get("replicated") or {}
        size = int(replicated.get("size") or 0)
        failure_domain = spec.get("failureDomain") or "host"  # cephv1.DefaultFailureDomain
        # pool/validate.go: a replicated pool of a known failure domain; size 1 only without requireSafeReplicaSize.
        if size < 1:
            raise RookRefusalError(f"CephBlockPool {name}: only replicated pools are reproduced here")
        types = {t["name"] for t in self._ceph_json("osd", "crush", "dump")["types"]}
        if failure_domain not in types:
            raise RookRefusalError(f"CephBlockPool {name}: unrecognized failure domain {failure_domain}")
        if size == 1 and replicated.get("requireSafeReplicaSize"):
            raise RookRefusalError(f"CephBlockPool {name}: error pool size is 1 and requireSafeReplicaSize is true")
        osds = int(self._ceph_json("osd", "stat")["num_osds"])
        if size > osds:
            self.reduced[f"CephBlockPool {name}"] = (
                f"size {size} → {osds}: the cluster has {osds} OSD(s), and a placement group without "
                f"{size} OSDs completes no write (failure domain {failure_domain} kept)"
            )
            size = osds
        if not self._pool_exists(name):
            self._ceph("osd", "crush", "rule", "create-replicated", name, CRUSH_ROOT, failure_domain)
            self._ceph("osd", "pool", "create", name, "0", "replicated", name, "--size", str(size))
        elif int(self._ceph_json("osd", "pool", "get", name, "size")["size"]) != size:
            self._ceph("osd", "pool", "set", name, "size", str(size), "--yes-i-really-mean-it")
        # client/pool.go givePoolAppTag, then pool/controller.go createPool's `rbd pool init`.
        if "rbd" not in self._ceph_json("osd", "pool", "application", "get", name):
            self._ceph("osd", "pool", "application", "enable", name, "rbd", "--yes-i-really-mean-it")
        self._run(self.ceph.rbd_command("pool", "init", name))
        pool_id = int(self._ceph_json("osd", "pool", "get", name, "size")["pool_id"])
        return {"poolID": pool_id}

    def client(self, client: Manifest) -> Manifest:
        metadata, spec = client["metadata"], client["spec"]
        ceph_name = spec.get("name") or metadata["name"]  # getClientName
        if RESERVED_CLIENT.match(ceph_name):
            raise RookRefusalError(f"CephClient {metadata['name']}: ignoring reserved name {ceph_name!r}")
        caps = spec.get("caps") or {}
        if not caps or not all(caps.values()):
            raise RookRefusalError(f"CephClient {metadata['name']}: no caps specified")
        entity = f"client.{ceph_name}"
        cap_args = [word for kind, cap in caps.items() for word in (kind, cap)]  # genClientEntity
        if self._run(self.ceph.ceph_command("auth", "get-key", entity), check=False).returncode == 0:
            self._ceph("auth", "caps", entity, *cap_args)  # AuthUpdateCaps: an existing client gets the spec's caps
        else:
            self._ceph("auth", "get-or-create-key", entity, *cap_args)
        key = self._ceph_json("auth", "get-key", entity)["key"]
        secret_name = spec.get("secretName") or f"rook-ceph-client-{metadata['name']}"  # generateCephUserSecretName
        self.api.add_secret(self.namespace, {
            "apiVersion": "v1", "kind": "Secret", "type": SECRET_TYPE,
            "metadata": {"name": secret_name, "namespace": self.namespace, "annotations": {KEYRING_ANNOTATION: ""},
                         "ownerReferences": [self._owner("CephClient", metadata["name"], metadata["uid"])]},
            "stringData": {ceph_name: key, "userID": metadata["name"], "userKey": key},
        })  # fmt: skip
        return {"info": {"secretName": secret_name}}

    # -- helpers -----------------------------------------------------------------------------------

    def _status(self, resource: str, manifest: Manifest, status: Manifest) -> None:
        self.api.put_object(GROUP, resource, {**manifest, "status": status})

    @staticmethod
    def _owner(kind: str, name: str, uid: str) -> Manifest:
        return {"apiVersion": API_VERSION, "kind": kind, "name": name, "uid": uid, "controller": True,
                "blockOwnerDeletion": True}  # fmt: skip

    def _pool_exists(self, name: str) -> bool:
        return name in self._ceph_json("osd", "pool", "ls")

    def _run(self, command: list[str], check: bool = True) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(command, capture_output=True, text=True, timeout=TIMEOUT)
        if check and done.returncode != 0:
            raise RuntimeError(f"`{' '.join(command)}` exited {done.returncode}: {done.stderr.strip()[-1000:]}")
        return done

    def _ceph(self, *args: str) -> str:
        return self._run(self.ceph.ceph_command(*args)).stdout

    def _ceph_json(self, *args: str) -> Any:
        return json.loads(self._ceph(*args, "-f", "json"))
