"""Glance: the image service, storing images on a PersistentVolumeClaim, in Cinder or in Ceph RBD."""

from __future__ import annotations

from typing import Any

from components.infrastructure import ceph
from components.mechanism import oslo
from components.mechanism.api import registered_api_needs, uwsgi_file, wsgi_api
from components.mechanism.bootstrap import db_purge, db_sync
from components.mechanism.inifile import render_ini
from components.mechanism.spec import CatalogEntry, Claim, Process, RenderContext, ServiceSpec, Step
from components.mechanism.workload import Probe, env, scratch
from components.settings import releases
from components.settings.model import Settings
from components.settings.releases import GlanceServer

CONFIG_DIR = "/etc/glance"
PORT = 9292
UPLOAD_TIMEOUT = "6h"  # the gateway's wait for an image upload or download (HTTPRoute timeouts.request)
IMAGES = "/var/lib/glance/images"
# glance_store's two reserved stores: image data staged by import (glance-direct, web-download) and
# the tasks' files, each on a scratch volume of the pod's (glance.scratchSize). Directly under
# /var/lib/glance, which Kolla's image has: the Jobs that read glance-api.conf mount no scratch volume.
STAGING, TASKS = "/var/lib/glance/staging", "/var/lib/glance/tasks"
MANAGE = ("glance-manage", "--config-file", f"{CONFIG_DIR}/glance-api.conf")
# Image data arrives as a chunked body (Nova's snapshots, glanceclient's uploads); kolla-ansible gives
# Glance's uWSGI parts of up to 64 MiB (its glance role's service_uwsgi_config_chunked_input_limit).
CHUNKED_INPUT_LIMIT = 64 * 1024 * 1024
# The metadata definitions glance ships (its etc/metadefs), copied there by Kolla's glance-base image.
METADEFS = f"{CONFIG_DIR}/metadefs"
# Glance's own server (releases.GlanceServer.OWN) forks this many workers, as uWSGI's processes.
OWN_SERVER_WORKERS = 2


def _server(settings: Settings) -> GlanceServer:
    return releases.of(settings.release).glance_server


def _own_server_options(settings: Settings) -> dict[str, Any]:
    """Where Glance's own server listens (glance/common/wsgi.py: bind_host, bind_port, workers)."""
    if _server(settings) is not GlanceServer.OWN:
        return {}
    return {"bind_host": "0.0.0.0", "bind_port": PORT, "workers": OWN_SERVER_WORKERS}


def _rbd_store(settings: Settings) -> dict[str, object]:
    """kolla-ansible's [rbd] store (glance-api.conf.j2): the images pool as client glance."""
    assert settings.ceph is not None  # settings refuse backend rbd without a cluster
    return {
        "rbd_store_pool": settings.ceph.pools.images,
        "rbd_store_user": settings.ceph.clients.glance.user,
        "rbd_store_ceph_conf": ceph.CONF,
    }


def render(ctx: RenderContext) -> dict[str, str]:
    settings, secrets = ctx.settings, ctx.secrets
    backend = settings.glance.backend
    stores: dict[str, dict] = {
        "file": {"filesystem_store_datadir": IMAGES},
        "cinder": {
            "cinder_store_auth_address": oslo.keystone_url(settings) + "/v3",
            **oslo.ca_file(settings, "cinder_ca_certificates_file"),
            "cinder_store_user_name": "glance",
            "cinder_store_password": secrets["keystone"],
            "cinder_store_project_name": oslo.SERVICE_PROJECT,
            "cinder_catalog_info": "volumev3::internalURL",
            "cinder_os_region_name": settings.region,
        },
    }
    if backend == "rbd":
        stores["rbd"] = _rbd_store(settings)
    conf = {
        "DEFAULT": {
            **oslo.logging(),
            "enabled_backends": f"{backend}:{backend}",
            # copy-image copies an image into the other stores; with one store there is none: glance
            # would accept the request and do nothing (a client waiting for the copy waits forever, as
            # Tempest's copy-image test did). Glance's other default methods stay.
            "enabled_import_methods": "[glance-direct,web-download]",
            # Nova's and Cinder's RBD drivers clone a raw image in the same cluster instead of
            # downloading it, and find it by the image's direct URL (rbd://fsid/pool/image/snap):
            # Ceph's rbd-openstack guide. Only for rbd: a file path tells a user nothing of use.
            "show_image_direct_url": True if backend == "rbd" else None,
            **_own_server_options(settings),
        },
        "database": oslo.database(settings, "glance", secrets["database"], "glance"),
        "keystone_authtoken": oslo.keystone_authtoken(settings, "glance", secrets),
        "paste_deploy": {"flavor": "keystone"},
        "glance_store": {"default_backend": backend},
        backend: stores[backend],
        # Multiple stores need these reserved stores for image import and tasks.
        "os_glance_staging_store": {"filesystem_store_datadir": STAGING},
        "os_glance_tasks_store": {"filesystem_store_datadir": TASKS},
        "oslo_concurrency": oslo.lock_path("/var/lib/glance/tmp"),
        "oslo_middleware": {"enable_proxy_headers_parsing": True},
    }
    files = {"glance-api.conf": render_ini(conf)}
    if _server(settings) is GlanceServer.UWSGI:
        module = "glance.wsgi.api:application"
        files.update(uwsgi_file(settings, "glance-api", module, PORT, chunked_input_limit=CHUNKED_INPUT_LIMIT))
    if backend == "rbd":
        files.update(ceph.conf_files(settings))
    return files


def conf_files(settings: Settings) -> tuple[str, ...]:
    """What every glance container reads: glance-api.conf, and on rbd the ceph.conf it names
    (rbd_store_ceph_conf; no key: the keyring goes to glance-api alone)."""
    on_rbd = settings.glance.backend == "rbd" and settings.ceph is not None
    return ("glance-api.conf", *ceph.conf_entries(settings)) if on_rbd else ("glance-api.conf",)


def housekeeping(settings: Settings) -> tuple[Step, ...]:
    """glance-db-purge: `glance-manage db purge` deletes rows soft-deleted more than --age_in_days
    ago from every table but `images` (glance/cmd/manage.py; the images table keeps its rows so
    that an image ID is never used again, OSSN-0075). --max_rows -1 purges all of them, not the
    first 100 of each table."""
    if not settings.housekeeping.enabled:
        return ()
    purge = settings.housekeeping.glance_db_purge
    return (
        db_purge(
            "glance",
            "glance-api",
            (*MANAGE, "db", "purge", "--age_in_days", str(purge.age_in_days), "--max_rows", "-1"),
            conf_files(settings),
            purge.schedule,
        ),
    )


def metadefs_load(settings: Settings) -> Step:
    """glance-metadefs-load (openstack-helm's name): the metadata definitions into the migrated schema.

    Without them `GET /v2/metadefs/*` answers empty lists, and Horizon offers no image, flavor or
    volume properties. Kolla's bootstrap runs `glance-manage db_load_metadefs` after db_sync,
    openstack-helm a Job after glance-db-sync. Idempotent: without --merge a namespace that
    exists is skipped (glance/db/sqlalchemy/metadata.py), so a rerun changes nothing and keeps
    what operators edited. The path is given because glance, finding no files, logs an error
    and exits 0.
    """
    return Step(
        name="glance-metadefs-load",
        image="glance-api",
        command=(*MANAGE, "db", "load_metadefs", "--path", METADEFS),
        needs=("glance-db-sync",),
        config_files=conf_files(settings),
    )


def api(settings: Settings, needs: tuple[str, ...], config_files: tuple[str, ...], **extra: Any) -> Process:
    """glance-api: under uWSGI, or Glance's own server where the release runs it (releases.GlanceServer)."""
    if _server(settings) is GlanceServer.UWSGI:
        return wsgi_api("glance-api", "glance-api", CONFIG_DIR, PORT, needs, config_files, **extra)
    return Process(
        name="glance-api",
        image="glance-api",
        command=("glance-api", "--config-file", f"{CONFIG_DIR}/glance-api.conf"),
        needs=needs,
        config_files=config_files,
        port=PORT,
        probe=Probe(PORT, "/"),
        **extra,
    )


def glance(settings: Settings) -> ServiceSpec:
    on_volume_claim = settings.glance.backend == "file"
    scheme = "https" if settings.tls.internal_enabled else "http"
    # Replicas on several nodes mount one claim: ReadWriteMany (settings require a class for it).
    replicas = settings.replicas_of("glance-api")
    claims = (
        (Claim("glance-images", IMAGES, settings.storage.glance_size, "images", shared=replicas > 1),)
        if on_volume_claim
        else ()
    )
    # On rbd, ceph.conf and client glance's keyring (and no other client's).
    on_rbd = settings.glance.backend == "rbd" and settings.ceph is not None
    config_files = conf_files(settings)
    keyrings = ceph.keyrings(settings.ceph, (settings.ceph.clients.glance,) if on_rbd and settings.ceph else ())
    staging_volume, staging_mount = scratch("glance-staging", settings.glance.scratch_size, STAGING)
    tasks_volume, tasks_mount = scratch("glance-tasks", settings.glance.scratch_size, TASKS)
    return ServiceSpec(
        name="glance",
        config_dir=CONFIG_DIR,
        render=render,
        # An image upload or download streams through the gateway for as long as the image takes:
        # kolla-ansible gives Glance's haproxy backend 6 h (haproxy_glance_api_server_timeout).
        catalog=(CatalogEntry("image", "glance", "glance-api", PORT, request_timeout=UPLOAD_TIMEOUT),),
        steps=(
            db_sync(
                "glance",
                "glance-api",
                (*MANAGE, "db_sync"),
                config_files,
            ),
            metadefs_load(settings),
            *housekeeping(settings),
        ),
        processes=(
            api(
                settings,
                # With the cinder backend, images are written to Cinder only when uploaded:
                # a run-time need that Glance retries, so it is no start-up edge.
                # And the metadata definitions, as Kolla loads them before the API starts: an API
                # that answers is one whose definitions are there.
                needs=(
                    *registered_api_needs("glance"),
                    "glance-metadefs-load",
                    *(ceph.needs(settings) if on_rbd else ()),
                ),
                config_files=config_files,
                claims=claims,
                extra_volumes=(*keyrings[0], staging_volume, tasks_volume),
                extra_mounts=(*keyrings[1], staging_mount, tasks_mount),
                # Image import stages data on one replica; the others proxy to it at this URL
                # (unset, glance disables the proxying). Per pod, so through oslo.config's
                # OS_<GROUP>__<OPTION> variables, which it reads before the files. Under internal
                # TLS the pod's address is in no certificate, and glance's proxy verifies with
                # requests' own CA store: staged imports across replicas fail (README, open).
                env=(
                    {"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
                    env("OS_DEFAULT__WORKER_SELF_REFERENCE_URL", f"{scheme}://$(POD_IP):{PORT}"),
                ),
            ),
        ),
    )
