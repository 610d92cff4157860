"""The service spec of every service of the catalog (no Pulumi runtime needed).

The program builds each one through `OpenStackService`; settings validation reads the same
specs to know which workloads, images and public hosts the stack has. Which services a stack
deploys is the catalog's (components/catalog.py); the order they deploy in is the graph's.
"""

from __future__ import annotations

from collections.abc import Callable

from components import catalog
from components.cinder import cinder
from components.compute import compute
from components.glance import glance
from components.horizon import horizon
from components.keystone import keystone
from components.memcached import memcached
from components.neutron import neutron
from components.nova import nova
from components.placement import placement
from components.settings import Settings
from components.spec import ServiceSpec

SPECS: dict[str, Callable[[Settings], ServiceSpec]] = {
    "memcached": memcached,
    "keystone": keystone,
    "glance": glance,
    "placement": placement,
    "nova": nova,
    "neutron": neutron,
    "cinder": cinder,
    "horizon": horizon,
    "compute": compute,
}
if set(SPECS) != set(catalog.BY_NAME):
    raise AssertionError("components/services.py needs a spec for exactly the services of components/catalog.py")


def service_specs(settings: Settings) -> tuple[ServiceSpec, ...]:
    """The specs of the services this stack deploys, in the catalog's order."""
    return tuple(SPECS[name](settings) for name in catalog.deployed(settings.services.enabled()))
