"""From a workload's pod template in the plan to runnable containers, as the kubelet resolves it.

Volumes are materialised (Secrets, ConfigMaps and projected volumes as files with their modes
and the pod's fsGroup, always read-only as the kubelet mounts them; emptyDirs, claims, the
node's hostPaths), environment variables resolved (values with $(VAR) expansion, Secret and
ConfigMap keys, `envFrom`, the downward API, the `kubernetes` Service's variables), name
resolution written as the kubelet writes it (the pod's /etc/hosts, and its /etc/resolv.conf by
its `dnsPolicy`: the cluster's resolver, or the node's own), and each container's user, groups,
capabilities and privilege taken from the pod's and the container's securityContext over the
image's defaults. A field of the pod spec the lab does not reproduce stops the deploy with its
name: nothing is silently ignored (`IGNORED` says which fields need nothing here, and why).
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

from tests.lab.cloud.container import DEFAULT_CAPABILITIES, Container, Mount, Security
from tests.lab.cloud.images import (
    KOLLA_USERS,
    KOLLA_VENV,
    LANG,
    TOOLBOX_VENV,
    ReleaseVenvs,
    build_layer,
    kolla_image,
    layer_name,
    restricted_path,
    user_groups,
)
from tests.lab.cloud.node import Node
from tests.lab.cloud.services import API_SERVER_ADDRESS, resolv_conf

Manifest = dict[str, Any]
# Secret or ConfigMap name → its data, as the pod would see it.
ObjectLookup = Callable[[str, str], Mapping[str, str]]
# The files of a ServiceAccount's token volume (token, ca.crt, namespace) for a pod.
TokenIssuer = Callable[[str, str], Mapping[str, str]]
SERVICE_ACCOUNT_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"

_VAR_REF = re.compile(r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)")
# Fields of the plan's pods that need nothing of the lab, and why.
IGNORED = {
    "imagePullPolicy": "images are the lab's layers (tests/lab/cloud/images.py); nothing is pulled",
    "resources.requests": "requests only guide the scheduler; the lab's nodes are not full",
    "seccompProfile": "seccomp filters are not applied (reported as not run)",
    "enableServiceLinks": "read: only `false` is implemented (no per-Service variables)",
    "terminationMessagePolicy": "where the termination message comes from; the lab keeps whole logs",
}
POD_FIELDS = {
    "containers", "initContainers", "volumes", "securityContext", "hostNetwork", "hostPID", "hostIPC",
    "dnsPolicy", "nodeSelector", "affinity", "tolerations", "restartPolicy", "terminationGracePeriodSeconds",
    "serviceAccountName", "automountServiceAccountToken", "enableServiceLinks", "hostname", "subdomain",
}  # fmt: skip
CONTAINER_FIELDS = {
    "name", "image", "imagePullPolicy", "command", "args", "env", "envFrom", "ports", "volumeMounts",
    "resources", "securityContext", "readinessProbe", "livenessProbe", "startupProbe", "lifecycle", "workingDir",
    "terminationMessagePolicy",
}  # fmt: skip
POD_SECURITY_FIELDS = {"runAsUser", "runAsGroup", "fsGroup", "runAsNonRoot", "supplementalGroups", "seccompProfile"}
CONTAINER_SECURITY_FIELDS = {
    "runAsUser", "runAsGroup", "runAsNonRoot", "privileged", "capabilities", "allowPrivilegeEscalation",
    "readOnlyRootFilesystem", "seccompProfile",
}  # fmt: skip
PROBE_FIELDS = {
    "httpGet", "tcpSocket", "exec", "initialDelaySeconds", "periodSeconds", "timeoutSeconds", "failureThreshold",
    "successThreshold",
}  # fmt: skip
MOUNT_FIELDS = {"name", "mountPath", "readOnly", "subPath", "mountPropagation"}
DNS_POLICIES = {"ClusterFirst", "ClusterFirstWithHostNet", "Default"}


class PodSpecError(ValueError):
    """The kubelet would refuse this pod (CreateContainerConfigError and friends), or the lab cannot run it."""


def _known(what: str, manifest: Mapping[str, Any], allowed: set[str]) -> None:
    unknown = sorted(set(manifest) - allowed)
    if unknown:
        raise PodSpecError(f"{what}: {', '.join(unknown)} not implemented by the lab (tests/lab/cloud/pods.py)")


@dataclass(frozen=True)
class Probe:
    kind: str  # httpGet, tcpSocket or exec
    port: int = 0
    path: str = "/"
    command: tuple[str, ...] = ()
    headers: tuple[tuple[str, str], ...] = ()
    scheme: str = "HTTP"
    initial_delay: float = 0
    period: float = 10
    timeout: float = 1
    failure_threshold: int = 3
    success_threshold: int = 1

    @classmethod
    def parse(cls, manifest: Manifest | None, ports: Mapping[str, int], what: str) -> Probe | None:
        if not manifest:
            return None
        _known(what, manifest, PROBE_FIELDS)
        timing = dict(
            initial_delay=manifest.get("initialDelaySeconds", 0),
            period=manifest.get("periodSeconds", 10),
            timeout=manifest.get("timeoutSeconds", 1),
            failure_threshold=manifest.get("failureThreshold", 3),
            success_threshold=manifest.get("successThreshold", 1),
        )
        if "httpGet" in manifest:
            http = manifest["httpGet"]
            _known(f"{what}.httpGet", http, {"port", "path", "httpHeaders", "scheme"})
            headers = tuple((h["name"], h["value"]) for h in http.get("httpHeaders", []))
            port = _port(http["port"], ports, what)
            return cls("httpGet", port, http.get("path", "/"), headers=headers, scheme=http.get("scheme", "HTTP"),
                       **timing)  # fmt: skip
        if "tcpSocket" in manifest:
            _known(f"{what}.tcpSocket", manifest["tcpSocket"], {"port"})
            return cls("tcpSocket", _port(manifest["tcpSocket"]["port"], ports, what), **timing)
        if "exec" in manifest:
            return cls("exec", command=tuple(manifest["exec"]["command"]), **timing)
        raise PodSpecError(f"{what}: no handler this kubelet knows")


def _port(value: int | str, ports: Mapping[str, int], what: str) -> int:
    if isinstance(value, int) or str(value).isdigit():
        return int(value)
    if value not in ports:
        raise PodSpecError(f"{what}: port {value!r} names no port of the container")
    return ports[str(value)]


@dataclass
class ContainerPlan:
    container: Container
    readiness: Probe | None
    liveness: Probe | None
    startup: Probe | None = None
    pre_stop: tuple[str, ...] = ()


@dataclass
class PodPlan:
    name: str
    kind: str  # the workload's kind
    workload: str
    index: int
    node: str
    ip: str
    host_network: bool
    host_pid: bool
    init_containers: list[ContainerPlan]
    containers: list[ContainerPlan]
    restart_policy: str
    grace: float
    labels: dict[str, str] = field(default_factory=dict)
    ports: dict[str, int] = field(default_factory=dict)  # container port name → number, for endpoints
    hostname: str = ""
    subdomain: str = ""
    # Secret and ConfigMap volumes the kubelet keeps up to date: (kind, name) → how it wrote them.
    synced_volumes: list[SyncedVolume] = field(default_factory=list)


@dataclass(frozen=True)
class SyncedVolume:
    """A Secret or ConfigMap volume as written, so that the kubelet's sync can write it again."""

    kind: str
    name: str
    target: Path
    items: tuple[tuple[str, str, int | None], ...]  # (key, path, mode); empty: every key
    mode: int
    fs_group: int | None

    def write(self, data: Mapping[str, str]) -> None:
        """Replace the files with the object's current data, each file at once (rename)."""
        items = self.items or tuple((k, k, None) for k in data)
        wanted = {path for key, path, _ in items if key in data}
        for existing in [p for p in self.target.rglob("*") if p.is_file()]:
            if str(existing.relative_to(self.target)) not in wanted:
                existing.unlink()
        for key, path, mode in items:
            if key not in data:
                continue
            file = self.target / path
            file.parent.mkdir(parents=True, exist_ok=True)
            staged = file.with_name(f".{file.name}.new")
            staged.write_text(data[key])
            os.chown(staged, 0, self.fs_group or 0)
            staged.chmod(mode if mode is not None else self.mode)
            staged.replace(file)


@dataclass
class PodFactory:
    # Which OpenStack venv each image runs (an upgrade's checks run the previous release's images).
    venvs: ReleaseVenvs
    objects: ObjectLookup
    logs: Path  # where container logs go
    namespace: str = "openstack"
    domain: str = "cluster.local"
    tokens: TokenIssuer | None = None  # None: no API server, so a pod that wants a token cannot start
    # An image's layer (tests/lab/cloud/images.py layer_name: the image of one release) → its commands
    # (name → path in the image, tools/imagecheck): a container's PATH then finds only those.
    # None: this machine's system directories, as before.
    image_commands: Mapping[str, Mapping[str, str]] | None = None

    def pod_name(self, kind: str, workload: str, index: int = 0) -> str:
        if kind == "StatefulSet":
            return f"{workload}-{index}"
        digest = hashlib.sha256(f"{kind}/{workload}/{index}".encode()).hexdigest()
        middle = f"{digest[:9]}-" if kind == "Deployment" else ""
        return f"{workload}-{middle}{digest[-5:]}"

    def build(
        self, kind: str, workload: str, template: Manifest, name: str, ip: str, node: Node, index: int = 0
    ) -> PodPlan:
        spec = template["spec"]
        _known(f"pod {name}", spec, POD_FIELDS)
        _known(f"pod {name} securityContext", spec.get("securityContext") or {}, POD_SECURITY_FIELDS)
        if spec.get("enableServiceLinks", True) is not False:
            raise PodSpecError(f"pod {name}: enableServiceLinks true (per-Service variables) is not implemented")
        host_network = bool(spec.get("hostNetwork"))
        pod_dir = node.state / "pods" / name
        if pod_dir.exists():
            shutil.rmtree(pod_dir)  # a new pod starts from its volumes' sources, not an old pod's files
        pod_dir.mkdir(parents=True)
        subdomain = spec.get("subdomain") or ""
        hostname = node.name if host_network else spec.get("hostname") or name
        address = node.ip if host_network else ip
        netns = node.netns_path if host_network else f"/run/netns/pod-{name}"
        pod_sc = spec.get("securityContext") or {}
        fs_group = pod_sc.get("fsGroup")
        synced: list[SyncedVolume] = []
        volumes = {
            v["name"]: self._volume(v, pod_dir / "volumes", fs_group, node, name, synced)
            for v in spec.get("volumes", [])
        }
        volumes.update(self._service_account(spec, pod_dir / "volumes", name))
        # The kubelet mounts Secret, ConfigMap and projected volumes read-only, whatever the pod says.
        config_volumes = frozenset(
            v["name"] for v in spec.get("volumes", []) if {"secret", "configMap", "projected"} & set(v)
        ) | frozenset(k for k in volumes if k == "kube-api-access")
        names = pod_dir / "etc"
        names.mkdir()
        (names / "hosts").write_text(self._hosts(host_network, hostname, subdomain, address, node))
        (names / "resolv.conf").write_text(self._resolv_conf(spec, host_network, name))
        context = _PodContext(
            name, hostname, address, node, volumes, names, netns, bool(spec.get("hostPID")), bool(spec.get("hostIPC")),
            pod_sc, pod_dir, "kube-api-access" in volumes, config_volumes,
        )  # fmt: skip
        containers = spec["containers"]
        ports = {p["name"]: int(p["containerPort"]) for c in containers for p in c.get("ports", []) if "name" in p}
        build = lambda c: self._container(context, c)  # noqa: E731
        return PodPlan(
            name=name,
            kind=kind,
            workload=workload,
            index=index,
            node=node.name,
            ip=address,
            host_network=host_network,
            host_pid=bool(spec.get("hostPID")),
            init_containers=[build(c) for c in spec.get("initContainers", [])],
            containers=[build(c) for c in containers],
            restart_policy=spec.get("restartPolicy", "Always"),
            grace=float(spec.get("terminationGracePeriodSeconds", 30)),
            labels=dict((template.get("metadata") or {}).get("labels") or {}),
            ports=ports,
            hostname=hostname if not host_network else "",
            subdomain=subdomain,
            synced_volumes=synced,
        )

    # -- names -----------------------------------------------------------------------------------

    def _hosts(self, host_network: bool, hostname: str, subdomain: str, ip: str, node: Node) -> str:
        """The kubelet's /etc/hosts (a host-network pod gets the node's)."""
        lines = ["127.0.0.1\tlocalhost", "::1\tlocalhost ip6-localhost ip6-loopback"]
        if subdomain and not host_network:
            lines.append(f"{ip}\t{hostname}.{subdomain}.{self.namespace}.svc.{self.domain}\t{hostname}")
        else:
            lines.append(f"{ip}\t{hostname if not host_network else node.name}")
        return "\n".join(lines) + "\n"

    def _resolv_conf(self, spec: Manifest, host_network: bool, name: str) -> str:
        policy = spec.get("dnsPolicy", "ClusterFirst")
        if policy not in DNS_POLICIES:
            raise PodSpecError(f"pod {name}: dnsPolicy {policy} is not implemented")
        # ClusterFirst on the host network falls back to the node's resolver (Kubernetes docs, Pod's DNS Policy).
        if policy == "Default" or (policy == "ClusterFirst" and host_network):
            return NODE_RESOLV_CONF
        return resolv_conf(self.namespace, self.domain)

    # -- volumes ---------------------------------------------------------------------------------

    def _volume(
        self, volume: Manifest, base: Path, fs_group: int | None, node: Node, pod: str, synced: list[SyncedVolume]
    ) -> Path:
        name = volume["name"]
        target = base / name
        kinds = set(volume) - {"name"}
        if "secret" in volume or "configMap" in volume:
            kind, source = ("Secret", volume["secret"]) if "secret" in volume else ("ConfigMap", volume["configMap"])
            _known(f"pod {pod} volume {name}", source, {"secretName", "name", "items", "defaultMode", "optional"})
            reference = source.get("secretName") or source.get("name")
            data = self.objects(kind, reference)
            written = SyncedVolume(
                kind, reference, target, tuple((i["key"], i["path"], i.get("mode")) for i in source.get("items", [])),
                source.get("defaultMode", 0o644), fs_group,
            )  # fmt: skip
            target.mkdir(parents=True)
            written.write(data)
            synced.append(written)
            return target
        if "emptyDir" in volume:
            target.mkdir(parents=True)
            target.chmod(0o777)
            return target
        if "persistentVolumeClaim" in volume:
            # The lab's provisioner: a claim is a directory of the cluster, whichever node mounts it.
            claim = node.state.parent.parent / "claims" / volume["persistentVolumeClaim"]["claimName"]
            claim.mkdir(parents=True, exist_ok=True)
            if fs_group is not None:
                # The kubelet makes a volume's files the fsGroup's, group-writable, setgid.
                os.chown(claim, 0, fs_group)
                claim.chmod(0o2775)
            return claim
        if "hostPath" in volume:
            path = node.host_path(volume["hostPath"]["path"])
            kind = volume["hostPath"].get("type", "")
            if kind == "DirectoryOrCreate":
                path.mkdir(parents=True, exist_ok=True)
            elif kind == "FileOrCreate" and not path.exists():
                path.parent.mkdir(parents=True, exist_ok=True)
                path.touch()
            elif not path.exists():
                raise PodSpecError(f"hostPath {volume['hostPath']['path']} (type {kind or 'unset'}) does not exist")
            return path
        raise PodSpecError(f"pod {pod} volume {name}: kind {sorted(kinds)} is not reproduced here")

    @staticmethod
    def _write_files(
        target: Path, files: Mapping[str, tuple[str, int | None]], mode: int, fs_group: int | None
    ) -> None:
        target.mkdir(parents=True)
        for path, (text, own_mode) in files.items():
            file = target / path
            file.parent.mkdir(parents=True, exist_ok=True)
            file.write_text(text)
            # The kubelet gives the files the pod's fsGroup, so its non-root users can read them.
            os.chown(file, 0, fs_group or 0)
            file.chmod(own_mode if own_mode is not None else mode)

    def _service_account(self, spec: Manifest, base: Path, pod: str) -> dict[str, Path]:
        """The token volume the ServiceAccount admission plugin adds (kube-api-access-*), unless turned off."""
        if spec.get("automountServiceAccountToken", True) is False:
            return {}
        if self.tokens is None:
            raise PodSpecError(f"pod {pod} mounts its ServiceAccount's token, and the lab runs no API server")
        files = self.tokens(self.namespace, spec.get("serviceAccountName", "default"))
        target = base / "kube-api-access"
        self._write_files(target, {k: (v, None) for k, v in files.items()}, 0o644, spec.get("securityContext", {}).get(
            "fsGroup"))  # fmt: skip
        return {"kube-api-access": target}

    # -- containers ------------------------------------------------------------------------------

    def _container(self, pod: _PodContext, manifest: Manifest) -> ContainerPlan:
        what = f"{pod.name}/{manifest['name']}"
        _known(f"container {what}", manifest, CONTAINER_FIELDS)
        _known(f"container {what} securityContext", manifest.get("securityContext") or {}, CONTAINER_SECURITY_FIELDS)
        lifecycle = manifest.get("lifecycle") or {}
        _known(f"container {what} lifecycle", lifecycle, {"preStop"})
        image = kolla_image(manifest["image"])
        security = _security(pod.security_context, manifest.get("securityContext") or {}, image.user, manifest)
        release = self.venvs.release_of(manifest["image"])
        venv, layer_dir = self.venvs.venvs[release], layer_name(manifest["image"], release)
        commands = self.image_commands.get(layer_dir) if self.image_commands else None
        env = {
            "PATH": restricted_path(image) if commands is not None else image.path,
            "LANG": LANG,
            "HOSTNAME": pod.hostname,
            "HOME": _home(security.uid),
            # What the kubelet sets in every container, enableServiceLinks or not.
            "KUBERNETES_SERVICE_HOST": API_SERVER_ADDRESS,
            "KUBERNETES_SERVICE_PORT": "443",
            "KUBERNETES_SERVICE_PORT_HTTPS": "443",
            "KUBERNETES_PORT": f"tcp://{API_SERVER_ADDRESS}:443",
            "KUBERNETES_PORT_443_TCP": f"tcp://{API_SERVER_ADDRESS}:443",
            "KUBERNETES_PORT_443_TCP_PROTO": "tcp",
            "KUBERNETES_PORT_443_TCP_PORT": "443",
            "KUBERNETES_PORT_443_TCP_ADDR": API_SERVER_ADDRESS,
        }
        env.update(self._env_from(manifest.get("envFrom", []), what))
        env.update(self._env(pod, manifest.get("env", []), env))
        # `command` replaces the image's ENTRYPOINT; `args` alone run under it (the image's CMD is not reproduced).
        if "args" not in manifest and "command" not in manifest:
            raise PodSpecError(f"{what}: neither command nor args (the image's CMD is not reproduced)")
        entrypoint = manifest["command"] if "command" in manifest else list(image.entrypoint)
        command = [_expand(arg, env) for arg in [*entrypoint, *manifest.get("args", [])]]
        if not command:
            raise PodSpecError(f"{what}: args, and the image {manifest['image']} has no entrypoint in the lab's table")
        mounts = [self._mount(pod, m, what) for m in manifest.get("volumeMounts", [])]
        if pod.token:
            mounts.append(Mount(pod.volumes["kube-api-access"], SERVICE_ACCOUNT_DIR, read_only=True))
        mounts += [Mount(pod.names / "hosts", "/etc/hosts"), Mount(pod.names / "resolv.conf", "/etc/resolv.conf")]
        # containerd mounts parents before children, whatever the order of volumeMounts (its CRI
        # plugin sorts them stably by the number of path components): /etc/keystone (an emptyDir)
        # then /etc/keystone/keystone.conf over it, not the other way round.
        mounts.sort(key=lambda m: len(Path(m.target).parts))
        venvs = {}
        if image.venv == KOLLA_VENV:
            venvs[KOLLA_VENV] = venv
        elif image.venv == TOOLBOX_VENV:
            venvs[TOOLBOX_VENV] = venv
        layer = build_layer(image, venv, pod.node.state.parent.parent / "images" / layer_dir, commands)
        resources = manifest.get("resources") or {}
        _known(f"container {what} resources", resources, {"limits", "requests"})
        limits = resources.get("limits") or {}
        ports = {p["name"]: int(p["containerPort"]) for p in manifest.get("ports", []) if "name" in p}
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
            host_ipc=pod.host_ipc,
            hostname=pod.hostname,
            cgroups=pod.node.cgroup_dirs(pod.name, manifest["name"]),
            node_cgroups=pod.node.cgroup_roots(),
            state=pod.directory / "containers" / manifest["name"],
            log=self.logs / pod.name / f"{manifest['name']}.log",
            memory_limit=_bytes(limits["memory"]) if "memory" in limits else None,
            cpu_limit_millis=_millis(limits["cpu"]) if "cpu" in limits else None,
            working_dir=manifest.get("workingDir", "/"),
        )
        pre_stop = (lifecycle.get("preStop") or {}).get("exec", {}).get("command", [])
        return ContainerPlan(
            container,
            Probe.parse(manifest.get("readinessProbe"), ports, f"{what} readinessProbe"),
            Probe.parse(manifest.get("livenessProbe"), ports, f"{what} livenessProbe"),
            Probe.parse(manifest.get("startupProbe"), ports, f"{what} startupProbe"),
            tuple(pre_stop),
        )

    def _mount(self, pod: _PodContext, manifest: Manifest, what: str) -> Mount:
        _known(f"container {what} volumeMount", manifest, MOUNT_FIELDS)
        source = pod.volumes[manifest["name"]]
        forced = manifest["name"] in pod.config_volumes
        if "subPath" in manifest:
            source = source / manifest["subPath"]
            if not source.exists():
                if forced:
                    raise PodSpecError(f"{what}: subPath {manifest['subPath']} is no key of its volume")
                # The kubelet creates a missing subPath of a writable volume as a directory.
                source.mkdir(parents=True)
        read_only = bool(manifest.get("readOnly")) or forced
        return Mount(source, manifest["mountPath"], read_only, manifest.get("mountPropagation"))

    def _env_from(self, sources: list[Manifest], what: str) -> dict[str, str]:
        resolved: dict[str, str] = {}
        for source in sources:
            _known(f"container {what} envFrom", source, {"configMapRef", "secretRef", "prefix"})
            kind, ref = (
                ("Secret", source["secretRef"]) if "secretRef" in source else ("ConfigMap", source["configMapRef"])
            )
            try:
                data = self.objects(kind, ref["name"])
            except PodSpecError:
                if ref.get("optional"):
                    continue
                raise
            prefix = source.get("prefix", "")
            resolved.update({prefix + k: v for k, v in data.items() if re.fullmatch(r"[-._a-zA-Z][-._a-zA-Z0-9]*", k)})
        return resolved

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
                data = self.objects(kind, ref["name"])
                if ref["key"] not in data:
                    raise PodSpecError(f"env {name}: key {ref['key']} is not in {kind} {ref['name']}")
                resolved[name] = data[ref["key"]]
            elif "fieldRef" in source:
                resolved[name] = self._field(pod, source["fieldRef"]["fieldPath"])
            else:
                raise PodSpecError(f"env {name}: {sorted(source)} is not reproduced here")
        return resolved

    def _field(self, pod: _PodContext, path: str) -> str:
        fields = {
            "status.hostIP": pod.node.ip,
            "status.podIP": pod.ip,
            "metadata.name": pod.name,
            "metadata.namespace": self.namespace,
            "spec.nodeName": pod.node.name,
        }
        if path not in fields:
            raise PodSpecError(f"downward API field {path} is not reproduced here")
        return fields[path]


# A host-network pod that does not ask for the cluster's DNS gets the node's resolver, which
# knows no Service (the lab's nodes have no resolver of their own, as an air-gapped node).
NODE_RESOLV_CONF = "# the node's resolv.conf: no cluster names\nnameserver 127.0.0.53\n"


@dataclass(frozen=True)
class _PodContext:
    name: str
    hostname: str
    ip: str
    node: Node
    volumes: dict[str, Path]
    names: Path  # etc/hosts and etc/resolv.conf of the pod
    netns: str
    host_pid: bool
    host_ipc: bool
    security_context: Manifest
    directory: Path
    token: bool
    config_volumes: frozenset[str]


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
