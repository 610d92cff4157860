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

from components.ceph_settings import KEYRING_KEY, Ceph, CephClient
from components.inifile import render_ini
from components.settings import Settings
from components.workload import Manifest, Mount, env

CONFIG_DIR = "/etc/ceph"
CONF = f"{CONFIG_DIR}/ceph.conf"
CONF_FILE = "ceph.conf"
# A service's rendered ceph.conf, mounted where librados reads it by default.
CONF_MOUNT = f"{CONF_FILE}={CONF}"


def conf(ceph: Ceph) -> str:
    """The client side of ceph.conf: which cluster, and where its monitors are."""
    assert ceph.external is not None  # Ceph._one_mode
    return render_ini({"global": {"fsid": ceph.external.fsid, "mon_host": ",".join(ceph.external.monitors)}})


def conf_files(settings: Settings) -> dict[str, str]:
    """The rendered ceph.conf of a service, when the stack has a Ceph cluster."""
    return {CONF_FILE: conf(settings.ceph)} if settings.ceph is not None else {}


def keyring_path(client: CephClient) -> str:
    return f"{CONFIG_DIR}/ceph.client.{client.user}.keyring"


def _volume_name(client: CephClient) -> str:
    # A DNS label: the user's name, lower case, its '.' and '_' as '-'.
    return "ceph-" + re.sub(r"[^a-z0-9-]", "-", client.user.lower())[:58].strip("-")


def distinct(clients: Iterable[CephClient]) -> tuple[CephClient, ...]:
    """Each client once, in order (Nova's client is Cinder's unless the stack names another)."""
    return tuple({client.user: client for client in clients}.values())


def keyrings(clients: Iterable[CephClient]) -> tuple[tuple[Manifest, ...], tuple[Mount, ...]]:
    """The volumes and mounts of these clients' keyring Secrets (each once), read-only for root and
    the pod's group, which is the service's own user in restricted pods."""
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
    return volumes, mounts


def libvirt_clients_env(ceph: Ceph, clients: Iterable[CephClient]) -> tuple[Manifest, ...]:
    """What libvirt_start.sh defines the secrets from: 'uuid=client.user=keyring path' per client."""
    entries = (f"{ceph.libvirt_secret_uuid(c)}=client.{c.user}={keyring_path(c)}" for c in distinct(clients))
    return (env("LIBVIRT_CEPH_CLIENTS", " ".join(entries)),)
