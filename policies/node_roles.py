"""Which node role, if any, each container of a pod holds, judged from components/tables/roles.py.

A role is granted only when everything agrees: the object is the program's own (not
rendered by a third-party chart), a DaemonSet (node pods are DaemonSets) in the stack's
namespace, the pod's labels name a node pod of the stack's topology, and the container
runs that role's image repository.
A copied label alone grants nothing. Ephemeral containers are added by people at run
time, not declared by the table, so they never hold a role.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from components.tables.roles import NodePod, Role, node_pods
from policies.images import repository
from policies.k8s import COMPONENT, NAME, PART_OF, K8sObject
from policies.podspec import ContainerRef, PodTemplate, pod_templates
from policies.settings import PackSettings


@dataclass(frozen=True)
class PodRoles:
    node_pod: NodePod | None
    roles: Mapping[tuple[str, int], Role]  # container key → the role it holds
    refusal: str  # why the pod is no node pod; "" when it is one
    mismatches: Mapping[tuple[str, int], str]  # why a container of a node pod holds no role
    expected_images: tuple[str, ...] = ()  # the role image repositories of the node pod

    def role(self, container: ContainerRef) -> Role | None:
        return self.roles.get(container.key)

    @property
    def holds_any(self) -> bool:
        return bool(self.roles)

    def held(self) -> list[Role]:
        return list(dict.fromkeys(self.roles.values()))

    def why_no_roles(self) -> str:
        """Why no container of the pod holds a role, for pod-level violations."""
        if self.refusal or self.node_pod is None:
            return "no node role: " + self.refusal
        images = ", ".join(self.expected_images)
        return f"no node role: no container runs one of node pod {self.node_pod.name}'s role images ({images})"

    def explain(self, container: ContainerRef) -> str:
        """Why a container has the privileges it has, for violation messages."""
        role = self.role(container)
        if role is not None and self.node_pod is not None:
            return f"it holds role {role.name} of node pod {self.node_pod.name}"
        return "no node role: " + (self.refusal or self.mismatches.get(container.key, "unknown container"))


# Every node pod of components/tables/roles.py is a DaemonSet (components/nodes/nodepod.py builds them); a
# DaemonSetPatch is judged as one. No other kind may hold a node role, whatever its labels.
NODE_POD_KIND = ("apps", "DaemonSet")


def kolla_repository(image: str, settings: PackSettings) -> str:
    """Where the stack pulls a Kolla image from: its override, or the stack's registry."""
    override = settings.image_overrides.get(image)
    return repository(override) if override else f"{settings.image_registry}/{image}"


def expected_repository(role: Role, settings: PackSettings) -> str:
    return kolla_repository(role.image, settings)


def find_node_pod(service: object, component: object, settings: PackSettings) -> NodePod | None:
    return next(
        (p for p in node_pods(settings.topology) if p.service == service and p.name == component),
        None,
    )


def _refusal(template: PodTemplate, settings: PackSettings) -> str:
    obj, labels = template.obj, template.labels
    if obj.within:
        return "an item of a list holds no node role: node pods are the program's own DaemonSets"
    if obj.from_chart:
        return "rendered by a third-party Helm chart or manifest, and roles are only for the program's own objects"
    if template.operator:
        return f"the {template.operator} operator builds this pod, and roles are only for the program's DaemonSets"
    if labels.get(PART_OF) != "openstack":
        return f"the pod is not labelled {PART_OF}=openstack"
    node_pod = find_node_pod(labels.get(NAME), labels.get(COMPONENT), settings)
    if node_pod is None:
        return (
            f"pod labels {NAME}={labels.get(NAME)!r}, {COMPONENT}={labels.get(COMPONENT)!r} "
            f"name no node pod of topology {settings.topology.value}"
        )
    if (obj.group, obj.kind) != NODE_POD_KIND:
        kind = obj.type_kind
        return (
            f"node pod {node_pod.name} runs as a DaemonSet (components/tables/roles.py), "
            f"and a {kind} holds no node role"
        )
    if obj.namespace != settings.namespace:
        return f"namespace {obj.namespace!r} is not the stack's namespace {settings.namespace!r}"
    return ""


def match_roles(template: PodTemplate, settings: PackSettings) -> PodRoles:
    refusal = _refusal(template, settings)
    if refusal:
        return PodRoles(None, {}, refusal, {})
    node_pod = find_node_pod(template.labels.get(NAME), template.labels.get(COMPONENT), settings)
    assert node_pod is not None  # _refusal found it
    by_repository = {expected_repository(role, settings): role for role in node_pod.roles}
    roles: dict[tuple[str, int], Role] = {}
    mismatches: dict[tuple[str, int], str] = {}
    for container in template.containers():
        if container.ephemeral:
            mismatches[container.key] = "ephemeral containers never hold a node role"
            continue
        role = by_repository.get(repository(container.image))
        if role is None:
            mismatches[container.key] = (
                f"image repository {repository(container.image)!r} is none of node pod {node_pod.name}'s "
                f"role images ({', '.join(by_repository)})"
            )
        else:
            roles[container.key] = role
    return PodRoles(node_pod, roles, "", mismatches, tuple(by_repository))


def judge(obj: K8sObject, settings: PackSettings) -> list[tuple[PodTemplate, PodRoles]]:
    """Each pod an object runs with the roles its containers hold; [] if it runs none."""
    return [(template, match_roles(template, settings)) for template in pod_templates(obj)]


RoleCheck = Callable[..., list[str]]  # (obj, pod, roles, settings, *extra) -> messages


def with_roles(check: RoleCheck) -> Callable[..., list[str]]:
    """A rule over each pod an object runs and the roles its containers hold (rule(obj, settings))."""

    @functools.wraps(check)
    def rule(obj: K8sObject, settings: PackSettings, *extra: Any) -> list[str]:
        return [message for judged in judge(obj, settings) for message in check(obj, *judged, settings, *extra)]

    return rule
