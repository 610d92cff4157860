"""Control-plane hardening: the Pod Security Standards restricted profile.

It applies to the program's own pods (labelled app.kubernetes.io/part-of=openstack) in
which no container holds a node role: APIs, schedulers, conductors, Jobs, memcached,
horizon. Findings are per container so that an exception (exceptions.py) can excuse one
control for one image without excusing the pod.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from policies.exceptions import EXCEPTIONS, RestrictedException, excusing
from policies.k8s import PART_OF, K8sObject, items, mapping
from policies.messages import forbidden, missing, not_allowed
from policies.node_roles import PodRoles, with_roles
from policies.podspec import ContainerRef, PodTemplate
from policies.settings import PackSettings

RESTRICTED_VOLUMES = (
    "configMap", "csi", "downwardAPI", "emptyDir", "ephemeral", "image", "persistentVolumeClaim", "projected", "secret",
)  # fmt: skip
SECCOMP_TYPES = ("RuntimeDefault", "Localhost")


@dataclass(frozen=True)
class Finding:
    control: str
    container: ContainerRef | None  # None: the pod as a whole (its volumes)
    message: str


@with_roles
def control_plane_restricted(
    obj: K8sObject,
    pod: PodTemplate,
    roles: PodRoles,
    settings: PackSettings,
    exceptions: tuple[RestrictedException, ...] = EXCEPTIONS,
) -> list[str]:
    own = pod.labels.get(PART_OF) == "openstack" or obj.labels.get(PART_OF) == "openstack"
    if not own or roles.holds_any or pod.operator:
        # Foreign workloads get the baseline; node pods get their roles; an operator's pod holds
        # only the fields the program overrides (the operator writes the rest), so the baseline.
        return []
    return [
        f.message
        for f in restricted_findings(pod)
        if f.container is None or excusing(pod, f.container, f.control, settings, exceptions) is None
    ]


def restricted_findings(pod: PodTemplate) -> list[Finding]:
    findings = _pod_level(pod)
    for container in pod.containers():
        findings += _container(pod, container)
    return findings


def _pod_level(pod: PodTemplate) -> list[Finding]:
    """What no container can excuse: the pod's volumes and an explicit runAsNonRoot: false."""
    found = []
    for index, volume in enumerate(items(pod.spec.get("volumes"))):
        subject = f"volume {mapping(volume).get('name')!r}"
        for source in mapping(volume):  # keys only: a volume is its name plus one source
            if source != "name" and source not in RESTRICTED_VOLUMES:
                allowed = "volume types " + ", ".join(RESTRICTED_VOLUMES)
                found.append(
                    Finding("volumes", None, forbidden(pod.obj, subject, pod.field("volumes", index, source), allowed))
                )
    if pod.pod_security("runAsNonRoot") is False:
        field = pod.field("securityContext", "runAsNonRoot")
        found.append(Finding("runAsNonRoot", None, not_allowed(pod.obj, "pod", field, False, "true or unset")))
    return found


def _container(pod: PodTemplate, container: ContainerRef) -> list[Finding]:
    obj, subject = pod.obj, container.subject
    found: list[Finding] = []

    def add(control: str, message: str) -> None:
        found.append(Finding(control, container, message))

    if not pod.windows:  # these three are Linux kernel features
        escalation = container.security("allowPrivilegeEscalation")
        field = container.field("securityContext", "allowPrivilegeEscalation")
        if escalation is None:
            add("allowPrivilegeEscalation", missing(obj, subject, field, "false"))
        elif escalation is not False:
            add("allowPrivilegeEscalation", not_allowed(obj, subject, field, escalation, "false"))
        found += _capabilities(pod, container)
        _inherited(pod, container, "seccompProfile", SECCOMP_TYPES, add)
    _inherited(pod, container, "runAsNonRoot", (True,), add)
    run_as_user = container.security("runAsUser")
    inherited_user = pod.pod_security("runAsUser") if run_as_user is None else None
    if run_as_user == 0 or inherited_user == 0:
        field = (
            container.field("securityContext", "runAsUser")
            if run_as_user == 0
            else pod.field("securityContext", "runAsUser")
        )
        add("runAsUser", not_allowed(obj, subject, field, 0, "a non-zero UID or unset", "UID 0 is root"))
    proc_mount = container.security("procMount")
    if proc_mount not in (None, "Default"):
        add(
            "procMount",
            not_allowed(obj, subject, container.field("securityContext", "procMount"), proc_mount, "Default or unset"),
        )
    return found


def _capabilities(pod: PodTemplate, container: ContainerRef) -> list[Finding]:
    obj, subject = pod.obj, container.subject
    found = []
    drop = items(container.security("capabilities", "drop"))
    if "ALL" not in drop:
        field = container.field("securityContext", "capabilities", "drop")
        message = (
            missing(obj, subject, field, "a list containing ALL")
            if not drop
            else not_allowed(obj, subject, field, drop, "a list containing ALL")
        )
        found.append(Finding("capabilities", container, message))
    for index, capability in enumerate(items(container.security("capabilities", "add"))):
        if capability != "NET_BIND_SERVICE":
            field = container.field("securityContext", "capabilities", "add", index)
            found.append(
                Finding(
                    "capabilities", container, not_allowed(obj, subject, field, capability, "NET_BIND_SERVICE only")
                )
            )
    return found


def _inherited(
    pod: PodTemplate,
    container: ContainerRef,
    control: str,
    allowed: tuple[object, ...],
    add: Callable[[str, str], None],
) -> None:
    """A setting a container may inherit from the pod: judge what the container ends up with."""
    path = ("seccompProfile", "type") if control == "seccompProfile" else (control,)
    own, inherited = container.security(*path), pod.pod_security(*path)
    wanted = " or ".join("true" if a is True else str(a) for a in allowed)
    obj, subject = pod.obj, container.subject
    if own is not None:
        if own not in allowed:
            add(control, not_allowed(obj, subject, container.field("securityContext", *path), own, wanted))
    elif inherited is None:
        field = container.field("securityContext", *path)
        add(control, missing(obj, subject, field, f"{wanted}, here or in the pod's securityContext"))
    elif inherited not in allowed:
        field = pod.field("securityContext", *path)
        add(control, not_allowed(obj, subject, field, inherited, wanted, "inherited from the pod's securityContext"))
