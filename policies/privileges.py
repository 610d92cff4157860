"""Privileged containers, host namespaces, host ports and added capabilities.

Each is allowed only to a container holding a node role that needs it (node_roles.py);
everything else is held to the Pod Security Standards baseline.
"""

from __future__ import annotations

from policies.k8s import K8sObject, get, items
from policies.messages import not_allowed
from policies.node_roles import PodRoles, with_roles
from policies.podspec import PodTemplate
from policies.settings import PackSettings

# The capabilities the Pod Security Standards baseline lets any container add (exact names).
BASELINE_CAPABILITIES = (
    "AUDIT_WRITE", "CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "KILL", "MKNOD",
    "NET_BIND_SERVICE", "SETFCAP", "SETGID", "SETPCAP", "SETUID", "SYS_CHROOT",
)  # fmt: skip
HOST_NAMESPACES = {"hostNetwork": "host_network", "hostPID": "host_pid", "hostIPC": "host_ipc"}


@with_roles
def privileged_containers(obj: K8sObject, pod: PodTemplate, roles: PodRoles, settings: PackSettings) -> list[str]:
    found = []
    for container in pod.containers():
        value = container.security("privileged")
        role = roles.role(container)
        if value is not True or (role is not None and role.privileged):
            continue
        why = roles.explain(container) if role is None else f"role {role.name} does not need it: {role.why}"
        field = container.field("securityContext", "privileged")
        found.append(not_allowed(obj, container.subject, field, value, "false or unset", why))
    return found


def host_namespace_refusal(pod: PodTemplate, roles: PodRoles, field: str, settings: PackSettings) -> str:
    """Why the pod may not share a host namespace; "" when one of its roles needs it."""
    if roles.node_pod is None or not roles.holds_any:
        return roles.why_no_roles()
    if not any(getattr(role, HOST_NAMESPACES[field]) for role in roles.held()):
        return f"no role held in node pod {roles.node_pod.name} needs {field} under topology {settings.topology.value}"
    for container in pod.containers():
        if roles.role(container) is None:
            return f"{container.subject} would share it without needing it ({roles.explain(container)})"
    return ""


@with_roles
def host_namespaces(obj: K8sObject, pod: PodTemplate, roles: PodRoles, settings: PackSettings) -> list[str]:
    found = []
    for field in HOST_NAMESPACES:
        value = pod.spec.get(field)
        why = host_namespace_refusal(pod, roles, field, settings) if value is True else ""
        if why:
            found.append(not_allowed(obj, "pod", pod.field(field), value, "false or unset", why))
    return found


@with_roles
def host_ports(obj: K8sObject, pod: PodTemplate, roles: PodRoles, settings: PackSettings) -> list[str]:
    # A host-network pod listens on the host anyway; the kubelet sets hostPort = containerPort.
    on_host_network = pod.spec.get("hostNetwork") is True
    host_network_refusal = host_namespace_refusal(pod, roles, "hostNetwork", settings) if on_host_network else ""
    found = []
    for container in pod.containers():
        for index, port in enumerate(items(container.spec.get("ports"))):
            host_port = get(port, "hostPort")
            if not host_port:
                continue
            if on_host_network and not host_network_refusal:
                if host_port == get(port, "containerPort"):
                    continue
                allowed, why = (
                    "0, unset, or equal to containerPort",
                    "a host-network pod's ports are its container ports",
                )
            else:
                allowed = "0 or unset"
                why = host_network_refusal or roles.explain(container)
            field = container.field("ports", index, "hostPort")
            found.append(not_allowed(obj, container.subject, field, host_port, allowed, why))
    return found


@with_roles
def added_capabilities(obj: K8sObject, pod: PodTemplate, roles: PodRoles, settings: PackSettings) -> list[str]:
    found = []
    for container in pod.containers():
        role = roles.role(container)
        extra = role.capabilities if role is not None else ()
        for index, capability in enumerate(items(container.security("capabilities", "add"))):
            if capability in BASELINE_CAPABILITIES or capability in extra:
                continue
            if role is None:
                why = roles.explain(container)
            else:
                why = f"role {role.name} needs only {', '.join(extra) or 'the baseline set'}"
            field = container.field("securityContext", "capabilities", "add", index)
            allowed = ", ".join((*BASELINE_CAPABILITIES, *extra))
            found.append(not_allowed(obj, container.subject, field, capability, allowed, why))
    return found
