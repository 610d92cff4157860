"""Why one object of a plan waits for another, and where that edge is written.

The reason is read from the two objects as planned (the Job that creates a database, the
Secret a pod mounts, the generated password a checksum is computed from); the source from
how the engine got the edge: the `needs` of the waiter's Step or Process (checked against
the service modules' own specs), its service's config objects, an input's value, an
explicit `depends_on`, or a parent component's dependencies, which every child inherits.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any

from components.bootstrap import standard_steps
from components.openstack_service import CHECKSUM_ANNOTATION
from components.settings import Settings
from components.spec import ServiceSpec
from tools.plan import Plan
from tools.plan_graph import short_type
from tools.runtime import Registration

# What each standard Job leaves behind for the ones after it (openstack-helm's names).
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
)


@dataclass(frozen=True)
class Needs:
    declared_as: str  # "Step" or "Process"
    name: str
    service: str
    needs: tuple[str, ...]

    def __str__(self) -> str:
        return f"`needs` of {self.declared_as} {self.name} (service {self.service})"


def _specs(settings: Settings) -> list[ServiceSpec]:
    names = ["keystone", *settings.services.enabled(), *(["compute"] if settings.services.nova else [])]
    return [getattr(importlib.import_module(f"components.{name}"), name)(settings) for name in names]


_NEEDS: dict[str, dict[tuple[str, str], Needs]] = {}


def declared_needs(settings: Settings) -> dict[tuple[str, str], Needs]:
    """(kind, name) → the `needs` its service module declares, for every Job and process."""
    key = settings.model_dump_json()
    if key not in _NEEDS:
        found: dict[tuple[str, str], Needs] = {}
        for spec in _specs(settings):
            for step in (*standard_steps(spec, settings), *spec.steps):
                kind = "CronJob" if step.schedule else "Job"
                found[(kind, step.name)] = Needs("Step", step.name, spec.name, step.needs)
            for process in spec.processes:
                kind = "DaemonSet" if process.node_pod else "Deployment"
                found[(kind, process.object_name)] = Needs("Process", process.name, spec.name, process.needs)
        _NEEDS[key] = found
    return _NEEDS[key]


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


def reason(waiter: Registration, dep: Registration) -> str:
    """Why `waiter` waits for `dep`, as far as the two objects tell."""
    kind, name = short_type(dep), dep.k8s_name or dep.name
    if kind == "Job":
        for ending, why in JOB_PURPOSES:
            if name.endswith(ending):
                return why.format(name=name)
        return f"waits for Job {name} to complete"
    if kind in ("Secret", "ConfigMap"):
        uses = _uses(waiter, dep)
        return "; ".join(uses) if uses else "a config object of its service, which it does not read itself"
    if kind in ("RandomPassword", "RandomBytes"):
        template = (waiter.inputs.get("spec") or {}).get("template") or {}
        if CHECKSUM_ANNOTATION in ((template.get("metadata") or {}).get("annotations") or {}):
            return f"its config checksum is computed from files that hold this generated secret ({name})"
        return f"an input is computed from this generated secret ({name})"
    if kind == "Deployment":
        return f"waits for {name} to be ready (its pods pass their readiness probe)"
    if kind == "DaemonSet":
        annotations = (dep.inputs.get("metadata") or {}).get("annotations") or {}
        if annotations.get("pulumi.com/skipAwait") == "true":
            return f"waits for DaemonSet {name} to be created (not awaited: OnDelete, pulumi.com/skipAwait)"
        return f"waits for the {name} pods to be ready on their nodes"
    if kind == "StatefulSet":
        return f"waits for {name} to be ready (every replica)"
    if kind == "MariaDB":
        return "waits for the MariaDB server to be Ready (mariadb-operator)"
    if kind == "RabbitmqCluster":
        return "waits for RabbitMQ to have all its replicas ready (RabbitMQ Cluster Operator)"
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
        self.needs = declared_needs(plan.settings)

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
            needs = self.needs.get((waiter.kind or "", waiter.k8s_name or ""))
            if needs and dep.kind not in ("Secret", "ConfigMap") and (dep.k8s_name or dep.name) in needs.needs:
                return str(needs)
            if dep.kind in ("Secret", "ConfigMap") and parent and dep.parent == parent.urn and needs:
                return f"the configs of service {parent.name}: its Jobs and processes wait for all of them"
            if short_type(dep) in ("RandomPassword", "RandomBytes"):
                return "an input's value: Pulumi waits for what an input is computed from"
            where = f" in component {parent.type} {parent.name}" if parent else ""
            return f"depends_on, declared on it{where}"
        while parent is not None:
            if dep.urn in self.leaves(parent.dependencies):
                return f"inherited: its parent component {parent.type} {parent.name} depends on it"
            parent = self.by_urn.get(parent.parent)
        return "the engine's dependencies (no declaration found)"
