"""The pods an object runs, and every container in them.

Rules judge pods, not kinds: a Pod, a Deployment's template, a CronJob's job template
and the pod fields of an operator's custom resource are the same thing at different
paths (layouts.py). Init and ephemeral containers count as containers everywhere: a
privilege granted to one is granted to the pod.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from policies.k8s import K8sObject, get, items, mapping
from policies.layouts import SECTIONS, PodLayout, layouts
from policies.settings import PackSettings

# Controllers that restart their pods forever: their containers serve and need readiness.
LONG_RUNNING_KINDS = ("Deployment", "StatefulSet", "DaemonSet", "ReplicaSet", "ReplicationController")


@dataclass(frozen=True)
class ContainerRef:
    section: str  # containers | initContainers | ephemeralContainers
    index: int
    spec: Mapping[str, Any]
    path: str  # e.g. spec.template.spec.containers[0]
    fixed_name: str = ""  # a container whose fields name it not (mariadb-operator's main container)

    @property
    def key(self) -> tuple[str, int]:
        return (self.section, self.index)

    @property
    def name(self) -> str:
        return str(self.fixed_name or self.spec.get("name") or f"#{self.index}")

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


class Renamed(Mapping[str, Any]):
    """A pod spec read from an object that keeps some pod fields under its own names; a value
    is read only when asked for (it may be unknown during preview)."""

    def __init__(self, source: Mapping[str, Any], names: Mapping[str, str]):
        self._source, self._names = source, names

    def _key(self, key: str) -> str:
        return self._names.get(key, key)

    def __getitem__(self, key: str) -> Any:
        return self._source[self._key(key)]

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and self._key(key) in self._source

    def __iter__(self) -> Iterator[str]:
        own = {source: key for key, source in self._names.items()}
        for key in self._source:
            if key in own:
                yield own[key]
            elif key not in self._names:  # a name the pod field took over is not the pod's
                yield key

    def __len__(self) -> int:
        return sum(1 for _ in self)


@dataclass(frozen=True)
class PodTemplate:
    obj: K8sObject
    layout: PodLayout
    metadata: Mapping[str, Any]
    spec: Mapping[str, Any]

    @property
    def labels(self) -> Mapping[str, Any]:
        return mapping(self.metadata.get("labels"))

    @property
    def annotations(self) -> Mapping[str, Any]:
        return mapping(self.metadata.get("annotations"))

    @property
    def operator(self) -> str:
        """The custom resource kind whose operator builds this pod; "" for Kubernetes' own kinds."""
        return self.layout.operator

    def field(self, *parts: str | int) -> str:
        """A path in the object's wire format, e.g. spec.template.spec.hostPID."""
        if parts and isinstance(parts[0], str):
            parts = (self.layout.names.get(parts[0], parts[0]), *parts[1:])
        return join("", *self.layout.spec, *parts)

    def metadata_field(self, *parts: str | int) -> str:
        return join("", *self.layout.metadata, *parts)

    def pod_security(self, *path: str) -> Any:
        return get(self.spec, "securityContext", *path)

    def containers(self) -> Iterator[ContainerRef]:
        counts: dict[str, int] = {}
        for place in self.layout.containers:
            found = get(self.obj.props, *place.path)
            path = join("", *place.path)
            if place.single:
                places = [(mapping(found), path)] if isinstance(found, Mapping) else []
            else:
                places = [(mapping(spec), join(path, i)) for i, spec in enumerate(items(found))]
            for spec, at in places:
                index = counts.get(place.section, 0)
                counts[place.section] = index + 1
                yield ContainerRef(place.section, index, spec, at, place.single)

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


def pod_templates(obj: K8sObject) -> tuple[PodTemplate, ...]:
    """The pods an object runs: () when it runs none (Services, ConfigMaps, unknown kinds...)."""
    pods = []
    for layout in layouts(obj):
        spec = mapping(get(obj.props, *layout.spec))
        if layout.names:
            spec = Renamed(spec, layout.names)
        pods.append(PodTemplate(obj, layout, mapping(get(obj.props, *layout.metadata)), spec))
    return tuple(pods)


def on_pods(
    check: Callable[[K8sObject, PodTemplate, PackSettings], list[str]],
) -> Callable[[K8sObject, PackSettings], list[str]]:
    """A rule over each pod an object runs; objects that run no pod pass it."""

    @functools.wraps(check)
    def rule(obj: K8sObject, settings: PackSettings) -> list[str]:
        return [message for pod in pod_templates(obj) for message in check(obj, pod, settings)]

    return rule
