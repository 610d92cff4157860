"""`ceph`: the Ceph cluster that holds images, volumes, VM disks and backups as RBD images.

An external cluster is named by its monitors and fsid; the pools and the cephx clients are
kolla-ansible's (group_vars/all/ceph.yml: pools images, volumes, vms, backups; clients glance,
cinder, cinder-backup, and nova using cinder's). The user creates each client's key on the
cluster and gives it to the stack as a Secret of its namespace, whose key `keyring` holds the
keyring file `ceph auth get client.<user>` prints: the program names the Secrets and mounts them
into the pods that use that client, and never reads a key. A cluster that Rook runs (`rook`) is
named by its CephCluster; the program declares the pools and clients there and a Job copies their
keys into the same Secrets (components/infrastructure/rook.py).
"""

from __future__ import annotations

import re
import uuid
from typing import Annotated

from pydantic import AfterValidator, Field, model_validator

from components.settings.base import Model
from components.settings.value_types import Count, DnsLabel, DnsSubdomain, Text

# The key of a keyring Secret that holds the keyring file.
KEYRING_KEY = "keyring"
_PORT = r"([1-9][0-9]{0,4})"
_HOST = (
    r"([A-Za-z0-9]([-A-Za-z0-9]{0,61}[A-Za-z0-9])?(\.[A-Za-z0-9]([-A-Za-z0-9]{0,61}[A-Za-z0-9])?)*|\[[0-9A-Fa-f:.]+\])"
)
# A monitor as ceph.conf's mon_host takes it: a host (the default ports), a host and port, or a
# messenger address vector such as [v2:10.0.0.1:3300,v1:10.0.0.1:6789].
_MONITOR = re.compile(rf"{_HOST}(:{_PORT})?|\[v[12]:{_HOST}:{_PORT}(,v[12]:{_HOST}:{_PORT})*\]")
# kolla-ansible names a keyring file <cluster>.client.<user>.keyring and the libvirt secret after
# the user; so user and pool names stay to what a file name, an INI value and a shell word take.
_CEPH_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
# The namespace of the libvirt secret UUIDs derived from the cluster's fsid and a client's name.
LIBVIRT_SECRET_NAMESPACE = uuid.UUID("6f0c5d2e-8a43-5b4e-9f1d-3c7a2b8e4d10")


def _monitor(value: str) -> str:
    if not _MONITOR.fullmatch(value):
        raise ValueError(
            "must be a monitor address as ceph.conf's mon_host takes it: a host name or IP address with an "
            "optional port ('10.0.0.1', '10.0.0.1:6789', '[fd00::1]:3300'), or an address vector such as "
            "'[v2:10.0.0.1:3300,v1:10.0.0.1:6789]'"
        )
    ports = [int(port) for port in re.findall(r":([0-9]+)(?=[,\]]|$)", value)]
    if any(port > 65535 for port in ports):
        raise ValueError("a monitor's port is 1 to 65535 (Ceph's are 3300 for msgr2 and 6789 for msgr1)")
    return value


def _user(value: str) -> str:
    if value.startswith("client."):
        raise ValueError(
            f"the client's name without its type: {value.removeprefix('client.')!r} "
            "(the program writes client.<user> where Ceph wants the type, as kolla-ansible does)"
        )
    return value


def _ceph_name(value: str) -> str:
    if not _CEPH_NAME.fullmatch(value):
        raise ValueError(
            "must be a Ceph pool or client name: 1-64 of a-z A-Z 0-9 _ . -, starting with a letter or digit"
        )
    return value


def _uuid(value: str) -> str:
    if not _UUID.fullmatch(value):
        raise ValueError("must be a UUID in lower case, such as '457eb676-33da-42ec-9a8c-9293d545c337'")
    return value


# The client names Rook's operator refuses for a CephClient (v1.20.6, pkg/operator/ceph/client/controller.go,
# ValidateClient: its own daemons' names), as it writes them ('.' unescaped included).
ROOK_RESERVED_CLIENTS = re.compile(
    r"^admin$|^rgw.*$|^rbd-mirror$|^osd.[0-9]*$|^bootstrap-(mds|mgr|mon|osd|rgw|rbd-mirror)$|^rbd-mirror-peer$"
)

CephMonitor = Annotated[Text, AfterValidator(_monitor)]
CephName = Annotated[Text, AfterValidator(_ceph_name)]
Uuid = Annotated[Text, AfterValidator(_uuid)]


class ExternalCeph(Model):
    """A Ceph cluster run apart from this stack: its monitors and fsid."""

    fsid: Uuid = Field(description="the cluster's fsid (`ceph fsid`)")
    monitors: tuple[CephMonitor, ...] = Field(min_length=1, description="the monitors' addresses (`ceph mon dump`)")


class CephPools(Model):
    """The RBD pools, created on the cluster by its administrator (`rbd pool init`)."""

    images: CephName = Field("images", description="Glance's images")
    volumes: CephName = Field("volumes", description="Cinder's volumes")
    vms: CephName = Field("vms", description="Nova's ephemeral disks")
    backups: CephName = Field("backups", description="cinder-backup's backups")

    @model_validator(mode="after")
    def _one_use_each(self) -> CephPools:
        # Each client's caps name its pools (README, Ceph): a pool of two uses gives a client the
        # other use's data, e.g. images on the volumes pool lets glance write every volume.
        uses: dict[str, list[str]] = {}
        for use in type(self).model_fields:
            uses.setdefault(getattr(self, use), []).append(use)
        shared = {pool: names for pool, names in uses.items() if len(names) > 1}
        if shared:
            pool, names = next(iter(shared.items()))
            raise ValueError(
                f"pool {pool!r} is given to {' and '.join(names)}: each use needs a pool of its own, since a client's "
                "caps are per pool (one pool would give each use's client the other's data)"
            )
        return self


class CephClient(Model):
    """A cephx client and the Secret (in the stack's namespace) whose key `keyring` holds its keyring."""

    user: Annotated[CephName, AfterValidator(_user)] = Field(
        description="the client's name without 'client.', e.g. glance"
    )
    keyring_secret: DnsSubdomain = Field(description="the Secret whose key 'keyring' holds client.<user>'s keyring")
    libvirt_secret_uuid: Uuid | None = Field(
        None,
        description="nova and cinder only: the UUID of the libvirt secret that holds this client's key on the "
        "compute nodes (kolla-ansible's rbd_secret_uuid, cinder_rbd_secret_uuid); unset, derived from the fsid and "
        "the user, so one client has one secret",
    )


class CephClients(Model):
    glance: CephClient = CephClient(user="glance", keyring_secret="ceph-client-glance")
    cinder: CephClient = CephClient(user="cinder", keyring_secret="ceph-client-cinder")
    cinder_backup: CephClient = CephClient(user="cinder-backup", keyring_secret="ceph-client-cinder-backup")
    nova: CephClient | None = Field(
        None, description="Nova's ephemeral disks; unset: cinder's client (kolla-ansible's ceph_nova_user)"
    )

    @model_validator(mode="after")
    def _secret_uuids(self) -> CephClients:
        for name in ("glance", "cinder_backup"):
            if getattr(self, name).libvirt_secret_uuid is not None:
                raise ValueError(
                    f"{name}: libvirtSecretUuid is for the clients whose key libvirt uses (cinder, nova); "
                    f"QEMU never opens a disk as {getattr(self, name).user}"
                )
        nova, cinder = self.nova, self.cinder
        if (
            nova is not None
            and nova.user != cinder.user
            and nova.libvirt_secret_uuid is not None
            and nova.libvirt_secret_uuid == cinder.libvirt_secret_uuid
        ):
            # libvirt keeps one key per secret: the second client's definition would replace the first's.
            raise ValueError(
                f"nova and cinder are two Ceph users ({nova.user}, {cinder.user}) with one libvirtSecretUuid: "
                "libvirt holds one key per secret, so give each its own (or leave both unset: derived per user)"
            )
        return self

    @property
    def nova_client(self) -> CephClient:
        return self.nova or self.cinder


class RookCluster(Model):
    """The CephCluster that Rook runs: the pools and clients are declared in its namespace."""

    name: DnsSubdomain = Field(description="the CephCluster's name (kubectl get cephcluster -A)")
    namespace: DnsLabel = Field("rook-ceph", description="its namespace, where Rook keeps its pools and clients")


# Why the program names a CephCluster and never declares one (the settings error says so).
NO_CLUSTER_OF_ITS_OWN = (
    "the program declares no CephCluster: a CephCluster is the Kubernetes cluster's storage (which disks of which "
    "nodes, how many monitors, which networks), decided once for every user of the cluster and kept apart from any "
    "one OpenStack stack, whose deletion must not take it along (e.g. Rook's rook-ceph-cluster chart)"
)


class Rook(Model):
    """A Ceph cluster that Rook runs in this Kubernetes cluster (components/infrastructure/rook.py).

    The program declares the pools (CephBlockPool) and cephx clients (CephClient) in the
    cluster's namespace; Rook creates them and writes each client's key into a Secret there,
    which the ceph-rook-keys Job copies into ceph.clients' Secrets of the stack's namespace.
    """

    cluster: RookCluster | None = Field(None, description="the CephCluster (name, namespace) to use")
    replicas: Count = Field(3, ge=1, le=10, description="copies of each pool's data (CephBlockPool replicated.size)")
    failure_domain: CephName = Field("host", description="where copies must differ (CephBlockPool failureDomain)")

    @model_validator(mode="after")
    def _names_a_cluster(self) -> Rook:
        if self.cluster is None:
            raise ValueError(
                f"needs cluster: the name and namespace of the CephCluster Rook runs; {NO_CLUSTER_OF_ITS_OWN}"
            )
        return self


class Ceph(Model):
    """The Ceph connection: `external` (a cluster run apart from this stack) or `rook` (one that
    Rook runs in this Kubernetes cluster)."""

    external: ExternalCeph | None = None
    rook: Rook | None = None
    pools: CephPools = CephPools()
    clients: CephClients = CephClients()

    @model_validator(mode="after")
    def _one_mode(self) -> Ceph:
        if self.external is not None and self.rook is not None:
            raise ValueError("give external or rook, not both: one cluster holds the stack's data")
        if self.external is None and self.rook is None:
            raise ValueError(
                "needs external (the cluster's monitors and fsid) or rook (the CephCluster that Rook runs here)"
            )
        return self

    @property
    def fsid(self) -> str:
        """An external cluster's fsid (a Rook cluster's is known once it runs: the keys Job reads it)."""
        assert self.external is not None, "a Rook cluster's fsid is not in the settings"
        return self.external.fsid

    def _identity(self) -> str:
        """What names the cluster in the settings, the same on every run: the fsid, or the CephCluster."""
        if self.rook is not None:
            assert self.rook.cluster is not None  # Rook._names_a_cluster
            return f"rook:{self.rook.cluster.namespace}/{self.rook.cluster.name}"
        return self.fsid

    def libvirt_secret_uuid(self, client: CephClient) -> str:
        """The UUID of the libvirt secret that holds a client's key: the setting, or one derived from
        the fsid (a Rook cluster: its CephCluster's namespace and name) and the user, the same on
        every node and every run."""
        if client.libvirt_secret_uuid:
            return client.libvirt_secret_uuid
        return str(uuid.uuid5(LIBVIRT_SECRET_NAMESPACE, f"{self._identity()}/client.{client.user}"))
