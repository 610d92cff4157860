"""`ceph`: the Ceph cluster that holds images, volumes, VM disks and backups as RBD images.

An external cluster is named by its monitors and fsid; the pools and the cephx clients are
kolla-ansible's (group_vars/all/ceph.yml: pools images, volumes, vms, backups; clients glance,
cinder, cinder-backup, and nova using cinder's). The user creates each client's key on the
cluster and gives it to the stack as a Secret of its namespace, whose key `keyring` holds the
keyring file `ceph auth get client.<user>` prints: the program names the Secrets and mounts them
into the pods that use that client, and never reads a key.
"""

from __future__ import annotations

import re
import uuid
from typing import Annotated, Any

from pydantic import AfterValidator, Field, model_validator

from components.setting_model import Model
from components.setting_types import DnsSubdomain, Text

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


class CephClient(Model):
    """A cephx client and the Secret (in the stack's namespace) whose key `keyring` holds its keyring."""

    user: CephName = Field(description="the client's name without 'client.', e.g. glance")
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
        return self

    @property
    def nova_client(self) -> CephClient:
        return self.nova or self.cinder


class Ceph(Model):
    """The Ceph connection: `external` (a cluster run apart from this stack)."""

    external: ExternalCeph | None = None
    rook: dict[Text, Any] | None = Field(None, description="not supported yet: give a Rook cluster as external")
    pools: CephPools = CephPools()
    clients: CephClients = CephClients()

    @model_validator(mode="after")
    def _one_mode(self) -> Ceph:
        if self.rook is not None:
            raise ValueError(
                "rook is not supported yet: the program does not declare Rook's CephCluster, pools or clients; "
                "give a Rook cluster as external (its monitors, fsid and the keyrings of clients you create)"
            )
        if self.external is None:
            raise ValueError("needs external: the cluster's monitors and fsid")
        return self

    @property
    def fsid(self) -> str:
        assert self.external is not None  # _one_mode
        return self.external.fsid

    def libvirt_secret_uuid(self, client: CephClient) -> str:
        """The UUID of the libvirt secret that holds a client's key: the setting, or one derived from
        the fsid and the user, the same on every node and every run."""
        if client.libvirt_secret_uuid:
            return client.libvirt_secret_uuid
        return str(uuid.uuid5(LIBVIRT_SECRET_NAMESPACE, f"{self.fsid}/client.{client.user}"))
