"""The names that the map settings refer to, read from what the stack declares.

`replicas.<workload>`, `resources.<container>`, `endpoints.hosts.<host>` and
`images.overrides.<image>` are maps whose keys name things of the program. A misspelt key
would otherwise be ignored without a word (the default applies), so every key is checked
against the services' specs, the same data the program builds its objects from; and
`policyEnforcement.<policy>` against the policy pack's rules (policies/registry.py).
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass

from components.infrastructure import mariadb, memcached, rabbitmq
from components.mechanism.bootstrap import standard_steps
from components.mechanism.oslo import MARIADB, MEMCACHED, RABBITMQ
from components.mechanism.spec import Process, ServiceSpec
from components.services.specs import service_specs
from components.settings.model import OPTIONAL_SERVICES, Problem, Settings, problem
from policies.registry import HYGIENE_RULES, RULES
from policies.settings import ENFORCEMENT_LEVELS

DEFAULT_RESOURCES = "default"  # resources.default: what every container's entry does not set
# The pack's rules and levels, for `policyEnforcement`, from the program's own checkout. The pack's
# modules but pack.py need only the standard library and components/tables/roles.py (policies/__init__.py),
# so the program's virtualenv imports them without pulumi-policy (tests/test_setting_names.py).
POLICIES = frozenset(rule.name for rule in RULES)


@dataclass(frozen=True)
class DeclaredNames:
    scaled: frozenset[str]  # Deployments and StatefulSets that take `replicas`
    unscaled: dict[str, str]  # what runs but ignores `replicas` → why
    containers: frozenset[str]  # every container that takes `resources`
    public_hosts: frozenset[str]
    images: frozenset[str]  # Kolla image names the stack pulls


def _containers(process: Process) -> Iterator[Process]:
    yield process
    for other in (*process.sidecars, *process.init_containers):
        yield from _containers(other)


def declared_names(settings: Settings) -> DeclaredNames:
    specs = service_specs(settings)
    processes = [c for spec in specs for p in spec.processes for c in _containers(p)]
    steps = [s for spec in specs for s in (*standard_steps(spec, settings), *spec.steps)]
    top = [p for spec in specs for p in spec.processes]
    unscaled = {
        MARIADB: mariadb.REPLICAS,
        RABBITMQ: rabbitmq.REPLICAS,
        **{p.object_name: "a DaemonSet runs one pod on each node its selector matches" for p in top if p.node_pod},
        **{p.name: "a DaemonSet runs one pod on each node its selector matches" for p in top if p.node_pod},
        **{s.name: "a Job runs once per change" for s in steps},
        **{p.name: "a controller without leader election runs alone" for p in top if p.singleton},
    }
    return DeclaredNames(
        scaled=frozenset({MEMCACHED, *(p.name for p in top if p.node_pod is None and not p.singleton)}),
        unscaled=unscaled,
        containers=frozenset({MARIADB, RABBITMQ, MEMCACHED, *(p.name for p in processes), *(s.name for s in steps)}),
        public_hosts=frozenset(_public_hosts(specs)),
        images=frozenset({memcached.IMAGE, *(p.image for p in processes), *(s.image for s in steps)}),
    )


def _public_hosts(specs: Iterable[ServiceSpec]) -> Iterator[str]:
    for spec in specs:
        yield from (host.name for host in spec.public_hosts)
        yield from (entry.catalog_name for entry in spec.catalog)


def _every_service(settings: Settings) -> Settings:
    services = settings.services.model_copy(update=dict.fromkeys(OPTIONAL_SERVICES, True))
    return settings.model_copy(update={"services": services})


def _unknown(path: tuple[str, ...], given: Iterable[str], known: frozenset[str], what: str) -> Iterator[Problem]:
    for name in given:
        if name not in known:
            yield problem((*path, name), name, _not_one_of(name, sorted(known), what))


def _not_one_of(given: str, known: Sequence[str], what: str) -> str:
    close = difflib.get_close_matches(given, known, n=1)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    return f"unknown {what}{hint}; allowed: {', '.join(known) or 'none'}"


def unknown_policies(settings: Settings) -> Iterator[Problem]:
    """`policyEnforcement` keys that name no policy of the pack, and values that are no enforcement level."""
    yield from _unknown(("policyEnforcement",), settings.policy_enforcement, POLICIES, "policy")
    for name, level in settings.policy_enforcement.items():
        if name in POLICIES and name not in HYGIENE_RULES:
            # Set here, a generated config would govern every later deploy: what guards the host
            # is changed in policies/, where review of the gate happens.
            message = (
                "guards the host or the cloud, so its level is fixed in policies/registry.py, not set by a stack; "
                f"a stack may set only the hygiene policies: {', '.join(sorted(HYGIENE_RULES))}"
            )
            yield problem(("policyEnforcement", name), level, message)
        elif level not in ENFORCEMENT_LEVELS:
            message = _not_one_of(level, ENFORCEMENT_LEVELS, "enforcement level")
            yield problem(("policyEnforcement", name), level, message)


def shared_public_hosts(settings: Settings, public_hosts: Iterable[str]) -> Iterator[Problem]:
    """`endpoints.hosts` entries that give a service the public host another one has (its own entry, or
    its default `<service>.<domain>`): one route would take both services' requests."""
    hosts = {service: settings.public_host(service) for service in public_hosts}
    for service in settings.endpoints.hosts:
        host = hosts.get(service)
        others = sorted(other for other, theirs in hosts.items() if theirs == host and other != service)
        if host is not None and others:
            message = f"{host} is also {others[0]}'s public host; give every service a host of its own"
            yield problem(("endpoints", "hosts", service), host, message)


def unknown_names(settings: Settings) -> Iterator[Problem]:
    """A problem for every map key that names nothing of the program under this stack's topology
    and node groups. The services the stack leaves off count: turning one off keeps its tuning."""
    names = declared_names(_every_service(settings))
    for name, count in settings.replicas.items():
        if name in names.unscaled:
            yield problem(("replicas", name), count, f"{name} takes no replicas setting: {names.unscaled[name]}")
    scaled = (n for n in settings.replicas if n not in names.unscaled)
    yield from _unknown(("replicas",), scaled, names.scaled, "workload with replicas")
    containers = (n for n in settings.resources if n != DEFAULT_RESOURCES)
    yield from _unknown(("resources",), containers, names.containers, "container")
    yield from _unknown(("endpoints", "hosts"), settings.endpoints.hosts, names.public_hosts, "public host")
    if settings.endpoints.hosts:
        yield from shared_public_hosts(settings, declared_names(settings).public_hosts)
    yield from _unknown(("images", "overrides"), settings.images.overrides, names.images, "image")
    yield from unknown_policies(settings)
