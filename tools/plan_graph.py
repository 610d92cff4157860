"""The deploy graph of a plan as people read it: Jobs, workloads, data stores and operators.

What `make plan` draws (graph.svg, graph.md) and what `--explain` numbers its waves by. The
waves are the plan's own (`Plan.waves`, as printed); the edges are the engine's
dependencies between these objects, less those another path already implies (the drawing
shows the order; `--explain` lists every edge).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

from tools.plan import Plan
from tools.runtime import Registration

# Kinds something waits for, or that wait for them; the rest (Secrets, Services, ...) is config.
SHOWN_KINDS = ("Job", "CronJob", "Deployment", "DaemonSet", "StatefulSet", "MariaDB", "RabbitmqCluster")
WORKLOAD_KINDS = ("Deployment", "DaemonSet", "StatefulSet")
NAME_LABEL = "app.kubernetes.io/name"


@dataclass(frozen=True)
class Node:
    urn: str
    name: str
    kind: str  # the Kubernetes kind, or the type of an operator's chart or manifest
    service: str  # app.kubernetes.io/name, or the component an operator belongs to
    wave: int  # as `make plan` prints it, from 1


def short_type(r: Registration) -> str:
    """A kind for what is no Kubernetes object: 'Chart', 'ConfigFile', 'RandomPassword', ..."""
    return r.kind or r.type.rsplit(":", 1)[-1]


def wave_numbers(plan: Plan) -> dict[str, int]:
    """URN → its wave, from 1: the one numbering of `make plan`'s summary, the drawing, graph.txt and --explain."""
    return {r.urn: number for number, wave in enumerate(plan.waves(), 1) for r in wave}


def graph_waves(plan: Plan) -> dict[str, int]:
    """The deploy graph's node keys (components/cloud/graph.py) → the wave of the object each names."""
    by_urn = wave_numbers(plan)
    urn_of = {(r.kind, r.k8s_name): r.urn for r in plan.custom if r.kind}
    return {node.key: by_urn[urn_of[(node.kind, node.name)]] for node in plan.graph.order()}


def service_of(r: Registration, by_urn: dict[str, Registration]) -> str:
    labels = (r.inputs.get("metadata") or {}).get("labels") or {}
    if NAME_LABEL in labels:
        return labels[NAME_LABEL]
    parent = by_urn.get(r.parent)
    return parent.name if parent is not None else r.name


class DeployGraphView:
    def __init__(self, plan: Plan):
        self.plan = plan
        by_urn = {r.urn: r for r in plan.registrations}
        waves = wave_numbers(plan)
        shown = [r for r in plan.custom if r.kind in SHOWN_KINDS or r.remote]
        self.nodes = sorted(
            (Node(r.urn, r.k8s_name or r.name, short_type(r), service_of(r, by_urn), waves[r.urn]) for r in shown),
            key=lambda n: (n.wave, n.service, n.name, n.kind),
        )
        self.by_urn = {n.urn: n for n in self.nodes}
        self.waits = {n.urn: [d for d in plan.dependencies[n.urn] if d in self.by_urn] for n in self.nodes}

    @property
    def waves(self) -> list[int]:
        """The waves that hold a shown node, in order."""
        return sorted({n.wave for n in self.nodes})

    @property
    def services(self) -> list[str]:
        """Services in the order their first object deploys."""
        return list(dict.fromkeys(n.service for n in self.nodes))

    @cached_property
    def _ancestors(self) -> dict[str, frozenset[str]]:
        found: dict[str, frozenset[str]] = {}
        for node in self.nodes:  # in wave order: what a node waits for comes first
            below = set(self.waits[node.urn])
            for dep in self.waits[node.urn]:
                below |= found[dep]
            found[node.urn] = frozenset(below)
        return found

    @cached_property
    def edges(self) -> list[tuple[Node, Node]]:
        """(what is waited for, what waits) without the edges another path implies."""
        edges = []
        # In the nodes' order, not the engine's registration order, so graph.md is the same every run.
        position = {n.urn: i for i, n in enumerate(self.nodes)}
        for node in self.nodes:
            direct = sorted(self.waits[node.urn], key=position.__getitem__)
            implied = set().union(*(self._ancestors[d] for d in direct)) if direct else set()
            edges += [(self.by_urn[d], node) for d in direct if d not in implied]
        return edges
