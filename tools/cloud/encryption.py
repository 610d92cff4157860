"""Is the cloud's internal traffic encrypted? The lab's packet capture (tools/cloud/capture.py) on every
node while the user scenarios run, its connections classed per data store and API.

The report's `tls.encrypted` is `{connection: bool}` as issue 20 asks: true where the capture saw
connections to that port and every one started TLS. `tls.wire` has the figures behind each (how
many connections, how many TLS, the first bytes of plain ones). A connection the plan does not
encrypt yet is named in `tls.not_encrypted` with why, so a false there is expected, not hidden.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from components import internal_tls
from tools.cloud.capture import Capture, connections, summarize
from tools.cloud.endpoint_tls import NOT_ENCRYPTED
from tools.cloud.isolation import client_ports

if TYPE_CHECKING:
    from components.settings import Settings
    from tools.cloud.deploy import Cloud

EXTRA_SERVICES = ("horizon", "nova-novncproxy")  # not APIs of the catalog, but what the gateway reaches


def watched(cloud: Cloud) -> dict[str, set[int]]:
    """Each data store's client port, and each API's (and the gateway's other backends') Service ports."""
    settings = cloud.plan.settings
    names = {store: {port} for store, port in client_ports(settings).items()}
    services = {service.name: service for service in cloud.table.services}
    for name in (*internal_tls.apis(settings), *EXTRA_SERVICES):
        service = services.get(name)
        if service is None:  # a service the stack does not deploy
            continue
        ports = {p.port for p in service.ports}
        ports |= {int(p.target) for p in service.ports if str(p.target).isdigit()}
        names[name] = ports
    return names


def expected_clear(settings: Settings, names: Iterable[str]) -> set[str]:
    """Those of `names` the stack's plan leaves in clear (tools/cloud/endpoint_tls.py says why)."""
    if not settings.tls.internal_enabled:
        return set(names)
    return set(names) & set(NOT_ENCRYPTED)


def capture(cloud: Cloud, directory: Path) -> Capture:
    """A capture on every node of the lab, on every watched port (enter it around what should be seen)."""
    ports = {port for found in watched(cloud).values() for port in found}
    return Capture(directory, [node.netns for node in cloud.cluster.nodes], ports)


def encrypted(cloud: Cloud, done: Capture) -> dict[str, Any]:
    """The `tls` report's `encrypted`, `wire` and `capture_ok` from a finished capture."""
    wire = summarize(connections(done.pcaps, done.ports), watched(cloud))
    clear = expected_clear(cloud.plan.settings, wire)
    seen = {name: figures for name, figures in wire.items() if figures["connections"]}
    internal = cloud.plan.settings.tls.internal_enabled
    return {
        "internal_tls": internal,
        "encrypted": {name: figures["encrypted"] if name in seen else None for name, figures in wire.items()},
        "capture_ok": internal
        and {"mariadb", "rabbitmq", "memcached"} <= set(seen)
        and all(figures["encrypted"] for name, figures in seen.items() if name not in clear),
        "wire": wire,
    }
