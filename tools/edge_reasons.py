"""Why one object of a plan waits for another, and where that edge is written.

Edges between Jobs, workloads, data stores and config objects are the deploy graph's
(`components.cloud.graph`): its reason, and its source (the `needs` of the waiter's Step or
Process, or its service's config objects). A Secret or ConfigMap also says how the waiter's
pods use it, as planned. The engine's other edges are explained from the two objects: an
input computed from a generated secret, an explicit `depends_on`, a parent's dependencies.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from components.cloud.graph import CloudGraph, Node
from components.cloud.openstack_service import CHECKSUM_ANNOTATION
from components.mechanism.service_configs import ConfigObject
from components.mechanism.spec import Process, Step
from tools.plan import Plan
from tools.plan_graph import short_type
from tools.runtime import Registration


@dataclass(frozen=True)
class Needs:
    declared_as: str  # "Step" or "Process"
    name: str
    service: str
    needs: tuple[str, ...]

    def __str__(self) -> str:
        return f"`needs` of {self.declared_as} {self.name} (service {self.service})"


def graph_node(graph: CloudGraph, r: Registration) -> Node | None:
    """The deploy graph's node of a planned object, if it is one."""
    key = f"{r.k8s_name} (CronJob)" if r.kind == "CronJob" else r.k8s_name or ""
    node = graph.nodes.get(key)
    return node if node is not None and node.kind == short_type(r) else None


def declared_needs(node: Node) -> Needs | None:
    """What its Step or Process declares it needs (without its service's configs)."""
    if isinstance(node.source, Step):
        return Needs("Step", node.source.name, node.owner, node.source.needs)
    if isinstance(node.source, Process):
        return Needs("Process", node.source.name, node.owner, node.source.needs)
    return None


def _pod(r: Registration) -> dict[str, Any]:
    spec = r.inputs.get("spec") or {}
    template = (spec.get("jobTemplate") or {}).get("spec", spec).get("template") or {}
    return template.get("spec") or {}


def _uses(waiter: Registration, dep: Registration) -> list[str]:
    """How the waiter's pods use a Secret or ConfigMap: mounted files and environment variables."""
    pod, name = _pod(waiter), dep.k8s_name
    ref = "secretName" if dep.kind == "Secret" else "name"
    field = "secret" if dep.kind == "Secret" else "configMap"
    volumes = {v["name"] for v in pod.get("volumes", []) if (v.get(field) or {}).get(ref) == name}
    containers = [*pod.get("initContainers", []), *pod.get("containers", [])]
    files = [m["mountPath"] for c in containers for m in c.get("volumeMounts", []) if m["name"] in volumes]
    key_ref = "secretKeyRef" if dep.kind == "Secret" else "configMapKeyRef"
    variables = [
        e["name"]
        for c in containers
        for e in c.get("env", [])
        if ((e.get("valueFrom") or {}).get(key_ref) or {}).get("name") == name
    ]
    uses = []
    if files:
        shown = ", ".join(list(dict.fromkeys(files))[:3]) + (", ..." if len(set(files)) > 3 else "")
        uses.append(f"mounts it ({shown})")
    if variables:
        uses.append(f"reads {', '.join(dict.fromkeys(variables))} from it")
    if (waiter.inputs.get("spec") or {}).get("rootPasswordSecretKeyRef", {}).get("name") == name:
        uses.append("is created with the root password it holds")
    return uses


def plan_reason(waiter: Registration, dep: Registration) -> str:
    """Why `waiter` waits for `dep` where the deploy graph has no such edge, as the objects tell."""
    kind, name = short_type(dep), dep.k8s_name or dep.name
    if kind in ("Secret", "ConfigMap"):
        uses = _uses(waiter, dep)
        return "; ".join(uses) if uses else "a config object of its service, which it does not read itself"
    if kind in ("RandomPassword", "RandomBytes"):
        template = (waiter.inputs.get("spec") or {}).get("template") or {}
        if CHECKSUM_ANNOTATION in ((template.get("metadata") or {}).get("annotations") or {}):
            return f"its config checksum is computed from files that hold this generated secret ({name})"
        return f"an input is computed from this generated secret ({name})"
    if kind == "Namespace":
        return f"lives in namespace {name}"
    if dep.remote:
        return f"waits for the operator's {kind} {name}: every object in it ready"
    return f"waits for {kind} {name}"


class EdgeSources:
    """Where each edge of one plan is declared (built once per plan: --explain asks per edge)."""

    def __init__(self, plan: Plan):
        self.plan = plan
        self.by_urn = {r.urn: r for r in plan.registrations}
        self.children: dict[str, list[str]] = {}
        for r in plan.registrations:
            self.children.setdefault(r.parent, []).append(r.urn)
        self.custom = {r.urn for r in plan.custom}
        self.graph = plan.graph

    def node(self, r: Registration) -> Node | None:
        return graph_node(self.graph, r)

    def graph_reason(self, waiter: Registration, dep: Registration) -> str | None:
        """The deploy graph's reason for this edge, if it is one of the graph's edges."""
        node, target = self.node(waiter), self.node(dep)
        if node is None or target is None:
            return None
        return next((need.reason for need in node.needs if need.name == target.name), None)

    def reason(self, waiter: Registration, dep: Registration) -> str:
        """Why `waiter` waits for `dep`: the graph's reason, and for a config object how it is used."""
        why = self.graph_reason(waiter, dep)
        if why is None:
            return plan_reason(waiter, dep)
        if short_type(dep) in ("Secret", "ConfigMap"):
            uses = _uses(waiter, dep)
            return f"{why}; {'; '.join(uses)}" if uses else why
        return why

    def leaves(self, urns: list[str]) -> set[str]:
        """The custom resources an edge to each of `urns` stands for (a component: all inside it)."""
        found, stack = set(), list(urns)
        while stack:
            urn = stack.pop()
            if urn in self.custom:
                found.add(urn)
            else:
                stack.extend(self.children.get(urn, []))
        return found

    def source(self, waiter: Registration, dep: Registration) -> str:
        """Where the edge from `waiter` to `dep` is declared."""
        parent = self.by_urn.get(waiter.parent)
        if dep.urn in self.leaves(waiter.dependencies):
            node, target = self.node(waiter), self.node(dep)
            if node is not None and target is not None and self.graph_reason(waiter, dep) is not None:
                if isinstance(target.source, ConfigObject):
                    return f"the deploy graph: each Job and process of {node.owner} waits for its config objects"
                needs = declared_needs(node)
                return f"the deploy graph: {needs}" if needs else "the deploy graph"
            if short_type(dep) in ("RandomPassword", "RandomBytes"):
                return "an input's value: Pulumi waits for what an input is computed from"
            where = f" in component {parent.type} {parent.name}" if parent else ""
            return f"depends_on, declared on it{where}"
        while parent is not None:
            if dep.urn in self.leaves(parent.dependencies):
                return f"inherited: its parent component {parent.type} {parent.name} depends on it"
            parent = self.by_urn.get(parent.parent)
        return "the engine's dependencies (no declaration found)"
