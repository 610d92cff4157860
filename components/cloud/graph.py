"""The deploy graph of a cloud as a value, built from the settings before any resource exists.

Every Job, CronJob, workload, data store and config object the program creates and anything
waits for, by its Kubernetes name; for each, what it waits for and a one-line reason. Edges
come from one place: a Step's or Process's `needs` (written next to the thing that waits,
in its service module) plus its service's config objects. The graph is checked (every need
resolves, no cycle, names unique) and `components.cloud.build` creates the resources by walking
it in order, so the order services are declared in does not matter.

It creates no resource: `tools.plan --graph` prints it and `--explain` reads it.
"""

from __future__ import annotations

import difflib
import heapq
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property

from components.cloud import upgrade
from components.infrastructure import ca_rotation, rook
from components.mechanism import oslo
from components.mechanism.bootstrap import standard_steps
from components.mechanism.service_configs import ConfigObject, config_objects
from components.mechanism.spec import Process, ServiceSpec, Step
from components.nodes import libvirt_tls, maintenance
from components.services.specs import service_specs
from components.settings.model import Settings

# What the Jobs every service runs leave behind for the ones after them (openstack-helm's names).
JOB_PURPOSES = (
    ("-db-init", "needs the database and its user that {name} creates"),
    ("-db-sync", "needs the schema that {name} migrates"),
    ("-rabbit-init", "waits for the RabbitMQ user and vhost that {name} creates"),
    ("-ks-user", "waits for the Keystone user that {name} creates"),
    ("-ks-service", "waits for the catalog service that {name} registers in Keystone"),
    ("-ks-endpoints", "waits for the endpoints that {name} registers in Keystone"),
    ("keystone-bootstrap", "waits for Keystone's admin user, region and identity endpoints ({name})"),
    ("-fernet-setup", "waits for {name} to check the Fernet key repository"),
    ("-credential-setup", "waits for {name} to check the credential key repository"),
    ("-rook-keys", "waits for the Ceph keyrings and ceph.conf that {name} copies from Rook's namespace"),
)

# Built by their own components (operators' custom resources, RBAC), not by a service's spec.
INFRASTRUCTURE = "infrastructure"

Source = Step | Process | ConfigObject | None


class GraphError(ValueError):
    """A deploy graph that cannot be deployed: a need nothing provides, a cycle, a name twice."""


@dataclass(frozen=True)
class Need:
    name: str
    reason: str


@dataclass(frozen=True)
class Node:
    name: str
    kind: str  # Job, CronJob, Deployment, DaemonSet, StatefulSet, MariaDB, RabbitmqCluster, Secret, ...
    service: str  # app.kubernetes.io/name of its pods (or of the object)
    owner: str  # the service spec that declares it, or INFRASTRUCTURE
    needs: tuple[Need, ...] = ()
    source: Source = field(default=None, compare=False)  # what the emitter builds it from

    @property
    def waitable(self) -> bool:
        """A CronJob repeats; nothing waits for it, and it may share its name with a Job."""
        return self.kind != "CronJob"

    @property
    def key(self) -> str:
        return self.name if self.waitable else f"{self.name} (CronJob)"


def _reason_for(target: Node) -> str:
    """Why something waits for `target`, as far as the target tells."""
    name = target.name
    if isinstance(target.source, ConfigObject):
        return target.source.reason
    if isinstance(target.source, Step) and target.source.purpose:
        return target.source.purpose
    if target.kind == "Job":
        for ending, why in JOB_PURPOSES:
            if name.endswith(ending):
                return why.format(name=name)
        return f"waits for Job {name} to complete"
    if target.kind == "Deployment":
        return f"waits for {name} to be ready (its pods pass their readiness probe)"
    if target.kind == "DaemonSet":
        if isinstance(target.source, Process) and target.source.on_delete:
            return f"waits for DaemonSet {name} to be created (not awaited: OnDelete, pulumi.com/skipAwait)"
        return f"waits for the {name} pods to be ready on their nodes"
    if target.kind == "StatefulSet":
        return f"waits for {name} to be ready (every replica)"
    if target.kind == "MariaDB":
        return "waits for the MariaDB server to be Ready (mariadb-operator)"
    if target.kind == "RabbitmqCluster":
        return "waits for RabbitMQ to have all its replicas ready (RabbitMQ Cluster Operator)"
    if target.kind == "Backup":
        return f"waits for the backup {name} of every database (the upgrade's rollback) to complete"
    if target.kind == "CephClient":
        return "waits for Rook to report the pools and clients Ready (their keys then exist)"
    if target.kind == "ClusterRoleBinding":
        return f"its pods act in the Kubernetes API with what {name} grants"
    return f"waits for {target.kind} {name}"


class CloudGraph:
    """The checked graph. `order()` is the deploy order: a node comes after all it needs."""

    def __init__(self, nodes: Sequence[Node], specs: Sequence[ServiceSpec] = ()):
        self.specs = tuple(specs)
        self.nodes: dict[str, Node] = {}
        for node in nodes:
            if node.key in self.nodes:
                first = self.nodes[node.key].owner
                raise GraphError(f"{node.kind} {node.name} is declared twice (by {first} and {node.owner})")
            self.nodes[node.key] = node
        self._check_needs()
        self._order = self._topological_order()

    def _check_needs(self) -> None:
        waitable = {n.name for n in self.nodes.values() if n.waitable}
        for node in self.nodes.values():
            for need in node.needs:
                if need.name not in waitable:
                    close = difflib.get_close_matches(need.name, sorted(waitable), n=1)
                    hint = f"; did you mean {close[0]!r}?" if close else ""
                    raise GraphError(
                        f"{node.kind} {node.name} (service {node.owner}) waits for {need.name!r}, "
                        f"which this stack does not deploy{hint}"
                    )

    def _topological_order(self) -> tuple[Node, ...]:
        """Kahn's algorithm; among nodes ready together, the one declared first goes first."""
        keys = list(self.nodes)
        position = {key: i for i, key in enumerate(keys)}
        by_name = {node.name: key for key, node in self.nodes.items() if node.waitable}
        waiting = {key: len({need.name for need in node.needs}) for key, node in self.nodes.items()}
        waiters: dict[str, list[str]] = {}
        for key, node in self.nodes.items():
            for name in {need.name for need in node.needs}:
                waiters.setdefault(by_name[name], []).append(key)
        ready = [position[key] for key, count in waiting.items() if count == 0]
        heapq.heapify(ready)
        order: list[Node] = []
        while ready:
            key = keys[heapq.heappop(ready)]
            order.append(self.nodes[key])
            for waiter in waiters.get(key, ()):
                waiting[waiter] -= 1
                if waiting[waiter] == 0:
                    heapq.heappush(ready, position[waiter])
        if len(order) < len(self.nodes):
            done = {node.key for node in order} | {node.name for node in order if node.waitable}
            raise GraphError("the deploy graph has a cycle: " + " -> ".join(self._cycle(done)))
        return tuple(order)

    def _cycle(self, done: set[str]) -> list[str]:
        """A cycle among the nodes not yet ordered, for the error message."""
        left = {key: node for key, node in self.nodes.items() if key not in done}
        path, at = [], next(iter(left))
        while at not in path:
            path.append(at)
            at = next(need.name for need in left[at].needs if need.name in left)
        return [*path[path.index(at) :], at]

    def order(self) -> tuple[Node, ...]:
        return self._order

    def __getitem__(self, name: str) -> Node:
        return self.nodes[name]

    def __contains__(self, name: object) -> bool:
        return name in self.nodes

    @cached_property
    def waiters(self) -> Mapping[str, tuple[Node, ...]]:
        """Name → the nodes that wait for it."""
        found: dict[str, list[Node]] = {}
        for node in self._order:
            for need in node.needs:
                found.setdefault(need.name, []).append(node)
        return {name: tuple(nodes) for name, nodes in found.items()}

    def lines(self, wave_of: Mapping[str, int]) -> Iterator[str]:
        """The graph as text: per wave, each node and what it waits for, with the reason. `wave_of` numbers
        the nodes by key: the plan's waves (tools/plan_graph.py), so that the text, the drawing and
        --explain give an object one wave number."""
        for number in sorted(set(wave_of[node.key] for node in self._order)):
            yield f"wave {number}"
            for node in self._order:
                if wave_of[node.key] != number:
                    continue
                yield f"  {node.kind} {node.name} ({node.owner})"
                for need in node.needs:
                    yield f"    <- {need.name}: {need.reason}"


def _ca_bundle(settings: Settings) -> tuple[str, ...]:
    """What mounts the internal CA bundle waits for the Job that writes it
    (components/infrastructure/ca_rotation.py)."""
    return (ca_rotation.BUNDLE_JOB,) if settings.tls.internal_enabled else ()


def _infrastructure(settings: Settings, specs: tuple[ServiceSpec, ...]) -> Iterator[tuple[Node, tuple[str, ...]]]:
    """The nodes no service spec declares, each with the names it waits for."""
    # Their operators verify with the bundle (caSecretName, serverCASecretRef), which their pods mount.
    yield Node(oslo.MARIADB, "MariaDB", "mariadb", INFRASTRUCTURE), _ca_bundle(settings)
    yield Node(oslo.RABBITMQ, "RabbitmqCluster", "rabbitmq", INFRASTRUCTURE), _ca_bundle(settings)
    if settings.services.on("nova") and maintenance.enabled(settings):
        yield Node(maintenance.cluster_name(settings), "ClusterRoleBinding", maintenance.SERVICE, INFRASTRUCTURE), ()
    if libvirt_tls.in_pods(settings):
        node = Node(libvirt_tls.access_name(settings), "ValidatingAdmissionPolicy", libvirt_tls.SERVICE, INFRASTRUCTURE)
        yield node, ()
    if rook.rook_of(settings) is not None:
        yield Node(rook.CLIENTS_NODE, "CephClient", rook.SERVICE, INFRASTRUCTURE), ()
    if settings.upgrade is not None:
        # Taken once every preflight check has passed, before the first migration.
        needs = (oslo.MARIADB, *upgrade.check_jobs(specs, settings))
        yield Node(upgrade.backup_name(settings), "Backup", "mariadb", INFRASTRUCTURE), needs


def steps_of(spec: ServiceSpec, settings: Settings) -> tuple[Step, ...]:
    """The Jobs every service runs (db-init, ks-user, ...), then its own."""
    return standard_steps(spec, settings) + spec.steps


def _service_nodes(spec: ServiceSpec, settings: Settings) -> Iterator[tuple[Node, tuple[str, ...]]]:
    """Each node of a service with the names it waits for: its needs, then its service's configs."""
    steps = steps_of(spec, settings)
    configs = config_objects(spec, steps)
    for config in configs:
        yield Node(config.name, config.kind, spec.name, spec.name, source=config), ()
    config_names = tuple(c.name for c in configs)
    bundle = _ca_bundle(settings)
    for step in steps:
        kind = "CronJob" if step.schedule else "Job"
        needs = step.needs + config_names + (bundle if step.trusts_internal_ca else ())
        yield Node(step.name, kind, step.service or spec.name, spec.name, source=step), needs
    for process in spec.processes:
        kind = "DaemonSet" if process.node_pod else "StatefulSet" if process.stateful else "Deployment"
        node = Node(process.object_name, kind, process.service or spec.name, spec.name, source=process)
        yield node, process.needs + config_names + bundle


def cloud_graph(settings: Settings) -> CloudGraph:
    """The graph of this stack: the data stores, then every enabled service's objects."""
    specs = upgrade.apply(service_specs(settings), settings)
    declared: list[tuple[Node, tuple[str, ...]]] = list(_infrastructure(settings, specs))
    for spec in specs:
        declared += _service_nodes(spec, settings)
    by_name = {node.name: node for node, _ in declared if node.waitable}
    nodes = []
    for node, needs in declared:
        # An unknown name gets no reason here; CloudGraph names it as the error it is.
        resolved = tuple(Need(n, _reason_for(by_name[n]) if n in by_name else "") for n in needs)
        nodes.append(Node(node.name, node.kind, node.service, node.owner, resolved, node.source))
    graph = CloudGraph(nodes, specs)
    if settings.upgrade is None:
        return graph
    return CloudGraph(_after_preflight(graph, upgrade.check_jobs(specs, settings)), specs)


# What runs or rolls: a `pulumi up` that changes one of these changes the cloud (a Job re-runs, pods restart).
RUNS = ("Job", "CronJob", "Deployment", "DaemonSet", "StatefulSet")


def _after_preflight(graph: CloudGraph, checks: tuple[str, ...]) -> list[Node]:
    """Every Job, CronJob and workload of an upgrade after every preflight check, not only the
    upgrade's own steps: a release changes every image, so the bootstrap Jobs would run again
    (`-db-init`, `-rabbit-init`, the key setups), memcached and Horizon would roll, before the checks
    said the cloud can take the new release. A node already after them through another keeps its
    needs (the graph stays as readable as without the upgrade). What the checks themselves need,
    their service's config objects (the check's script, the files its command reads), comes before
    them: README, "Upgrading to a new release"."""
    gate = set(checks)
    # What the checks need, however far back (the internal CA bundle a check mounts to reach the
    # database over TLS, its config objects), runs before them: gating it would be a cycle.
    before: set[str] = set()
    todo = [need.name for check in checks for need in graph[check].needs]
    while todo:
        name = todo.pop()
        if name not in before:
            before.add(name)
            todo += [need.name for need in graph[name].needs]
    after: set[str] = set()
    nodes = []
    for node in graph.order():
        names = {need.name for need in node.needs}
        already = bool(names & after) or gate <= names
        if node.name in gate or node.name in before or not (already or node.kind in RUNS):
            nodes.append(node)  # a check, or a config object or data store before them
            continue
        needs = node.needs if already else (*node.needs, *(Need(n, _reason_for(graph[n])) for n in checks))
        after.add(node.name)
        nodes.append(Node(node.name, node.kind, node.service, node.owner, needs, node.source))
    return nodes
