"""The services of a cloud as plain data: the one list every other list of services comes from.

Standard library only: the policy pack imports this module (as it imports `components.tables.roles`)
in the engine, where the program's other modules and their dependencies are not available.
Adding a service (say Heat) means an entry here, one service module and its tests.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ServiceEntry:
    name: str
    # Where its ServiceSpec is built, "module:function" (components/services/specs.py imports it).
    spec: str
    optional: bool = True  # a `services.<name>` setting turns it on or off; Keystone is always on
    # Services it needs at run time; settings refuse a cloud that enables it without them.
    needs: tuple[str, ...] = ()
    databases: tuple[str, ...] = ()  # the schemas its db-init Job creates
    # Kolla images of its control-plane pods, which run as `user` (kolla/common/users.py).
    images: tuple[str, ...] = ()
    user: str | None = None
    # Its API workloads (Deployments behind a Service of the same name), in the catalog or not.
    apis: tuple[str, ...] = ()
    # Deployed exactly when that service is: compute nodes are no service of their own,
    # their pods belong to Nova and Neutron.
    deployed_with: str | None = None


# In the order services are listed to users (settings, plans); the deploy order is the graph's.
SERVICES: tuple[ServiceEntry, ...] = (
    # The token and session cache: infrastructure, but declared and built like the services.
    ServiceEntry(
        "memcached",
        "components.infrastructure.memcached:memcached",
        optional=False,
        images=("memcached",),
        user="memcached",
    ),
    ServiceEntry(
        "keystone",
        "components.services.keystone:keystone",
        optional=False,
        databases=("keystone",),
        images=("keystone",),
        user="keystone",
        apis=("keystone-api",),
    ),
    ServiceEntry(
        "glance",
        "components.services.glance:glance",
        databases=("glance",),
        images=("glance-api",),
        user="glance",
        apis=("glance-api",),
    ),
    ServiceEntry(
        "placement",
        "components.services.placement:placement",
        databases=("placement",),
        images=("placement-api",),
        user="placement",
        apis=("placement-api",),
    ),
    ServiceEntry(
        "nova",
        "components.services.nova:nova",
        needs=("glance", "placement", "neutron"),
        databases=("nova_api", "nova_cell0", "nova"),
        images=("nova-api", "nova-scheduler", "nova-conductor", "nova-novncproxy"),
        user="nova",
        apis=("nova-api", "nova-metadata"),
    ),
    ServiceEntry(
        "neutron",
        "components.services.neutron:neutron",
        databases=("neutron",),
        images=("neutron-server",),
        user="neutron",
        apis=("neutron-server",),
    ),
    ServiceEntry(
        "cinder",
        "components.services.cinder:cinder",
        databases=("cinder",),
        images=("cinder-api", "cinder-scheduler", "cinder-volume"),
        user="cinder",
        apis=("cinder-api",),
    ),
    ServiceEntry("horizon", "components.services.horizon:horizon", images=("horizon",), user="horizon"),
    ServiceEntry("compute", "components.services.compute:compute", optional=False, deployed_with="nova"),
)
BY_NAME: dict[str, ServiceEntry] = {entry.name: entry for entry in SERVICES}

# Images every service's Jobs share, with their Kolla user.
TOOL_IMAGES: dict[str, str] = {"kolla-toolbox": "ansible"}


def entry(name: str) -> ServiceEntry:
    try:
        return BY_NAME[name]
    except KeyError:
        raise KeyError(
            f"no service {name!r} in components/tables/catalog.py (services: {', '.join(BY_NAME)})"
        ) from None


def deployed(enabled: tuple[str, ...]) -> tuple[str, ...]:
    """The catalog's services a cloud deploys, given the optional ones it enables."""
    return tuple(
        e.name
        for e in SERVICES
        if (e.deployed_with in enabled if e.deployed_with else not e.optional or e.name in enabled)
    )


def optional_services() -> tuple[str, ...]:
    """The `services.<name>` settings, in the catalog's order."""
    return tuple(e.name for e in SERVICES if e.optional)


def service_needs() -> dict[str, tuple[str, ...]]:
    return {e.name: e.needs for e in SERVICES if e.optional}


def database_services() -> tuple[str, ...]:
    """Services with a schema of their own (a db-sync Job), as the pack's `databaseServices`."""
    return tuple(e.name for e in SERVICES if e.databases)


def api_components() -> tuple[str, ...]:
    """app.kubernetes.io/component of the API workloads (their name without the service's):
    the pack knows API pods by it."""
    return tuple(sorted({api.removeprefix(f"{e.name}-") for e in SERVICES for api in e.apis}))


def image_users() -> dict[str, str]:
    """Kolla image → the user it runs as, for every control-plane image of the cloud."""
    users = {image: e.user for e in SERVICES if e.user for image in e.images}
    return {**users, **TOOL_IMAGES}


def _check() -> None:
    for e in SERVICES:
        unknown = [need for need in (*e.needs, *filter(None, [e.deployed_with])) if need not in BY_NAME]
        if unknown:
            raise ValueError(f"catalog: {e.name} needs unknown services {unknown}")
        if e.images and not e.user:
            raise ValueError(f"catalog: {e.name} has images but no Kolla user")


_check()
