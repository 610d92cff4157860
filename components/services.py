"""The OpenStack services a stack declares, as data (no Pulumi runtime needed).

The program builds each one through `OpenStackService`; settings validation reads the same
specs to know which workloads, images and public hosts the stack has.
"""

from __future__ import annotations

from collections.abc import Callable

from components.cinder import cinder
from components.compute import compute
from components.glance import glance
from components.horizon import horizon
from components.keystone import keystone
from components.neutron import neutron
from components.nova import nova
from components.placement import placement
from components.settings import OPTIONAL_SERVICES, Settings
from components.spec import ServiceSpec

# In an order where whatever a service waits for is declared before it.
SERVICES: dict[str, Callable[[Settings], ServiceSpec]] = {
    "glance": glance,
    "placement": placement,
    "nova": nova,
    "neutron": neutron,
    "cinder": cinder,
    "horizon": horizon,
}
assert set(SERVICES) == set(OPTIONAL_SERVICES), "settings.OPTIONAL_SERVICES and SERVICES must name the same services"


def service_specs(settings: Settings) -> tuple[ServiceSpec, ...]:
    """Keystone, the enabled services, then the compute nodes (when Nova is enabled)."""
    specs = [keystone(settings), *(SERVICES[name](settings) for name in settings.services.enabled())]
    if settings.services.nova:
        specs.append(compute(settings))
    return tuple(specs)
