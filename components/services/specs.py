"""The service spec of every service of the catalog (no Pulumi runtime needed).

The program builds each one through `OpenStackService`; settings validation reads the same
specs to know which workloads, images and public hosts the stack has. Which services a stack
deploys, and where each one's spec is built, is the catalog's (components/tables/catalog.py); the
order they deploy in is the graph's.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from functools import cache

from components.infrastructure import ca_rotation, rook
from components.infrastructure.public_routes import PublicRoute, routes_of
from components.mechanism.spec import ServiceSpec
from components.settings.model import Settings
from components.tables import catalog

SpecBuilder = Callable[[Settings], ServiceSpec]


@cache
def spec_builder(name: str) -> SpecBuilder:
    """The function a catalog entry names ("module:function") that builds its ServiceSpec."""
    module, _, function = catalog.entry(name).spec.partition(":")
    builder = getattr(importlib.import_module(module), function, None)
    if not callable(builder):
        raise LookupError(f"components/tables/catalog.py: {name}'s spec {catalog.entry(name).spec!r} is no function")
    return builder


def service_specs(settings: Settings) -> tuple[ServiceSpec, ...]:
    """The specs of the services this stack deploys, in the catalog's order; then, on `ceph.rook`,
    the keys Job's, and under internal TLS the CA bundle Job's (no service of the catalog:
    infrastructure, as Rook's objects are)."""
    specs = tuple(spec_builder(name)(settings) for name in catalog.deployed(settings.services.enabled()))
    if settings.ceph is not None and settings.ceph.rook is not None:
        specs += (rook.ceph(settings),)
    if settings.tls.internal_enabled:
        specs += (ca_rotation.bundle_spec(settings),)
    return specs


def public_routes(settings: Settings) -> tuple[PublicRoute, ...]:
    """Every public host of the services the stack deploys, in the catalog's order."""
    return routes_of(settings, service_specs(settings))
