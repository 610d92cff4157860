"""What the pods that use Ceph get: ceph.conf, their clients' keyrings and the libvirt secrets.

ceph.conf names the cluster (fsid, monitors) and holds no key, so it is one more rendered file
of each service that uses Ceph. Each client's keyring stays in the Secret the user created
(`ceph.clients.<client>.keyringSecret`, key `keyring`) and is mounted, as kolla-ansible copies
it, at /etc/ceph/ceph.client.<user>.keyring, where librados looks for it by default, into the
containers that use that client only:

    glance-api      glance                 (rbd_store_user)
    cinder-volume   cinder                 (rbd_user)
    cinder-backup   cinder-backup, cinder  (backup_ceph_user; the volumes it reads: kolla-ansible)
    nova-compute    nova (cinder's unless set), cinder  (images_rbd_*, and rbd volumes it attaches)
    libvirt         the same, to define the libvirt secrets QEMU opens the disks with

QEMU authenticates to Ceph with a libvirt secret, not a file: libvirt_start.sh defines one per
client from its keyring, as kolla-ansible's nova-libvirt does (/etc/libvirt/secrets/<uuid>.xml and
<uuid>.base64, read by libvirtd when it starts), under the UUID nova.conf and cinder.conf name.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from components.mechanism.inifile import render_ini
from components.mechanism.workload import Manifest, Mount, env
from components.settings.ceph import KEYRING_KEY, Ceph, CephClient
from components.settings.model import Settings

CONFIG_DIR = "/etc/ceph"
CONF = f"{CONFIG_DIR}/ceph.conf"
CONF_FILE = "ceph.conf"
# A service's rendered ceph.conf, mounted where librados reads it by default.
CONF_MOUNT = f"{CONF_FILE}={CONF}"


# With ceph.rook, where ceph.conf and the keyrings come from: the Secrets the keys Job fills
# (components/infrastructure/rook.py, which imports this module's consumers' settings only).
ROOK_CONF_SECRET = "ceph-conf"
ROOK_KEYS_JOB = "ceph-rook-keys"


def conf(ceph: Ceph) -> str:
    """The client side of ceph.conf: which cluster, and where its monitors are."""
    assert ceph.external is not None  # a Rook cluster's is written by the keys Job
    return render_ini({"global": {"fsid": ceph.external.fsid, "mon_host": ",".join(ceph.external.monitors)}})


def conf_files(settings: Settings) -> dict[str, str]:
    """The rendered ceph.conf of a service, when the stack has an external Ceph cluster (a Rook
    cluster's monitors are known once it runs: its ceph.conf is the keys Job's Secret)."""
    return {CONF_FILE: conf(settings.ceph)} if settings.ceph is not None and settings.ceph.external else {}


def conf_entries(settings: Settings) -> tuple[str, ...]:
    """The config_files entry of the rendered ceph.conf: an external cluster's only."""
    return (CONF_MOUNT,) if conf_files(settings) else ()


def needs(settings: Settings) -> tuple[str, ...]:
    """What a pod that uses Ceph waits for: with Rook, the Job that writes its keyrings and ceph.conf."""
    return (ROOK_KEYS_JOB,) if settings.ceph is not None and settings.ceph.rook is not None else ()


def keyring_path(client: CephClient) -> str:
    return f"{CONFIG_DIR}/ceph.client.{client.user}.keyring"


def _volume_name(client: CephClient) -> str:
    # A DNS label: the user's name, lower case, its '.' and '_' as '-'.
    return "ceph-" + re.sub(r"[^a-z0-9-]", "-", client.user.lower())[:58].strip("-")


def distinct(clients: Iterable[CephClient]) -> tuple[CephClient, ...]:
    """Each client once, in order (Nova's client is Cinder's unless the stack names another)."""
    return tuple({client.user: client for client in clients}.values())


def keyrings(ceph: Ceph | None, clients: Iterable[CephClient]) -> tuple[tuple[Manifest, ...], tuple[Mount, ...]]:
    """The volumes and mounts of these clients' keyring Secrets (each once), read-only for root and
    the pod's group, which is the service's own user in restricted pods; with Rook, and clients,
    ceph.conf's Secret too (mounted where an external cluster's rendered ceph.conf is)."""
    unique = distinct(clients)
    volumes = tuple(
        {
            "name": _volume_name(client),
            "secret": {
                "secretName": client.keyring_secret,
                "items": [{"key": KEYRING_KEY, "path": KEYRING_KEY}],
                "defaultMode": 0o440,
            },
        }
        for client in unique
    )
    mounts = tuple(Mount(_volume_name(c), keyring_path(c), sub_path=KEYRING_KEY) for c in unique)
    if ceph is not None and ceph.rook is not None and unique:
        conf_volume = {
            "name": "ceph-conf",
            "secret": {"secretName": ROOK_CONF_SECRET, "items": [{"key": CONF_FILE, "path": CONF_FILE}]},
        }
        volumes += (conf_volume,)
        mounts += (Mount("ceph-conf", CONF, sub_path=CONF_FILE),)
    return volumes, mounts


def libvirt_clients_env(ceph: Ceph, clients: Iterable[CephClient]) -> tuple[Manifest, ...]:
    """What libvirt_start.sh defines the secrets from: 'uuid=client.user=keyring path' per client."""
    entries = (f"{ceph.libvirt_secret_uuid(c)}=client.{c.user}={keyring_path(c)}" for c in distinct(clients))
    return (env("LIBVIRT_CEPH_CLIENTS", " ".join(entries)),)
