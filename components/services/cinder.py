"""Cinder: block storage API, scheduler and the volume service on storage nodes.

The default backend, LVM on a loop file exported over iSCSI (LIO), needs no prepared disk,
so it works on a plain cluster; NFS shares and Ceph RBD (`ceph`) are the other choices, and
`cinder.backends` may list several, each its own volume type. With `cinder.backup: ceph`,
cinder-backup writes backups of rbd volumes to the Ceph cluster; with `s3`, to an S3 bucket
(cinder's S3 driver), its keys given to that one container from the user's Secret.

Several backends: kolla-ansible runs one cinder-volume per storage host with every backend in
enabled_backends; here each backend has cinder-volume pods of its own, because their needs
differ: LVM's pod holds the node's LVM, loop devices and iSCSI target (host paths), the rbd
backend's needs none of them and runs on nodes that have no configfs or LVM. cinder.conf lists
every backend (one section each, named as the backend, with its volume_backend_name); each pod
narrows enabled_backends to its own through oslo.config's environment (OS_DEFAULT__ENABLED_BACKENDS),
as its node address options are (the one --config-file rule, node_address_options). A pod names
its service `<node>@<backend>` (host network: the node's name), so two backends' pods on one node
are two services, and a restarted pod is the same one. The rbd backend's pods also join one cluster
(`cinder.cluster`, cinder's active/active), so that any storage node serves every rbd volume: without it a
volume is bound to `<node>@rbd` and cannot be attached, extended or deleted while that node is down.
"""

from __future__ import annotations

from components.infrastructure import ceph
from components.mechanism import oslo
from components.mechanism.api import registered_api_needs, rpc_daemon, uwsgi_file, wsgi_api
from components.mechanism.bootstrap import TOOLBOX, admin_env, db_purge, db_sync
from components.mechanism.inifile import render_ini
from components.mechanism.spec import CatalogEntry, Process, RenderContext, ServiceSpec, Step
from components.mechanism.workload import Manifest, Mount, env, scratch
from components.services.glance import PORT as GLANCE_PORT
from components.settings.model import S3_KEYS, CinderBackend, CinderBackupBucket, Settings
from components.tables.roles import CINDER_BACKUP_POD, NodePod, cinder_volume_pod

CONFIG_DIR = "/etc/cinder"
PORT = 8776
CINDER_CONF = ("cinder.conf",)
CONVERSION_DIR = "/var/lib/cinder/conversion"
# Backends whose driver supports active/active (SUPPORTS_ACTIVE_ACTIVE: cinder's RBDDriver does, LVM and
# the generic NFS driver do not). Their pods join one cluster (cinder.cluster), as kolla-ansible's
# cinder_cluster_name does; kolla sets it for cinder-volume only, since only cinder/cmd/volume.py
# registers the option, and so does this: in the pod's environment, not the shared cinder.conf.
ACTIVE_ACTIVE: frozenset[CinderBackend] = frozenset({"rbd"})
MANAGE = ("cinder-manage", "--config-file", f"{CONFIG_DIR}/cinder.conf")
CELL_NEEDS = ("cinder-db-sync", "cinder-rabbit-init")
# Where cinder-backup finds the CA of its S3 endpoint (cinder.backupS3.caSecret): a directory mount,
# not a subPath one, so the kubelet keeps the file current when the Secret changes.
S3_CA_DIR = f"{CONFIG_DIR}/s3-ca"
S3_CA_FILE = f"{S3_CA_DIR}/ca.crt"


def _rbd_backend(settings: Settings) -> dict[str, object]:
    """kolla-ansible's RBD backend section (cinder.conf.j2): the volumes pool as client cinder.

    rbd_secret_uuid goes to Nova in each volume's connection info: the libvirt secret that QEMU
    opens the volume with on the compute nodes (components/infrastructure/ceph.py). librados finds the keyring
    at its default path, where the Secret is mounted, so rbd_keyring_conf is not set.
    """
    assert settings.ceph is not None  # settings refuse backend rbd without a cluster
    client = settings.ceph.clients.cinder
    return {
        "volume_driver": "cinder.volume.drivers.rbd.RBDDriver",
        "volume_backend_name": "rbd",
        "rbd_pool": settings.ceph.pools.volumes,
        "rbd_ceph_conf": ceph.CONF,
        "rbd_user": client.user,
        "rbd_secret_uuid": settings.ceph.libvirt_secret_uuid(client),
        "rados_connect_timeout": 5,
        "report_discard_supported": True,
    }


def _backup(settings: Settings) -> dict[str, object]:
    """kolla-ansible's options for cinder-backup's Ceph driver (cinder.conf.j2, backup_driver ceph)."""
    if settings.cinder.backup != "ceph" or settings.ceph is None:
        return {}
    return {
        "backup_driver": "cinder.backup.drivers.ceph.CephBackupDriver",
        "backup_ceph_conf": ceph.CONF,
        "backup_ceph_user": settings.ceph.clients.cinder_backup.user,
        "backup_ceph_chunk_size": 134217728,
        "backup_ceph_pool": settings.ceph.pools.backups,
        "backup_ceph_stripe_unit": 0,
        "backup_ceph_stripe_count": 0,
        "restore_discard_excess_bytes": True,
    }


def _s3_backup(settings: Settings) -> dict[str, object]:
    """cinder's S3 backup driver (cinder/backup/drivers/s3.py) as kolla-ansible sets it (cinder.conf.j2,
    cinder_backup_driver s3), without the keys: kolla-ansible writes backup_s3_store_access_key and
    backup_s3_store_secret_key into cinder.conf; here they are the user's Secret's and reach the
    cinder-backup container only, as oslo.config environment options (s3_key_env), so neither the
    rendered config Secret nor any other pod holds them. backup_s3_verify_ssl keeps its default (True);
    without caSecret boto3 verifies against the CAs botocore ships (cinder logs that no cert file is set).
    """
    s3 = settings.cinder.backup_s3
    if settings.cinder.backup != "s3" or s3 is None:
        return {}
    return {
        "backup_driver": "cinder.backup.drivers.s3.S3BackupDriver",
        "backup_s3_endpoint_url": f"{'https' if s3.tls else 'http'}://{s3.endpoint}",
        "backup_s3_store_bucket": s3.bucket,
        **({"backup_s3_ca_cert_file": S3_CA_FILE} if s3.ca_secret is not None else {}),
    }


def s3_key_env(s3: CinderBackupBucket) -> tuple[Manifest, ...]:
    """The S3 driver's key options from the user's Secret (secretKeyRef), and the region, which the
    driver has no option for, as boto3 reads it (AWS_DEFAULT_REGION; unset: us-east-1)."""
    access, secret = S3_KEYS
    region = (env("AWS_DEFAULT_REGION", s3.region),) if s3.region else ()
    return (
        oslo.option_secret_env("DEFAULT", "backup_s3_store_access_key", s3.credentials, access),
        oslo.option_secret_env("DEFAULT", "backup_s3_store_secret_key", s3.credentials, secret),
        *region,
    )


def _s3_ca(s3: CinderBackupBucket) -> tuple[tuple[Manifest, ...], tuple[Mount, ...]]:
    """The Secret whose ca.crt verifies the endpoint, mounted where backup_s3_ca_cert_file names it."""
    if s3.ca_secret is None:
        return (), ()
    volume = {"name": "s3-ca", "secret": {"secretName": s3.ca_secret, "items": [{"key": "ca.crt", "path": "ca.crt"}]}}
    return (volume,), (Mount("s3-ca", S3_CA_DIR),)


def _backend(settings: Settings, backend: CinderBackend) -> dict[str, object]:
    if backend == "rbd":
        return _rbd_backend(settings)
    if backend == "lvm":
        return {
            "volume_driver": "cinder.volume.drivers.lvm.LVMVolumeDriver",
            "volume_group": "cinder-volumes",
            "target_protocol": "iscsi",
            "target_helper": "lioadm",
            "volume_backend_name": "lvm",
        }
    return {
        "volume_driver": "cinder.volume.drivers.nfs.NfsDriver",
        "nfs_shares_config": f"{CONFIG_DIR}/nfs_shares",
        "nfs_mount_point_base": "/var/lib/cinder/mnt",
        "volume_backend_name": "nfs",
    }


def volume_pods(settings: Settings) -> tuple[tuple[CinderBackend, NodePod], ...]:
    """Each backend with its cinder-volume pod (components/tables/roles.py cinder_volume_pod)."""
    backends = settings.cinder.backends
    return tuple((backend, cinder_volume_pod(backend, first=backend == backends[0])) for backend in backends)


def node_address_options(backend: CinderBackend) -> tuple[tuple[str, str], ...]:
    """cinder-volume's options that name its node's address, which only the pod knows.

    They reach cinder through oslo.config's environment (as nova-compute's do), not a second
    config file: the privsep-helper command cinder has rootwrap run repeats cinder-volume's
    `--config-file` arguments, and cinder's own filters for it (volume.filters) admit one, under
    /etc/ (only oslo.rootwrap's own catch-all for privsep-helper would admit more).
    my_ip is kolla-ansible's per-host value; the LVM backend's iSCSI target listens on
    target_ip_address (by default my_ip), named here for its backend section.
    """
    options = [("DEFAULT", "my_ip")]
    if backend == "lvm":
        options.append((backend, "target_ip_address"))
    return tuple(options)


def render(ctx: RenderContext) -> dict[str, str]:
    settings, secrets = ctx.settings, ctx.secrets
    backends = settings.cinder.backends
    conf = oslo.merge(
        {
            "DEFAULT": {
                **oslo.logging(),
                "auth_strategy": "keystone",
                # Every backend; each cinder-volume pod enables its own only (volume_pods).
                "enabled_backends": ",".join(backends),
                # Created by the cinder-volume-type Job, bound to the backend of this name.
                "default_volume_type": settings.cinder.default_backend,
                "state_path": "/var/lib/cinder",
                "image_conversion_dir": CONVERSION_DIR,
                # Image-backed volumes are copied from Glance's internal endpoint, not the public one.
                "glance_api_servers": oslo.internal_url(settings, "glance-api", GLANCE_PORT)
                if settings.services.on("glance")
                else None,
                **oslo.ca_file(settings, "glance_ca_certificates_file"),
                **_backup(settings),
                **_s3_backup(settings),
            },
            "database": oslo.database(settings, "cinder", secrets["database"], "cinder"),
            "keystone_authtoken": oslo.keystone_authtoken(settings, "cinder", secrets),
            "service_user": oslo.service_user(settings, "cinder", secrets["keystone"]),
            "nova": {**oslo.service_credentials(settings, "cinder", secrets["keystone"]), "interface": "internal"},
            "oslo_concurrency": oslo.lock_path("/var/lib/cinder/tmp"),
            "oslo_middleware": {"enable_proxy_headers_parsing": True},
            **{backend: _backend(settings, backend) for backend in backends},
        },
        oslo.messaging(settings, "cinder", secrets["rabbitmq"]),
    )
    files = {"cinder.conf": render_ini(conf), **uwsgi_file(settings, "cinder-api", "cinder.wsgi.api:application", PORT)}
    if "nfs" in backends:
        files["nfs_shares"] = "\n".join(settings.cinder.nfs_shares) + "\n"
    if "rbd" in backends or settings.cinder.backup == "ceph":
        files.update(ceph.conf_files(settings))
    return files


def housekeeping(settings: Settings) -> tuple[Step, ...]:
    """cinder-db-purge (openstack-helm's cron-job-cinder-db-purge.yaml): `cinder-manage db purge
    <age_in_days>` deletes rows soft-deleted more than that many days ago (cinder/cmd/manage.py)."""
    if not settings.housekeeping.enabled:
        return ()
    purge = settings.housekeeping.cinder_db_purge
    return (
        db_purge("cinder", "cinder-api", (*MANAGE, "db", "purge", str(purge.age_in_days)), CINDER_CONF, purge.schedule),
    )


# cinder-backup names itself after its node (a DaemonSet's pods are renamed on every restart),
# so its service record and the backups it made stay its own across restarts.
NODE_NAME = {"name": "OS_DEFAULT__HOST", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}}


def backup_process(settings: Settings) -> Process | None:
    """cinder-backup on storage nodes (kolla-ansible runs it beside cinder-volume), with cinder's
    keyring for the rbd volumes it reads, and client cinder-backup's for the backups pool or the
    S3 keys and CA for the bucket."""
    backup, s3 = settings.cinder.backup, settings.cinder.backup_s3
    if backup == "none" or settings.ceph is None:  # settings refuse a backup without rbd volumes
        return None
    clients = settings.ceph.clients
    writer = (clients.cinder_backup,) if backup == "ceph" else ()
    volumes, mounts = ceph.keyrings(settings.ceph, (*writer, clients.cinder))
    key_env: tuple[Manifest, ...] = ()
    if backup == "s3" and s3 is not None:  # None only while settings are being checked: they refuse it
        ca_volumes, ca_mounts = _s3_ca(s3)
        volumes, mounts, key_env = (*volumes, *ca_volumes), (*mounts, *ca_mounts), s3_key_env(s3)
    return rpc_daemon(
        "cinder-backup",
        "cinder-backup",
        ("cinder-backup", "--config-file", f"{CONFIG_DIR}/cinder.conf"),
        (*CELL_NEEDS, *ceph.needs(settings)),
        (*CINDER_CONF, *ceph.conf_entries(settings)),
        node_pod=CINDER_BACKUP_POD,
        env=(NODE_NAME, *key_env),
        extra_volumes=volumes,
        extra_mounts=mounts,
    )


def volume_process(settings: Settings, backend: CinderBackend, pod: NodePod) -> Process:
    """cinder-volume for one backend, in that backend's pod, enabling only that backend."""
    files: tuple[str, ...] = ("cinder.conf", "nfs_shares") if backend == "nfs" else CINDER_CONF
    on_rbd = backend == "rbd" and settings.ceph is not None
    if on_rbd:
        files += ceph.conf_entries(settings)
    keyring_volumes, keyring_mounts = ceph.keyrings(
        settings.ceph, (settings.ceph.clients.cinder,) if on_rbd and settings.ceph is not None else ()
    )
    # Images are downloaded and converted here before they are written to a volume (image_conversion_dir,
    # $state_path/conversion): a volume of its own, also over lvm's host directory /var/lib/cinder.
    conversion_volume, conversion_mount = scratch("cinder-conversion", settings.cinder.conversion_size, CONVERSION_DIR)
    return rpc_daemon(
        "cinder-volume",
        "cinder-volume",
        ("bash", "/scripts/cinder_volume_start.sh"),
        (*CELL_NEEDS, *(ceph.needs(settings) if on_rbd else ())),
        files,
        scripts=("cinder_volume_start.sh",),
        node_pod=pod,
        workload_name=pod.name,
        env=(
            env("CINDER_BACKEND", backend),
            env("LVM_SIZE", settings.cinder.lvm_size.replace("i", "")),
            *oslo.node_address_env(*node_address_options(backend)),
            # oslo.config's environment comes before the file: this pod runs its backend only.
            *((env("OS_DEFAULT__ENABLED_BACKENDS", backend),) if len(settings.cinder.backends) > 1 else ()),
            *((env("OS_DEFAULT__CLUSTER", settings.cinder.cluster),) if backend in ACTIVE_ACTIVE else ()),
        ),
        extra_volumes=(*keyring_volumes, conversion_volume),
        extra_mounts=(*keyring_mounts, conversion_mount),
    )


def volume_types(settings: Settings) -> str:
    """The cinder-volume-type Job's VOLUME_TYPES: 'type=volume_backend_name' for each backend,
    the type named as its backend (default_volume_type is the first's)."""
    return " ".join(f"{backend}={backend}" for backend in settings.cinder.backends)


def cinder(settings: Settings) -> ServiceSpec:
    backup = backup_process(settings)
    return ServiceSpec(
        name="cinder",
        config_dir=CONFIG_DIR,
        render=render,
        messaging=True,
        catalog=(CatalogEntry("volumev3", "cinderv3", "cinder-api", PORT, path="/v3/%(project_id)s"),),
        steps=(
            db_sync(
                "cinder",
                "cinder-api",
                (*MANAGE, "db", "sync"),
                CINDER_CONF,
            ),
            # default_volume_type must exist before the first volume is asked for without a type.
            Step(
                name="cinder-volume-type",
                image=TOOLBOX,
                command=("python3", "/scripts/cinder_volume_type.py"),
                needs=("cinder-api",),
                scripts=("cinder_volume_type.py",),
                env=(*admin_env(settings), env("VOLUME_TYPES", volume_types(settings))),
            ),
            *housekeeping(settings),
        ),
        processes=(
            wsgi_api(
                "cinder-api",
                "cinder-api",
                CONFIG_DIR,
                PORT,
                needs=(*registered_api_needs("cinder"), "cinder-rabbit-init"),
                config_files=CINDER_CONF,
            ),
            rpc_daemon(
                "cinder-scheduler",
                "cinder-scheduler",
                ("cinder-scheduler", "--config-file", f"{CONFIG_DIR}/cinder.conf"),
                CELL_NEEDS,
                CINDER_CONF,
            ),
            *(volume_process(settings, backend, pod) for backend, pod in volume_pods(settings)),
            *((backup,) if backup else ()),
        ),
    )
