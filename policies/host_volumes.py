"""hostPath volumes: an allow-list of path prefixes per node role, matched by path segment.

A volume must lie inside a host path of a role held in its pod; each container that
mounts it must itself hold a role allowing that path, read-only where the role only
reads it, and with Bidirectional propagation only where the role needs it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from components.tables.roles import HostPath
from policies.hostpaths import describe, grant_for, normalize
from policies.k8s import K8sObject, get, items, mapping
from policies.messages import not_allowed
from policies.node_roles import PodRoles, with_roles
from policies.podspec import ContainerRef, PodTemplate
from policies.settings import PackSettings


def _host_volumes(pod: PodTemplate) -> dict[str, tuple[int, Any]]:
    """hostPath volumes by name: (index, declared path)."""
    found = {}
    for index, volume in enumerate(items(pod.spec.get("volumes"))):
        host_path = get(volume, "hostPath")
        if isinstance(host_path, Mapping):
            found[str(get(volume, "name"))] = (index, host_path.get("path"))
    return found


@with_roles
def host_path_volumes(obj: K8sObject, pod: PodTemplate, roles: PodRoles, settings: PackSettings) -> list[str]:
    volumes = _host_volumes(pod)
    found = [
        message for name, (index, path) in volumes.items() if (message := _volume(obj, pod, roles, name, index, path))
    ]
    for container in pod.containers():
        for index, mount in enumerate(items(container.spec.get("volumeMounts"))):
            volume = volumes.get(str(get(mount, "name")))
            path = normalize(volume[1]) if volume and isinstance(volume[1], str) else None
            if path is not None and roles.holds_any:
                found += _mount(obj, roles, container, index, mapping(mount), path)
    return found


def _volume(obj: K8sObject, pod: PodTemplate, roles: PodRoles, name: str, index: int, declared: Any) -> str:
    field, subject = pod.field("volumes", index, "hostPath", "path"), f"volume {name!r}"
    if not roles.holds_any:
        return not_allowed(obj, subject, field, declared, "no hostPath volume", roles.why_no_roles())
    path = normalize(declared) if isinstance(declared, str) else None
    if path is None:
        return not_allowed(obj, subject, field, declared, "an absolute path", "a relative host path has no meaning")
    grants = [grant for role in roles.held() for grant in role.host_paths]
    if grant_for(path, grants) is None:
        why = f"the host paths of the roles held in node pod {roles.node_pod.name if roles.node_pod else '?'}"
        return not_allowed(obj, subject, field, declared, describe(grants), why)
    return ""


def _mount(
    obj: K8sObject, roles: PodRoles, container: ContainerRef, index: int, mount: Mapping[str, Any], path: str
) -> list[str]:
    field = container.field("volumeMounts", index, "name")
    sub_path = mount.get("subPath")
    effective = normalize(f"{path}/{sub_path}") if isinstance(sub_path, str) and sub_path else path
    volume = f"volume {mount.get('name')!r} is hostPath {effective}"
    role = roles.role(container)
    if role is None:
        why = f"{volume}; {roles.explain(container)}"
        return [not_allowed(obj, container.subject, field, mount.get("name"), "no hostPath mount", why)]
    grant = grant_for(effective or path, role.host_paths)
    if grant is None:
        allowed = "mounts under " + describe(role.host_paths)
        why = f"{volume}; role {role.name} may use only these host paths"
        return [not_allowed(obj, container.subject, field, mount.get("name"), allowed, why)]
    return _mount_mode(obj, container, container.field("volumeMounts", index), mount, grant, role.name)


def _mount_mode(
    obj: K8sObject, container: ContainerRef, field: str, mount: Mapping[str, Any], grant: HostPath, role: str
) -> list[str]:
    found = []
    read_only = mount.get("readOnly")
    if grant.read_only and read_only is not True:
        why = f"role {role} only reads {grant.path}: {grant.why}"
        found.append(not_allowed(obj, container.subject, f"{field}.readOnly", read_only or False, "true", why))
    propagation = mount.get("mountPropagation")
    if propagation == "Bidirectional" and grant.propagation != "Bidirectional":
        why = f"role {role} does not need mounts on {grant.path} to reach the host"
        found.append(
            not_allowed(
                obj, container.subject, f"{field}.mountPropagation", propagation, "None or HostToContainer", why
            )
        )
    return found
