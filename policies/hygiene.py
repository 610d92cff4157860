"""Workload hygiene: resources, readiness probes and pinned images.

Requests let the scheduler place pods and limits keep one from starving a node; a
readiness probe keeps traffic off a process that is not serving yet; an unpinned image
changes under a running cloud at the next pull. An operator's pod (layouts.py) is left out:
the custom resource holds only what the program overrides, the operator writes the rest.
"""

from __future__ import annotations

from collections.abc import Mapping

from policies.images import parse_image
from policies.k8s import K8sObject, get, mapping
from policies.messages import missing, not_allowed
from policies.node_roles import PodRoles, with_roles
from policies.podspec import PodTemplate, on_pods
from policies.settings import PackSettings


@with_roles
def resource_requests_limits(obj: K8sObject, pod: PodTemplate, roles: PodRoles, settings: PackSettings) -> list[str]:
    if pod.operator:
        return []
    found = []
    for container in pod.containers():
        if container.ephemeral:
            continue  # the API forbids resources on ephemeral containers
        resources = mapping(container.spec.get("resources"))
        role = roles.role(container)
        # A container that holds the node's guests (libvirt) has no limits: one would cap every VM.
        limits = () if role is not None and role.hosts_guests else settings.required_limits
        for kind, required in (("requests", settings.required_requests), ("limits", limits)):
            for resource in required:
                if get(resources, kind, resource) in (None, ""):
                    field = container.field("resources", kind, resource)
                    found.append(
                        missing(obj, container.subject, field, f"a quantity (required {kind}: {', '.join(required)})")
                    )
    return found


@on_pods
def readiness_probes(obj: K8sObject, pod: PodTemplate, settings: PackSettings) -> list[str]:
    if pod.operator:
        return []
    found = []
    for container in pod.containers():
        if pod.runs_long(container) and not isinstance(container.spec.get("readinessProbe"), Mapping):
            why = "it serves for the pod's whole life; Jobs and plain init containers need none"
            found.append(missing(obj, container.subject, container.field("readinessProbe"), "a probe", why))
    return found


@on_pods
def image_pinned(obj: K8sObject, pod: PodTemplate, settings: PackSettings) -> list[str]:
    if pod.operator:
        return []
    found = []
    for container in pod.containers():
        field = container.field("image")
        if not container.image:
            found.append(missing(obj, container.subject, field, "an image pinned by tag or digest"))
        elif not parse_image(container.image).pinned:
            why = "an untagged image means latest, which changes under a running cloud"
            found.append(
                not_allowed(
                    obj,
                    container.subject,
                    field,
                    container.image,
                    "<image>:<tag other than latest> or <image>@<digest>",
                    why,
                )
            )
    return found
