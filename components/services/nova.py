"""Nova: the compute API, metadata API, scheduler, conductor and console proxy.

nova-compute itself runs on compute nodes (components/services/compute.py) from the same rendered
nova.conf base, with its node group's hypervisor settings added.
"""

from __future__ import annotations

import dataclasses

from components.mechanism import internal_tls, oslo
from components.mechanism.api import registered_api_needs, rpc_daemon, uwsgi_file, wsgi_api
from components.mechanism.inifile import render_ini
from components.mechanism.spec import CatalogEntry, Process, PublicHost, RenderContext, ServiceSpec, Step
from components.mechanism.workload import Probe, env
from components.nodes import libvirt_tls
from components.nodes.compute_pods import compute_daemonsets
from components.settings.model import Settings

CONFIG_DIR = "/etc/nova"
API_PORT = 8774
METADATA_PORT = 8775
VNC_PORT = 6080
VNC_PUBLIC_HOST = "novncproxy"  # the console proxy's public host (endpoints.hosts.novncproxy)
NOVA_CONF = ("nova.conf",)
CELL0_CONF = "nova-cell0.conf"
CONSOLE_PROXY_CONF = "nova-novncproxy.conf"
# Every Nova process talks to its cell database and over RPC.
CELL_NEEDS = ("nova-db-sync", "nova-rabbit-init")


def nova_sections(ctx: RenderContext) -> dict[str, dict]:
    """The nova.conf every Nova process shares; compute node groups add to it."""
    settings, secrets = ctx.settings, ctx.secrets
    password = secrets["keystone"]
    return oslo.merge(
        {
            "DEFAULT": {**oslo.logging(), "state_path": "/var/lib/nova"},
            "api_database": oslo.database(settings, "nova", secrets["database"], "nova_api"),
            "database": oslo.database(settings, "nova", secrets["database"], "nova"),
            "keystone_authtoken": oslo.keystone_authtoken(settings, "nova", secrets),
            "service_user": oslo.service_user(settings, "nova", password),
            "placement": {**oslo.service_credentials(settings, "nova", password), "valid_interfaces": "internal"},
            "glance": {"valid_interfaces": "internal", "region_name": settings.region, **oslo.ca_file(settings)},
            # nova-api checks the project ids of quota and flavor-access calls with Keystone through
            # these (nova/api/openstack/identity.py); a failed TLS handshake there reads as "Keystone
            # unreachable" and lets any id through. kolla-ansible sets nothing here because it puts
            # its CA in the image's store; here the CA is a mounted file only.
            **({"keystone": oslo.ca_file(settings)} if settings.tls.internal_enabled else {}),
            # Nova calls Cinder with an admin context and no user token from its periodic tasks and
            # when nova-compute cleans up instances at start: then it authenticates with these
            # (nova/volume/cinder.py), and without auth_type fails with "Unknown auth type: None".
            # kolla-ansible gives cinder's user here; nova's own (admin in the service project) does
            # the same, and every nova.conf, a compute node's too, already holds its password only.
            "cinder": {
                "catalog_info": "volumev3::internalURL",
                "os_region_name": settings.region,
                **oslo.keystone_auth(settings, "nova", password),
            },
            "neutron": {
                **oslo.service_credentials(settings, "nova", password),
                "valid_interfaces": "internal",
                "service_metadata_proxy": True,
                "metadata_proxy_shared_secret": secrets["metadata-proxy-shared-secret"],
            },
            "cache": oslo.cache(settings),
            "oslo_concurrency": oslo.lock_path("/var/lib/nova/tmp"),
            "oslo_middleware": {"enable_proxy_headers_parsing": True},
            "vnc": {
                "enabled": True,
                "novncproxy_host": "0.0.0.0",
                "novncproxy_port": VNC_PORT,
                "novncproxy_base_url": oslo.public_url(settings, VNC_PUBLIC_HOST, "/vnc_lite.html"),
            },
            # Host discovery runs as the nova-cell-setup CronJob, in one place only.
            "scheduler": {"discover_hosts_in_cells_interval": -1},
            # An upgrade rolls the compute nodes last (components/cloud/upgrade.py): until then the new
            # conductors and APIs send older computes only the RPC version they understand, which
            # nova's upgrade guide (doc/source/admin/upgrades.rst) asks for with `auto`. Always set,
            # as kolla-ansible does (ansible/roles/nova/templates/nova.conf.j2 and
            # roles/nova-cell/templates/nova.conf.j2 of stable/2026.1) and openstack-helm's nova chart
            # (values.yaml conf.nova.upgrade_levels): with no compute registered nova uses its own
            # version, and with computes of one release their version is its own. Each process
            # keeps the version it found (nova/compute/rpcapi.py LAST_VERSION, _ROUTER) until it
            # restarts: the pulumi up after an upgrade rolls them (components/cloud/upgrade.py).
            "upgrade_levels": {"compute": "auto"},
        },
        oslo.messaging(settings, "nova", secrets["rabbitmq"]),
    )


def console_proxy_sections(settings: Settings) -> dict[str, dict]:
    """`nova-novncproxy.conf`, read by the console proxy after nova.conf: under internal TLS
    (components/mechanism/internal_tls.py CONSOLE_PROXY) it serves HTTPS from its own certificate, refuses
    plain connections (ssl_only) and takes TLS 1.2 at least, as Envoy Gateway speaks to its
    backends (nova/cmd/baseproxy.py); under libvirt's TLS it speaks VeNCrypt to the guests' VNC
    servers with its own certificate (components/nodes/libvirt_tls.py). A file of its own, not nova.conf:
    only its container mounts the certificates these name, and every other Nova container would
    name files it lacks."""
    sections: dict[str, dict] = {}
    if internal_tls.serves_tls(settings, internal_tls.CONSOLE_PROXY):
        sections["DEFAULT"] = {"ssl_only": True, "cert": internal_tls.SERVER_CERT, "key": internal_tls.SERVER_KEY}
        sections["console"] = {"ssl_minimum_version": "tlsv1_2"}
    if libvirt_tls.enabled(settings):
        sections["vnc"] = libvirt_tls.console_proxy_options()
    return sections


def render(ctx: RenderContext) -> dict[str, str]:
    cell0 = oslo.database(ctx.settings, "nova", ctx.secrets["database"], "nova_cell0")["connection"]
    return {
        "nova.conf": render_ini(nova_sections(ctx)),
        **({CONSOLE_PROXY_CONF: render_ini(proxy)} if (proxy := console_proxy_sections(ctx.settings)) else {}),
        # Read after nova.conf by nova-db-sync to keep cell0's mapping current (update_cell).
        CELL0_CONF: render_ini({"database": {"connection": cell0}}),
        **uwsgi_file(ctx.settings, "nova-api", "nova.wsgi.osapi_compute:application", API_PORT),
        **uwsgi_file(ctx.settings, "nova-metadata", "nova.wsgi.metadata:application", METADATA_PORT),
    }


def _daemon(name: str, needs: tuple[str, ...]) -> Process:
    command = (name, "--config-file", f"{CONFIG_DIR}/nova.conf")
    return rpc_daemon(name, name, command, needs, NOVA_CONF, termination_grace=DAEMON_GRACE_SECONDS)


# On SIGTERM nova's services (2026.1) stop taking new RPC calls, then sleep manager_shutdown_timeout (160 s,
# whatever is in progress: nova/conductor/manager.py, scheduler/manager.py graceful_shutdown) for the work in
# progress, all within graceful_shutdown_timeout (180 s: nova/conf/base.py sets oslo.service's option to
# it), so each of their pods takes 160 s to stop; 2025.2's exit within oslo.service's 60 s. Kubernetes' default grace
# (30 s) would SIGKILL a conductor in the middle of that wait, so its pods get nova's whole timeout and
# a little for the exit, as openstack-helm's nova chart gives them 180 s (pod.lifecycle
# termination_grace_period). A Deployment's roll does not wait for it: its ReplicaSet counts no pod
# being deleted. nova-compute has its own (components/services/compute.py). tests/real/test_nova_shutdown.py
# reads both timeouts from each release's nova.
NOVA_GRACEFUL_SHUTDOWN_SECONDS = 180
DAEMON_GRACE_SECONDS = NOVA_GRACEFUL_SHUTDOWN_SECONDS + 10


def _script_step(
    name: str,
    script: str,
    needs: tuple[str, ...],
    schedule: str | None = None,
    config_files: tuple[str, ...] = NOVA_CONF,
) -> Step:
    return Step(
        name=name,
        image="nova-api",
        command=("bash", f"/scripts/{script}"),
        needs=needs,
        config_files=config_files,
        scripts=(script,),
        schedule=schedule,
        service="nova",
    )


# How long the deploy's host discovery waits for a first compute host: a nova-compute pod is
# Ready once connected to RabbitMQ, a little before it has created its compute node record.
FIRST_HOST_WAIT_SECONDS = 600


def host_discovery(needs: tuple[str, ...], schedule: str | None = None) -> Step:
    """nova-cell-setup: maps compute hosts that registered since the last run into their cell.

    The Job of the deploy waits (up to FIRST_HOST_WAIT_SECONDS) until a host is mapped, so the
    cloud takes VMs when `pulumi up` ends (openstack-helm's cell-setup init waits likewise); the
    CronJob maps whatever registered since, and does not wait.
    """
    step = _script_step("nova-cell-setup", "nova_cell_setup.sh", needs, schedule)
    wait = 0 if schedule else FIRST_HOST_WAIT_SECONDS
    return dataclasses.replace(step, env=(env("WAIT_FOR_A_HOST_SECONDS", str(wait)),))


def housekeeping(settings: Settings) -> tuple[Step, ...]:
    """nova-archive-deleted-rows (openstack-helm's cron-job-archive-deleted-rows.yaml), in every cell."""
    if not settings.housekeeping.enabled:
        return ()
    archive = settings.housekeeping.nova_archive_deleted_rows
    step = _script_step(
        "nova-archive-deleted-rows", "nova_archive_deleted_rows.sh", ("nova-db-sync",), archive.schedule
    )
    return (dataclasses.replace(step, env=(env("AGE_IN_DAYS", str(archive.age_in_days)),)),)


def nova(settings: Settings) -> ServiceSpec:
    # The console proxy reads its own file after nova.conf only where it has options (internal or libvirt TLS).
    proxy_files = (*NOVA_CONF, *((CONSOLE_PROXY_CONF,) if console_proxy_sections(settings) else ()))
    # The compute API and the metadata API read the same databases and send the same RPCs,
    # so they wait for the same Jobs. Calls to Placement, Glance, Neutron and Cinder happen
    # per request and are retried by Nova, so those APIs are no start-up edges.
    api_needs = (*registered_api_needs("nova"), "nova-rabbit-init")
    return ServiceSpec(
        name="nova",
        config_dir=CONFIG_DIR,
        render=render,
        messaging=True,
        shared_secrets=("metadata-proxy-shared-secret",),
        catalog=(CatalogEntry("compute", "nova", "nova-api", API_PORT, path="/v2.1"),),
        public_hosts=(PublicHost(VNC_PUBLIC_HOST, "nova-novncproxy", VNC_PORT, gateway_only=True),),
        steps=(
            _script_step("nova-db-sync", "nova_db_sync.sh", ("nova-db-init",), config_files=(*NOVA_CONF, CELL0_CONF)),
            # Host discovery maps the compute hosts into cell1: the Job once the compute
            # DaemonSets are up, the CronJob keeps mapping hosts added later.
            dataclasses.replace(host_discovery(("nova-db-sync", *compute_daemonsets(settings))), moved_from="compute"),
            host_discovery(("nova-db-sync",), schedule="*/5 * * * *"),
            *housekeeping(settings),
        ),
        processes=(
            wsgi_api("nova-api", "nova-api", CONFIG_DIR, API_PORT, api_needs, NOVA_CONF),
            wsgi_api("nova-metadata", "nova-api", CONFIG_DIR, METADATA_PORT, api_needs, NOVA_CONF),
            # The scheduler asks Placement per request, not at start-up.
            _daemon("nova-scheduler", CELL_NEEDS),
            _daemon("nova-conductor", CELL_NEEDS),
            # Console tokens live in the cell database; the proxy needs nothing else to start.
            Process(
                name="nova-novncproxy",
                image="nova-novncproxy",
                command=("nova-novncproxy", *(a for f in proxy_files for a in ("--config-file", f"{CONFIG_DIR}/{f}"))),
                needs=("nova-db-sync",),
                config_files=proxy_files,
                port=VNC_PORT,
                probe=Probe(VNC_PORT),
                # Its VeNCrypt client certificate, in its container only.
                extra_volumes=(libvirt_tls.proxy_volume(),) if libvirt_tls.enabled(settings) else (),
                extra_mounts=(libvirt_tls.PROXY_MOUNT,) if libvirt_tls.enabled(settings) else (),
            ),
        ),
    )
