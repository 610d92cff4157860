"""The cloud's public hosts, each with the Service and port the gateway sends its requests to.

One list, from the services' specs: every Keystone catalog entry (`<catalog name>.<domain>`,
what the catalog's public URLs name) and every public host beyond the catalog (Keystone's own,
Horizon, the noVNC proxy). The HTTPRoutes (components/infrastructure/front_door.py), the certificate's names
(components/mechanism/certificates.py), the NetworkPolicies of what only the gateway reaches
(components/infrastructure/isolation.py) and the policy pack's config (tools/policy_config.py) all read it.
The stack's list is `services.public_routes(settings)`, handed to the front door and its
isolation as data: they need no service's spec.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from components.mechanism.meta import selector
from components.mechanism.spec import ServiceSpec
from components.settings.model import Settings


@dataclass(frozen=True)
class PublicRoute:
    host_key: str  # its endpoints.hosts key: a catalog name (nova, cinderv3) or a public host (horizon)
    hostname: str  # settings.public_host(host_key)
    backend: str  # the Service in the stack's namespace
    port: int
    pods: dict[str, str]  # the labels the backend's Service selects its pods by
    gateway_only: bool  # nothing in the cloud calls it: only the gateway's pods need to reach it
    request_timeout: str  # how long the gateway waits for the backend's answer (a GEP-2257 duration)

    @property
    def route_name(self) -> str:
        """The HTTPRoute's name, as openstack-helm names its routes (keystone-route, horizon-route)."""
        return f"{self.host_key}-route"


def _pods(spec: ServiceSpec, backend: str) -> dict[str, str]:
    process = next((p for p in spec.processes if p.name == backend), None)
    if process is None:
        raise LookupError(f"{spec.name}: its public host is served by {backend!r}, which is none of its processes")
    return selector(process.service or spec.name, process.component_in(spec.name))


def _routes(settings: Settings, spec: ServiceSpec) -> Iterator[PublicRoute]:
    for host in spec.public_hosts:
        yield PublicRoute(
            host.name,
            settings.public_host(host.name),
            host.process,
            host.port,
            _pods(spec, host.process),
            host.gateway_only,
            host.request_timeout,
        )
    for entry in spec.catalog:
        hostname = settings.public_host(entry.catalog_name)
        pods = _pods(spec, entry.process)
        yield PublicRoute(entry.catalog_name, hostname, entry.process, entry.port, pods, False, entry.request_timeout)


def routes_of(settings: Settings, specs: Iterable[ServiceSpec]) -> tuple[PublicRoute, ...]:
    """Every public host of these services, in their order."""
    return tuple(route for spec in specs for route in _routes(settings, spec))
