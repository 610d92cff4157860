"""From a workload's pod template in the plan to runnable containers, as the kubelet resolves it.

Volumes are materialised (Secrets and ConfigMaps as files with their modes and the pod's
fsGroup, emptyDirs, claims, the node's hostPaths), environment variables resolved (values with
$(VAR) expansion, Secret and ConfigMap keys, the downward API), and each container's user,
groups, capabilities and privilege taken from the pod's and the container's securityContext
over the image's defaults.
"""

from __future__ import annotations

import base64
import hashlib
import os
import re
import shutil
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tools.cloud.container import DEFAULT_CAPABILITIES, Container, Mount, Security
from tools.cloud.images import KOLLA_USERS, KOLLA_VENV, LANG, TOOLBOX_VENV, build_layer, kolla_image, user_groups
from tools.cloud.node import Node

Manifest = dict[str, Any]
# Secret or ConfigMap name → its data, as the pod would see it.
ObjectLookup = Callable[[str, str], Mapping[str, str]]

_VAR_REF = re.compile(r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)")


class PodSpecError(ValueError):
    """The kubelet would refuse this pod (CreateContainerConfigError and friends)."""


@dataclass(frozen=True)
class Probe:
    kind: str  # httpGet, tcpSocket or exec
    port: int = 0
    path: str = "/"
    command: tuple[str, ...] = ()
    headers: tuple[tuple[str, str], ...] = ()
    initial_delay: float = 0
    period: float = 10
    timeout: float = 1
    failure_threshold: int = 3
    success_threshold: int = 1

    @classmethod
    def parse(cls, manifest: Manifest | None) -> Probe | None:
        if not manifest:
            return None
        timing = dict(
            initial_delay=manifest.get("initialDelaySeconds", 0),
            period=manifest.get("periodSeconds", 10),
            timeout=manifest.get("timeoutSeconds", 1),
            failure_threshold=manifest.get("failureThreshold", 3),
            success_threshold=manifest.get("successThreshold", 1),
        )
        if "httpGet" in manifest:
            http = manifest["httpGet"]
            headers = tuple((h["name"], h["value"]) for h in http.get("httpHeaders", []))
            return cls("httpGet", int(http["port"]), http.get("path", "/"), headers=headers, **timing)
        if "tcpSocket" in manifest:
            return cls("tcpSocket", int(manifest["tcpSocket"]["port"]), **timing)
        if "exec" in manifest:
            return cls("exec", command=tuple(manifest["exec"]["command"]), **timing)
        raise PodSpecError(f"probe {manifest} has no handler this kubelet knows")


@dataclass
class ContainerPlan:
    container: Container
    readiness: Probe | None
    liveness: Probe | None
    pre_stop: tuple[str, ...] = ()


@dataclass
class PodPlan:
    name: str
    kind: str  # the workload's kind
    workload: str
    ip: str
    host_network: bool
    host_pid: bool
    init_containers: list[ContainerPlan]
    containers: list[ContainerPlan]
    restart_policy: str
    grace: float
    labels: dict[str, str] = field(default_factory=dict)


@dataclass
class PodFactory:
    node: Node
    venv: Path
    objects: ObjectLookup
    hosts_file: Callable[[str, str], str]  # (hostname, ip) → /etc/hosts text
    logs: Path  # where container logs go
    namespace: str = "openstack"

    def pod_name(self, kind: str, workload: str, index: int = 0) -> str:
        if kind == "StatefulSet":
            return f"{workload}-{index}"
        digest = hashlib.sha256(f"{kind}/{workload}/{index}".encode()).hexdigest()
        middle = f"{digest[:9]}-" if kind == "Deployment" else ""
        return f"{workload}-{middle}{digest[-5:]}"

    def build(self, kind: str, workload: str, template: Manifest, name: str, ip: str) -> PodPlan:
        spec = template["spec"]
        host_network = bool(spec.get("hostNetwork"))
        pod_dir = self.node.state / "pods" / name
        if pod_dir.exists():
            shutil.rmtree(pod_dir)  # a new pod starts from its volumes' sources, not an old pod's files
        pod_dir.mkdir(parents=True)
        hostname = self.node.name if host_network else name
        address = self.node.ip if host_network else ip
        netns = self.node.netns_path if host_network else f"/run/netns/pod-{name}"
        pod_sc = spec.get("securityContext") or {}
        fs_group = pod_sc.get("fsGroup")
        volumes = {v["name"]: self._volume(v, pod_dir / "volumes", fs_group) for v in spec.get("volumes", [])}
        hosts = pod_dir / "etc-hosts"
        hosts.write_text(self.hosts_file(hostname, address))
        context = _PodContext(
            name, hostname, address, self.node, volumes, hosts, netns, bool(spec.get("hostPID")), pod_sc, pod_dir
        )
        build = lambda c: self._container(context, c)  # noqa: E731
        return PodPlan(
            name=name,
            kind=kind,
            workload=workload,
            ip=address,
            host_network=host_network,
            host_pid=bool(spec.get("hostPID")),
            init_containers=[build(c) for c in spec.get("initContainers", [])],
            containers=[build(c) for c in spec["containers"]],
            restart_policy=spec.get("restartPolicy", "Always"),
            grace=float(spec.get("terminationGracePeriodSeconds", 30)),
            labels=dict((template.get("metadata") or {}).get("labels") or {}),
        )

    # -- volumes ---------------------------------------------------------------------------------

    def _volume(self, volume: Manifest, base: Path, fs_group: int | None) -> Path:
        name = volume["name"]
        target = base / name
        if "secret" in volume or "configMap" in volume:
            kind, source = ("Secret", volume["secret"]) if "secret" in volume else ("ConfigMap", volume["configMap"])
            reference = source.get("secretName") or source.get("name")
            data = self.objects(kind, reference)
            items = {i["key"]: i["path"] for i in source.get("items", [])} or {k: k for k in data}
            target.mkdir(parents=True)
            for key, path in items.items():
                file = target / path
                file.parent.mkdir(parents=True, exist_ok=True)
                file.write_text(data[key])
                # The kubelet gives the files the pod's fsGroup, so its non-root users can read them.
                os.chown(file, 0, fs_group or 0)
                file.chmod(source.get("defaultMode", 0o644))
            return target
        if "emptyDir" in volume:
            target.mkdir(parents=True)
            target.chmod(0o777)
            return target
        if "persistentVolumeClaim" in volume:
            claim = self.node.state / "claims" / volume["persistentVolumeClaim"]["claimName"]
            claim.mkdir(parents=True, exist_ok=True)
            if fs_group is not None:
                # The kubelet makes a volume's files the fsGroup's, group-writable, setgid.
                os.chown(claim, 0, fs_group)
                claim.chmod(0o2775)
            return claim
        if "hostPath" in volume:
            path = self.node.host_path(volume["hostPath"]["path"])
            kind = volume["hostPath"].get("type", "")
            if kind == "DirectoryOrCreate":
                path.mkdir(parents=True, exist_ok=True)
            elif not path.exists():
                raise PodSpecError(f"hostPath {volume['hostPath']['path']} (type {kind or 'unset'}) does not exist")
            return path
        raise PodSpecError(f"volume {name}: kind {sorted(set(volume) - {'name'})} is not reproduced here")

    # -- containers ------------------------------------------------------------------------------

    def _container(self, pod: _PodContext, manifest: Manifest) -> ContainerPlan:
        image = kolla_image(manifest["image"])
        security = _security(pod.security_context, manifest.get("securityContext") or {}, image.user, manifest)
        env = {
            "PATH": image.path,
            "LANG": LANG,
            "HOSTNAME": pod.hostname,
            "HOME": _home(security.uid),
        }
        env.update(self._env(pod, manifest.get("env", []), env))
        command = [_expand(arg, env) for arg in [*manifest.get("command", []), *manifest.get("args", [])]]
        if not command:
            raise PodSpecError(f"{pod.name}/{manifest['name']}: no command (the image's CMD is not reproduced)")
        mounts = [self._mount(pod, m) for m in manifest.get("volumeMounts", [])]
        mounts += [Mount(pod.hosts, "/etc/hosts", read_only=False)]
        venvs = {}
        if image.venv == KOLLA_VENV:
            venvs[KOLLA_VENV] = self.venv
        elif image.venv == TOOLBOX_VENV:
            venvs[TOOLBOX_VENV] = self.venv
        layer_name = manifest["image"].rsplit("/", 1)[-1].split(":")[0]
        layer = build_layer(image, self.venv, self.node.state / "images" / layer_name)
        limits = (manifest.get("resources") or {}).get("limits") or {}
        container = Container(
            pod=pod.name,
            name=manifest["name"],
            command=command,
            env=env,
            layer=layer,
            venv_mounts=venvs,
            mounts=mounts,
            security=security,
            netns_path=pod.netns,
            host_pid=pod.host_pid,
            hostname=pod.hostname,
            cgroups=self.node.cgroup_dirs(pod.name, manifest["name"]),
            state=pod.directory / "containers" / manifest["name"],
            log=self.logs / pod.name / f"{manifest['name']}.log",
            memory_limit=_bytes(limits["memory"]) if "memory" in limits else None,
            cpu_limit_millis=_millis(limits["cpu"]) if "cpu" in limits else None,
            working_dir=manifest.get("workingDir", "/"),
        )
        pre_stop = ((manifest.get("lifecycle") or {}).get("preStop") or {}).get("exec", {}).get("command", [])
        return ContainerPlan(
            container,
            Probe.parse(manifest.get("readinessProbe")),
            Probe.parse(manifest.get("livenessProbe")),
            tuple(pre_stop),
        )

    def _mount(self, pod: _PodContext, manifest: Manifest) -> Mount:
        source = pod.volumes[manifest["name"]]
        if "subPath" in manifest:
            source = source / manifest["subPath"]
            if not source.exists():
                # The kubelet creates a missing subPath of a writable volume as a directory.
                source.mkdir(parents=True)
        return Mount(source, manifest["mountPath"], bool(manifest.get("readOnly")), manifest.get("mountPropagation"))

    def _env(self, pod: _PodContext, entries: list[Manifest], base: dict[str, str]) -> dict[str, str]:
        resolved: dict[str, str] = {}
        for entry in entries:
            name = entry["name"]
            if "value" in entry:
                resolved[name] = _expand(str(entry["value"]), {**base, **resolved})
                continue
            source = entry["valueFrom"]
            if "secretKeyRef" in source or "configMapKeyRef" in source:
                kind, ref = ("Secret", source["secretKeyRef"]) if "secretKeyRef" in source else (
                    "ConfigMap", source["configMapKeyRef"])  # fmt: skip
                resolved[name] = self.objects(kind, ref["name"])[ref["key"]]
            elif "fieldRef" in source:
                resolved[name] = self._field(pod, source["fieldRef"]["fieldPath"])
            else:
                raise PodSpecError(f"env {name}: {sorted(source)} is not reproduced here")
        return resolved

    def _field(self, pod: _PodContext, path: str) -> str:
        fields = {
            "status.hostIP": self.node.ip,
            "status.podIP": pod.ip,
            "metadata.name": pod.name,
            "metadata.namespace": self.namespace,
            "spec.nodeName": self.node.name,
        }
        if path not in fields:
            raise PodSpecError(f"downward API field {path} is not reproduced here")
        return fields[path]


@dataclass(frozen=True)
class _PodContext:
    name: str
    hostname: str
    ip: str
    node: Node
    volumes: dict[str, Path]
    hosts: Path
    netns: str
    host_pid: bool
    security_context: Manifest
    directory: Path


def _security(pod: Manifest, container: Manifest, image_user: str | None, manifest: Manifest) -> Security:
    image_uid = KOLLA_USERS[image_user] if image_user else 0
    pod_uid: int = pod.get("runAsUser", image_uid)
    uid: int = container.get("runAsUser", pod_uid)
    pod_gid: int = pod.get("runAsGroup", uid if uid in KOLLA_USERS.values() else 0)
    gid: int = container.get("runAsGroup", pod_gid)
    if container.get("runAsNonRoot", pod.get("runAsNonRoot")) and uid == 0:
        raise PodSpecError(f"container {manifest['name']}: runAsNonRoot is set and the container would run as root")
    groups = [*([pod["fsGroup"]] if "fsGroup" in pod else []), *pod.get("supplementalGroups", []), *user_groups(uid)]
    capabilities = container.get("capabilities") or {}
    drop = {c.upper() for c in capabilities.get("drop", [])}
    kept = () if "ALL" in drop else tuple(c for c in DEFAULT_CAPABILITIES if c not in drop)
    added = tuple(c.upper().removeprefix("CAP_") for c in capabilities.get("add", []))
    privileged = bool(container.get("privileged"))
    return Security(
        uid=uid,
        gid=gid,
        groups=tuple(dict.fromkeys(g for g in groups if g != gid)),
        privileged=privileged,
        capabilities=tuple(dict.fromkeys((*kept, *added))),
        no_new_privs=container.get("allowPrivilegeEscalation") is False and not privileged,
        read_only_root=bool(container.get("readOnlyRootFilesystem")),
    )


def _home(uid: int) -> str:
    names = {v: k for k, v in KOLLA_USERS.items()}
    return f"/var/lib/{names[uid]}" if uid in names else "/root"


def _expand(text: str, env: Mapping[str, str]) -> str:
    """Kubernetes' $(VAR) expansion: known variables are replaced, unknown references kept."""
    return _VAR_REF.sub(lambda m: env.get(m[1], m[0]), text)


_UNITS = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12}


def _bytes(quantity: str | int) -> int:
    text = str(quantity)
    for suffix, factor in sorted(_UNITS.items(), key=lambda kv: -len(kv[0])):
        if text.endswith(suffix):
            return int(float(text[: -len(suffix)]) * factor)
    return int(float(text))


def _millis(quantity: str | int) -> int:
    text = str(quantity)
    return int(text[:-1]) if text.endswith("m") else int(float(text) * 1000)


def secret_data(manifest: Manifest) -> dict[str, str]:
    """A Secret's keys as its volume shows them (stringData as the program writes it, or data)."""
    if "data" in manifest:
        return {k: base64.b64decode(v).decode() for k, v in manifest["data"].items()}
    return dict(manifest.get("stringData") or {})
