"""The Pod Security Standards baseline controls that no node role needs, for every pod:
Windows HostProcess, AppArmor, SELinux, /proc mount, seccomp, sysctls, and probes or
lifecycle hooks aimed at another host. (Privileges, host namespaces, host ports, hostPath
and capabilities are in privileges.py and host_volumes.py, where roles may unlock them.)
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from policies.k8s import K8sObject, get, items, mapping
from policies.messages import not_allowed
from policies.podspec import ContainerRef, PodTemplate, on_pods
from policies.settings import PackSettings

APPARMOR_ANNOTATION = "container.apparmor.security.beta.kubernetes.io/"
SELINUX_TYPES = ("", "container_t", "container_init_t", "container_kvm_t", "container_engine_t")
# Namespaced sysctls the kubelet allows by default (Kubernetes 1.37).
SAFE_SYSCTLS = (
    "kernel.shm_rmid_forced", "net.ipv4.ip_local_port_range", "net.ipv4.ip_unprivileged_port_start",
    "net.ipv4.tcp_syncookies", "net.ipv4.ping_group_range", "net.ipv4.ip_local_reserved_ports",
    "net.ipv4.tcp_keepalive_time", "net.ipv4.tcp_fin_timeout", "net.ipv4.tcp_keepalive_intvl",
    "net.ipv4.tcp_keepalive_probes", "net.ipv4.tcp_rmem", "net.ipv4.tcp_wmem",
    "net.ipv4.tcp_slow_start_after_idle", "net.ipv4.tcp_notsent_lowat",
)  # fmt: skip
PROBES = ("livenessProbe", "readinessProbe", "startupProbe")
HOOKS = ("postStart", "preStop")

# (subject, field path, security context) for the pod and each container.
Context = tuple[str, str, Any]


def _contexts(pod: PodTemplate) -> Iterator[Context]:
    yield "pod", pod.field("securityContext"), pod.spec.get("securityContext")
    for container in pod.containers():
        yield container.subject, container.field("securityContext"), container.spec.get("securityContext")


@on_pods
def pod_security_baseline(obj: K8sObject, pod: PodTemplate, settings: PackSettings) -> list[str]:
    found: list[str] = []
    for subject, field, context in _contexts(pod):
        found += _context(obj, subject, field, mapping(context))
    found += _procmount(obj, pod)
    found += _apparmor_annotations(obj, pod)
    found += _sysctls(obj, pod)
    for container in pod.containers():
        found += _host_handlers(obj, container)
    return found


def _context(obj: K8sObject, subject: str, field: str, context: Any) -> list[str]:
    found = []
    host_process = get(context, "windowsOptions", "hostProcess")
    if host_process is True:
        found.append(not_allowed(obj, subject, f"{field}.windowsOptions.hostProcess", True, "false or unset"))
    apparmor = get(context, "appArmorProfile", "type")
    if apparmor is not None and apparmor not in ("RuntimeDefault", "Localhost"):
        found.append(
            not_allowed(obj, subject, f"{field}.appArmorProfile.type", apparmor, "RuntimeDefault, Localhost or unset")
        )
    selinux = mapping(get(context, "seLinuxOptions"))
    if selinux.get("type") not in (None, *SELINUX_TYPES):
        allowed = "unset or one of " + ", ".join(t or '""' for t in SELINUX_TYPES)
        found.append(not_allowed(obj, subject, f"{field}.seLinuxOptions.type", selinux.get("type"), allowed))
    for key in ("user", "role"):
        if selinux.get(key):
            found.append(not_allowed(obj, subject, f"{field}.seLinuxOptions.{key}", selinux.get(key), "empty or unset"))
    seccomp = get(context, "seccompProfile", "type")
    if seccomp == "Unconfined":
        found.append(
            not_allowed(obj, subject, f"{field}.seccompProfile.type", seccomp, "RuntimeDefault, Localhost or unset")
        )
    return found


def _procmount(obj: K8sObject, pod: PodTemplate) -> list[str]:
    # An unmasked /proc is safe only inside a user namespace (hostUsers: false).
    if pod.spec.get("hostUsers") is False:
        return []
    found = []
    for container in pod.containers():
        value = container.security("procMount")
        if value not in (None, "Default"):
            why = "only pods with hostUsers: false may unmask /proc"
            found.append(
                not_allowed(
                    obj,
                    container.subject,
                    container.field("securityContext", "procMount"),
                    value,
                    "Default or unset",
                    why,
                )
            )
    return found


def _apparmor_annotations(obj: K8sObject, pod: PodTemplate) -> list[str]:
    found = []
    annotations = pod.annotations
    for key in annotations:  # keys only: other annotations may be unknown during preview
        if not str(key).startswith(APPARMOR_ANNOTATION):
            continue
        value = annotations[key]
        if value != "runtime/default" and not str(value).startswith("localhost/"):
            field = pod.metadata_field("annotations", key)
            found.append(not_allowed(obj, "pod", field, value, "runtime/default or localhost/<profile>"))
    return found


def _sysctls(obj: K8sObject, pod: PodTemplate) -> list[str]:
    found = []
    for index, sysctl in enumerate(items(pod.pod_security("sysctls"))):
        name = get(sysctl, "name")
        if name not in SAFE_SYSCTLS:
            field = pod.field("securityContext", "sysctls", index, "name")
            found.append(not_allowed(obj, "pod", field, name, "the safe sysctls: " + ", ".join(SAFE_SYSCTLS)))
    return found


def _host_handlers(obj: K8sObject, container: ContainerRef) -> list[str]:
    """Probes and hooks must target the pod itself: a host makes the kubelet a proxy."""
    handlers = [(probe,) for probe in PROBES] + [("lifecycle", hook) for hook in HOOKS]
    found = []
    for path in handlers:
        for action in ("httpGet", "tcpSocket"):
            host = get(container.spec, *path, action, "host")
            if host:
                field = container.field(*path, action, "host")
                found.append(not_allowed(obj, container.subject, field, host, "empty or unset (the pod's own IP)"))
    return found
