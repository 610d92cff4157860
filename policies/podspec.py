"""Where the pod is in every workload kind, and every container in it.

Rules judge pods, not kinds: a Pod, a Deployment's template and a CronJob's job
template are the same thing at different paths. Init and ephemeral containers count
as containers everywhere: a privilege granted to one is granted to the pod.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from policies.k8s import K8sObject, get, items, mapping
from policies.settings import PackSettings

# Where each kind keeps its pod template (None: the object is the pod).
TEMPLATE_PATHS: dict[str, tuple[str, ...] | None] = {
    "Pod": None,
    "Deployment": ("spec", "template"),
    "StatefulSet": ("spec", "template"),
    "DaemonSet": ("spec", "template"),
    "ReplicaSet": ("spec", "template"),
    "ReplicationController": ("spec", "template"),
    "Job": ("spec", "template"),
    "CronJob": ("spec", "jobTemplate", "spec", "template"),
    "PodTemplate": ("template",),
}
WORKLOAD_GROUPS = ("core", "apps", "extensions", "batch")
# Controllers that restart their pods forever: their containers serve and need readiness.
LONG_RUNNING_KINDS = ("Deployment", "StatefulSet", "DaemonSet", "ReplicaSet", "ReplicationController")
SECTIONS = {"containers": "container", "initContainers": "init container", "ephemeralContainers": "ephemeral container"}


@dataclass(frozen=True)
class ContainerRef:
    section: str  # containers | initContainers | ephemeralContainers
    index: int
    spec: Mapping[str, Any]
    path: str  # e.g. spec.template.spec.containers[0]

    @property
    def key(self) -> tuple[str, int]:
        return (self.section, self.index)

    @property
    def name(self) -> str:
        return str(self.spec.get("name") or f"#{self.index}")

    @property
    def image(self) -> str:
        image = self.spec.get("image")
        return image if isinstance(image, str) else ""

    @property
    def ephemeral(self) -> bool:
        return self.section == "ephemeralContainers"

    @property
    def sidecar(self) -> bool:
        """An init container with restartPolicy Always runs beside the app for the pod's life."""
        return self.section == "initContainers" and self.spec.get("restartPolicy") == "Always"

    @property
    def subject(self) -> str:
        return f"{SECTIONS[self.section]} {self.name!r}"

    def field(self, *parts: str | int) -> str:
        return join(self.path, *parts)

    def security(self, *path: str) -> Any:
        return get(self.spec, "securityContext", *path)


@dataclass(frozen=True)
class PodTemplate:
    obj: K8sObject
    prefix: str  # path of the pod object: "" for a Pod, "spec.template" for a Deployment
    metadata: Mapping[str, Any]
    spec: Mapping[str, Any]

    @property
    def labels(self) -> Mapping[str, Any]:
        return mapping(self.metadata.get("labels"))

    @property
    def annotations(self) -> Mapping[str, Any]:
        return mapping(self.metadata.get("annotations"))

    def field(self, *parts: str | int) -> str:
        """A path in the object's wire format, e.g. spec.template.spec.hostPID."""
        return join(self.prefix, "spec", *parts)

    def metadata_field(self, *parts: str | int) -> str:
        return join(self.prefix, "metadata", *parts)

    def pod_security(self, *path: str) -> Any:
        return get(self.spec, "securityContext", *path)

    def containers(self) -> Iterator[ContainerRef]:
        for section in SECTIONS:
            for index, spec in enumerate(items(self.spec.get(section))):
                yield ContainerRef(section, index, mapping(spec), self.field(section, index))

    @property
    def windows(self) -> bool:
        return get(self.spec, "os", "name") == "windows"

    @property
    def long_running(self) -> bool:
        if self.obj.kind in LONG_RUNNING_KINDS:
            return True
        if self.obj.kind == "Pod":
            return self.spec.get("restartPolicy") in (None, "Always")
        return False  # Jobs, CronJobs and bare templates run to completion or are not pods yet

    def runs_long(self, container: ContainerRef) -> bool:
        """Whether a container serves for the pod's life (and so needs a readiness probe)."""
        if container.ephemeral or not self.long_running:
            return False
        return container.section == "containers" or container.sidecar


def join(prefix: str, *parts: str | int) -> str:
    path = prefix
    for part in parts:
        if isinstance(part, int):
            path += f"[{part}]"
        else:
            path = f"{path}.{part}" if path else part
    return path


def judges(obj: K8sObject) -> bool:
    """Whether the pack knows where an object of this kind keeps its pod, if it runs one."""
    return obj.group in WORKLOAD_GROUPS and obj.kind in TEMPLATE_PATHS


def judged_kinds() -> str:
    """The kinds whose pods the rules judge, for messages."""
    return f"{', '.join(TEMPLATE_PATHS)} ({', '.join(WORKLOAD_GROUPS)}) and their *Patch types"


def pod_template(obj: K8sObject) -> PodTemplate | None:
    """The pod an object runs, or None when it runs none (Services, ConfigMaps, CRs...)."""
    if not judges(obj):
        return None
    path = TEMPLATE_PATHS[obj.kind]
    pod = obj.props if path is None else mapping(get(obj.props, *path))
    prefix = "" if path is None else join("", *path)
    return PodTemplate(obj, prefix, mapping(pod.get("metadata")), mapping(pod.get("spec")))


def on_pods(
    check: Callable[[K8sObject, PodTemplate, PackSettings], list[str]],
) -> Callable[[K8sObject, PackSettings], list[str]]:
    """A rule over the pod an object runs; objects that run no pod pass it."""

    @functools.wraps(check)
    def rule(obj: K8sObject, settings: PackSettings) -> list[str]:
        pod = pod_template(obj)
        return [] if pod is None else check(obj, pod, settings)

    return rule
