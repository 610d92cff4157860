"""Memcached: token and session cache for Keystone, the APIs and Horizon.

A StatefulSet behind a headless Service: every client lists each server by name
(`oslo.memcached_servers`) and spreads keys over them, so one key lives on one server.
Declared as data like the OpenStack services and built by the same mechanism.

Where `tls.internal` names a CA, memcached serves TLS only, with the Certificate
`memcached-internal-tls` (every pod's name as clients use it), and every client verifies it with
the internal CA (components/mechanism/oslo.py `memcached_tls`, components/services/horizon.py). Neither kolla-ansible
(roles/memcached starts `memcached -v -l <address> -p 11211 -c ... -U 0 -m ...`) nor
openstack-helm (memcached/templates/bin/_memcached.sh.tpl) offers memcached on TLS; the options
below are memcached's own (`memcached -h` of 1.6, doc/tls.txt), and Kolla's image installs the
distribution's package (docker/memcached/Dockerfile.j2 of stable/2026.1), which Debian and Ubuntu
build with TLS (Debian's changelog, 1.6.6-2: "Enable TLS capabilities by default").
"""

from __future__ import annotations

from components.mechanism import internal_tls, oslo
from components.mechanism.oslo import MEMCACHED, MEMCACHED_PORT
from components.mechanism.spec import Process, RenderContext, ServiceSpec
from components.mechanism.workload import Manifest, Mount, Probe
from components.settings.memory import SHARES
from components.settings.model import Settings

IMAGE = "memcached"  # Kolla's
# Before it was built by the shared mechanism its component had this type; the alias keeps
# the state of its StatefulSet, Service and budget, so an upgrade changes nothing in the cluster.
FORMER_TYPE = "openstack:infra:Memcached"
TLS_PROBE_SCRIPT = "memcached_tls_probe.py"


def _no_files(ctx: RenderContext) -> dict[str, str]:
    return {}


def dns_names(settings: Settings) -> list[str]:
    """What memcached's certificate names: the headless Service's names, as an API's certificate
    names its Service's, and each pod's through it, which is how every client reaches a server
    (`memcached-<i>.memcached.<ns>.svc.<domain>`, oslo.memcached_servers) and which name its TLS
    client checks: python-binary-memcached and pymemcache hand the host they connect to to
    `wrap_socket` as `server_hostname` (bmemcached/protocol.py, pymemcache/client/base.py).
    A new replica's name arrives with the reissued certificate, which the probe below loads."""
    each_pod = internal_tls.pod_dns_names(settings, oslo.memcached_pods(settings), MEMCACHED)
    return [*internal_tls.dns_names(settings, MEMCACHED), *each_pod]


def tls_options() -> tuple[str, ...]:
    """`-Z` (every listener on TLS: a plain client's bytes end the handshake) and the pair from the
    mounted Secret. No `ssl_ca_cert`/`ssl_verify_mode`: memcached asks clients for no certificate
    (verify mode 0, its default), as none of its clients holds one; they authenticate the server."""
    pair = f"ssl_chain_cert={internal_tls.SERVER_CERT},ssl_key={internal_tls.SERVER_KEY}"
    return ("-Z", "-o", pair)


def _tls_probe() -> Probe:
    """memcached reads its certificate when it starts and again only on `refresh_certs` (tls.c
    `refresh_certs` of 1.6): the probe puts a renewed certificate into service, and is ready only
    while memcached serves the mounted one over TLS (components/scripts/memcached_tls_probe.py)."""
    command = ("python3", f"/scripts/{TLS_PROBE_SCRIPT}", str(MEMCACHED_PORT), internal_tls.SERVER_CERT)
    return Probe(port=MEMCACHED_PORT, command=command)  # liveness: the TCP port (workload.py)


def memcached(settings: Settings) -> ServiceSpec:
    # Item memory is a share of the container's memory limit (components/settings/memory.py).
    memory_mb = SHARES[MEMCACHED].mib(settings.resources_of(MEMCACHED).limits_memory)
    command = ("memcached", "-p", str(MEMCACHED_PORT), "-U", "0", "-m", str(memory_mb), "-c", "8192", "-l", "0.0.0.0")
    tls = settings.tls.internal_enabled
    # Its own certificate, in memcached's container only: a directory mount, so the kubelet's
    # renewal lands in it (never in a subPath mount).
    volumes: tuple[Manifest, ...] = (internal_tls.server_volume(MEMCACHED),) if tls else ()
    mounts: tuple[Mount, ...] = (internal_tls.SERVER_MOUNT,) if tls else ()
    return ServiceSpec(
        name=MEMCACHED,
        config_dir="",  # configured on its command line: no config files
        render=_no_files,
        processes=(
            Process(
                name=MEMCACHED,
                image=IMAGE,
                command=command + (tls_options() if tls else ()),
                needs=(),
                port=MEMCACHED_PORT,
                port_name="memcache",
                probe=_tls_probe() if tls else Probe(MEMCACHED_PORT),
                scripts=(TLS_PROBE_SCRIPT,) if tls else (),
                extra_volumes=volumes,
                extra_mounts=mounts,
                stateful=True,
                data_store=True,
                component="server",
            ),
        ),
        former_type=FORMER_TYPE,
    )
