"""Pod, container and workload manifests, written once for every service.

Builders return Kubernetes wire-format dicts (camelCase, as in YAML), so what the
program declares reads like the manifests an operator already knows. Control-plane
pods are built to the Pod Security Standards' restricted profile.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from components.settings import scheduling
from components.settings.model import Resources, Settings

Manifest = dict[str, Any]


@dataclass(frozen=True)
class Mount:
    """One file or directory from a Secret, ConfigMap, emptyDir or PVC, mounted in a container."""

    volume: str
    path: str
    sub_path: str | None = None
    read_only: bool = True
    propagation: str | None = None  # e.g. Bidirectional, for mounts that must reach the host


@dataclass(frozen=True)
class Probe:
    port: int | None = None
    http_path: str | None = None  # None probes the TCP port
    command: tuple[str, ...] = ()  # an exec probe, for daemons that serve no port (or a check TCP cannot make)
    initial_delay: int = 10
    period: int = 15
    https: bool = False  # an httpGet over TLS (the kubelet does not verify the certificate)
    # Liveness asks the readiness path too: for a controller whose health endpoint reports its own
    # loop (nova-compute-maintenance's /healthz), not for a server whose workers may all be busy.
    liveness_asks_health: bool = False

    def liveness(self) -> Manifest | None:
        """The liveness probe: alive while the port accepts connections, whatever the readiness check asks.

        An HTTP API answers its readiness check only when a worker is free; the kernel accepts its
        connections while the server runs. The lab's apply on staging saw nova-api's two uWSGI workers
        wait 60 s each on console-URL calls to a stopping nova-compute: its HTTPS liveness check timed
        out and the kubelet restarted nova-api, turning slow calls into refused ones. Readiness takes a
        busy server out of its Service; liveness restarts only a server whose port is gone. (openstack-
        helm checks liveness over HTTP like readiness; kolla-ansible's healthchecks restart nothing.)
        A daemon checked by a command alone (an RPC server's broker connection, which oslo.messaging
        retries) gets no liveness probe: not ready, but not dead.
        """
        if self.port is None:
            return None
        if self.command:  # a server checked by a command (memcached over TLS): its port, at the defaults
            return Probe(self.port).manifest(liveness=True)
        if self.liveness_asks_health:
            return self.manifest(liveness=True)
        return Probe(self.port, initial_delay=self.initial_delay, period=self.period).manifest(liveness=True)

    def manifest(self, *, liveness: bool) -> Manifest:
        action: Manifest
        if self.command:
            action = {"exec": {"command": list(self.command)}}
        elif self.http_path:
            action = {"httpGet": {"path": self.http_path, "port": self.port}}
            if self.https:
                action["httpGet"]["scheme"] = "HTTPS"
        else:
            action = {"tcpSocket": {"port": self.port}}
        # Liveness is slower to fire than readiness: a busy API must not be killed for being slow.
        return {
            **action,
            "initialDelaySeconds": self.initial_delay * (3 if liveness else 1),
            "periodSeconds": self.period * (2 if liveness else 1),
            "timeoutSeconds": 5,
            "failureThreshold": 3,
        }


@dataclass(frozen=True)
class Container:
    name: str
    image: str
    command: tuple[str, ...]
    env: tuple[Manifest, ...] = ()
    mounts: tuple[Mount, ...] = ()
    probe: Probe | None = None
    ports: tuple[int, ...] = ()
    resources: Resources = field(default_factory=Resources)
    security_context: Manifest | None = None  # None: the restricted profile
    lifecycle: Manifest | None = None
    limited: bool = True  # False: requests only (a container whose cgroup holds the node's guests)

    def manifest(self) -> Manifest:
        spec: Manifest = {
            "name": self.name,
            "image": self.image,
            "imagePullPolicy": "IfNotPresent",
            # As arguments of the image's own entrypoint, Kolla's `dumb-init --single-child --`: PID 1
            # of the container then reaps what daemons leave behind (libvirtd's QEMU probes, the
            # agents' dnsmasq, haproxy and keepalived), and forwards signals. A `command` would
            # replace the entrypoint and leave the daemon as PID 1, which reaps nothing.
            "args": list(self.command),
            "resources": resources_manifest(self.resources, limits=self.limited),
            "securityContext": self.security_context or RESTRICTED_CONTAINER,
        }
        if self.env:
            spec["env"] = list(self.env)
        if self.ports:
            spec["ports"] = [{"containerPort": p, "protocol": "TCP"} for p in self.ports]
        if self.mounts:
            spec["volumeMounts"] = [_mount(m) for m in self.mounts]
        if self.probe:
            spec["readinessProbe"] = self.probe.manifest(liveness=False)
            spec["livenessProbe"] = self.probe.liveness()
            if spec["livenessProbe"] is None:
                del spec["livenessProbe"]
        if self.lifecycle:
            spec["lifecycle"] = self.lifecycle
        return spec


RESTRICTED_CONTAINER: Manifest = {
    "allowPrivilegeEscalation": False,
    "capabilities": {"drop": ["ALL"]},
    "runAsNonRoot": True,
}


def restricted_pod(uid: int) -> Manifest:
    return {
        "runAsNonRoot": True,
        "runAsUser": uid,
        "runAsGroup": uid,
        "fsGroup": uid,
        "seccompProfile": {"type": "RuntimeDefault"},
    }


def resources_manifest(resources: Resources, limits: bool = True) -> Manifest:
    manifest: Manifest = {"requests": {"cpu": resources.requests_cpu, "memory": resources.requests_memory}}
    if limits:
        manifest["limits"] = {"cpu": resources.limits_cpu, "memory": resources.limits_memory}
    return manifest


def _mount(mount: Mount) -> Manifest:
    spec: Manifest = {"name": mount.volume, "mountPath": mount.path, "readOnly": mount.read_only}
    if mount.sub_path:
        spec["subPath"] = mount.sub_path
    if mount.propagation:
        spec["mountPropagation"] = mount.propagation
    return spec


def secret_env(name: str, secret: str, key: str) -> Manifest:
    """An environment variable read from a Secret: passwords never appear as literals."""
    return {"name": name, "valueFrom": {"secretKeyRef": {"name": secret, "key": key}}}


def env(name: str, value: str) -> Manifest:
    return {"name": name, "value": value}


def secret_volume(name: str, secret: str) -> Manifest:
    return {"name": name, "secret": {"secretName": secret, "defaultMode": 0o440}}


def scratch(name: str, size: str, path: str) -> tuple[Manifest, Mount]:
    """Scratch space of a stated size at `path`: an emptyDir whose sizeLimit the kubelet enforces (it
    evicts a pod that writes more), rather than the container's writable layer, which no setting sizes
    and which fills the node's image disk. A directory mount (no subPath, whose directories the kubelet
    would create as root), writable by the pod's fsGroup."""
    return {"name": name, "emptyDir": {"sizeLimit": size}}, Mount(name, path, read_only=False)


def config_map_volume(name: str, config_map: str, mode: int = 0o555) -> Manifest:
    return {"name": name, "configMap": {"name": config_map, "defaultMode": mode}}


@dataclass(frozen=True)
class PodSpec:
    """What differs between pods; everything else (security, placement, HA) is derived."""

    service: str
    component: str
    containers: tuple[Container, ...]
    volumes: tuple[Manifest, ...] = ()
    uid: int | None = None  # restricted pods run as this user
    node_selector: dict[str, str] = field(default_factory=dict)
    tolerations: tuple[Manifest, ...] = ()
    priority_class: str | None = None
    object_labels: dict[str, str] = field(default_factory=dict)  # the workload object's, not its pods'

    annotations: dict[str, Any] = field(default_factory=dict)
    init_containers: tuple[Container, ...] = ()
    pod_overrides: Manifest = field(default_factory=dict)  # hostNetwork etc. for node pods
    restart_policy: str | None = None
    termination_grace: int | None = None
    spread: bool = False  # anti-affinity across nodes (HA)
    extra_labels: dict[str, str] = field(default_factory=dict)  # also part of the selector
    service_account: str | None = None  # mounts its token; no token without one

    def labels(self) -> dict[str, str]:
        from components.mechanism.meta import labels

        return labels(self.service, self.component, **self.extra_labels)

    def selector(self) -> dict[str, str]:
        from components.mechanism.meta import selector

        return selector(self.service, self.component, **self.extra_labels)

    def template(self) -> Manifest:
        spec: Manifest = {
            "containers": [c.manifest() for c in self.containers],
            "enableServiceLinks": False,
            "automountServiceAccountToken": self.service_account is not None,
        }
        if self.service_account:
            spec["serviceAccountName"] = self.service_account
        if self.uid is not None:
            spec["securityContext"] = restricted_pod(self.uid)
        if self.init_containers:
            spec["initContainers"] = [c.manifest() for c in self.init_containers]
        if self.volumes:
            spec["volumes"] = list(self.volumes)
        if self.node_selector:
            spec["nodeSelector"] = dict(self.node_selector)
        if self.tolerations:
            spec["tolerations"] = [dict(t) for t in self.tolerations]
        if self.priority_class:
            spec["priorityClassName"] = self.priority_class
        if self.restart_policy:
            spec["restartPolicy"] = self.restart_policy
        if self.termination_grace is not None:
            spec["terminationGracePeriodSeconds"] = self.termination_grace
        if self.spread:
            spec["affinity"] = {
                "podAntiAffinity": {
                    "preferredDuringSchedulingIgnoredDuringExecution": [
                        {
                            "weight": 100,
                            "podAffinityTerm": {
                                "topologyKey": "kubernetes.io/hostname",
                                "labelSelector": {"matchLabels": self.selector()},
                            },
                        }
                    ]
                }
            }
        spec.update(self.pod_overrides)
        metadata: Manifest = {"labels": self.labels()}
        if self.annotations:
            metadata["annotations"] = dict(self.annotations)
        return {"metadata": metadata, "spec": spec}


def control_plane_pod(settings: Settings, **kwargs: Any) -> PodSpec:
    return PodSpec(
        node_selector=settings.node_selectors.control_plane,
        tolerations=tuple(scheduling.manifests(settings.tolerations.control_plane)),
        spread=settings.ha,
        **kwargs,
    )
