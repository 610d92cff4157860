"""Is the cloud's internal traffic encrypted? The lab's packet capture (tests/lab/cloud/capture.py) on every
node while the user scenarios run, its connections classed per data store and API.

The report's `tls.encrypted` is `{connection: bool}` as issue 20 asks: true where the capture saw
connections to that port and every one was TLS, None where it saw none. `tls.wire` has the figures
behind each (connections, how many opened during the capture, TLS, plain, the first bytes of plain
ones). `capture_ok`: the stack turns internal TLS on, MariaDB, RabbitMQ and memcached were seen, and
every connection seen was TLS but to what tests/lab/cloud/endpoint_tls.py's not_encrypted names, with
why, as left in clear (the report's `tls.not_encrypted`: the gateway's plain backends and more).
Under tls.libvirt, libvirt's ports too (LIBVIRT_PORTS): `libvirt_encrypted`, every one of them seen
(libvirtd's TLS listener and QEMU's streams during the migrations, the guests' VNC servers behind the
console) and TLS.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from components.mechanism import internal_tls
from components.nodes import libvirt_tls
from components.services.specs import public_routes
from tests.lab.cloud.capture import Capture, connections, summarize
from tests.lab.cloud.endpoint_tls import not_encrypted
from tests.lab.cloud.isolation import client_ports

if TYPE_CHECKING:
    from tests.lab.cloud.deploy import Cloud


# Under tls.libvirt, libvirt's traffic between nodes and to the guests' consoles: libvirtd's listeners
# (a connection to 16509 would be one in clear), the guests' VNC servers (libvirt's first display
# ports, from 5900) and QEMU's migration streams (qemu.conf migration_port_min/max, 49152-49215).
LIBVIRT_PORTS = {
    "libvirtd": {16509, libvirt_tls.TLS_PORT},
    "vnc": set(range(5900, 5920)),
    "qemu-migration": set(range(49152, 49216)),
}
EPHEMERAL = ("qemu-migration",)  # counted only from a client's SYN (capture.summarize opened_only)


def watched(cloud: Cloud) -> dict[str, set[int]]:
    """Each data store's client port, and the Service ports of each API and of what the gateway reaches
    (and libvirt's, under tls.libvirt)."""
    settings = cloud.plan.settings
    names = {store: {port} for store, port in client_ports(settings).items()}
    if libvirt_tls.enabled(settings):
        names |= {name: set(ports) for name, ports in LIBVIRT_PORTS.items()}
    services = {service.name: service for service in cloud.table.services}
    behind_gateway = sorted({route.backend for route in public_routes(settings)})
    for name in dict.fromkeys((*internal_tls.apis(settings), *behind_gateway)):
        service = services.get(name)
        if service is None:  # a service the stack does not deploy
            continue
        ports = {p.port for p in service.ports}
        ports |= {int(p.target) for p in service.ports if str(p.target).isdigit()}
        names[name] = ports
    return names


def addresses(cloud: Cloud, names: Iterable[str]) -> dict[str, set[str]]:
    """Each watched name's Service address and its ready pods' addresses, as the endpoints have them now
    (names the Service table does not know are left out: their connections count by port)."""
    services = {service.name: service for service in cloud.table.services}
    found = {}
    for name in names:
        service = services.get(name)
        own = {service.cluster_ip} if service is not None and service.cluster_ip else set()
        mine = own | {endpoint.ip for endpoint in cloud.table.endpoints.get(name, ())}
        if mine:  # a name the table does not know is judged by its ports alone
            found[name] = mine
    return found


def capture(cloud: Cloud, directory: Path) -> Capture:
    """A capture on every node of the lab, on every watched port (enter it around what should be seen)."""
    ports = {port for found in watched(cloud).values() for port in found}
    return Capture(directory, [node.netns for node in cloud.cluster.nodes], ports)


def encrypted(cloud: Cloud, done: Capture) -> dict[str, Any]:
    """The `tls` report's `encrypted`, `wire` and `capture_ok` from a finished capture."""
    names = watched(cloud)
    # QEMU's migration ports lie in Linux's ephemeral range, where servers answer their clients too.
    wire = summarize(connections(done.pcaps, done.ports), names, addresses(cloud, names), EPHEMERAL)
    settings = cloud.plan.settings
    seen = {name: figures for name, figures in wire.items() if figures["connections"]}
    clear = not_encrypted(settings)
    internal = settings.tls.internal_enabled
    return {
        "internal_tls": internal,
        "encrypted": {name: figures["encrypted"] if name in seen else None for name, figures in wire.items()},
        "capture_ok": internal
        and set(client_ports(settings)) <= set(seen)
        and all(figures["encrypted"] for name, figures in seen.items() if name not in clear),
        "wire": wire,
        # libvirt's hops under tls.libvirt: each seen during the run (migrations, the console) and TLS.
        "libvirt_encrypted": libvirt_tls.enabled(settings)
        and all(name in seen and wire[name]["encrypted"] for name in LIBVIRT_PORTS),
    }
