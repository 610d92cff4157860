"""The plan's containers as the kubelet would run them: image, argv, probes, hooks, env, mounts.

Every pod template of the plan's Deployments, StatefulSets, DaemonSets, Jobs and CronJobs
(init containers and containers) is read from its registration, with the ConfigMap and Secret
files it mounts (their revealed values: the scripts live there). A container whose image is not
one of the plan's Kolla images (settings.image of a Kolla name), and the images the operators'
custom resources name, are listed as skipped.
"""

from __future__ import annotations

import base64
import posixpath
from dataclasses import dataclass, field
from typing import Any

from tools.plan import Plan
from tools.runtime import Registration

WORKLOADS = ("Deployment", "StatefulSet", "DaemonSet", "Job", "CronJob", "Pod")
ACCOUNT_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"
# The API groups of the operators' custom resources whose pods the operators start.
OPERATOR_GROUPS = ("k8s.mariadb.com", "rabbitmq.com")


@dataclass(frozen=True)
class Mount:
    path: str
    kind: str  # configMap, secret, projected, hostPath, emptyDir, ...
    source: str  # the object or host path it comes from
    files: dict[str, str] | None  # relative path → text, for ConfigMap and Secret files; None otherwise
    mode: int | None = None  # the files' mode (defaultMode or the item's)


@dataclass(frozen=True)
class Container:
    stack: str
    where: str  # Kind/name/container, e.g. DaemonSet/libvirt-kvm-general/libvirt
    image: str
    command: tuple[str, ...] | None  # None: the image's entrypoint
    args: tuple[str, ...] | None  # None: the image's CMD
    execs: tuple[tuple[str, tuple[str, ...]], ...]  # (readinessProbe/preStop/..., argv)
    env: dict[str, str | None]  # literal values; None for values from the API (valueFrom)
    mounts: tuple[Mount, ...]

    def mount_of(self, path: str) -> tuple[Mount, str] | None:
        """The mount a path is on (the deepest), and the path inside it."""
        path = posixpath.normpath(path)
        best = None
        for mount in self.mounts:
            inside = path == mount.path or path.startswith(mount.path.rstrip("/") + "/")
            if inside and (best is None or len(mount.path) > len(best.path)):
                best = mount
        if best is None:
            return None
        return best, posixpath.relpath(path, best.path) if path != best.path else ""


@dataclass
class Skipped:
    stack: str
    where: str
    image: str
    reason: str


@dataclass
class PlanContainers:
    containers: list[Container] = field(default_factory=list)
    skipped: list[Skipped] = field(default_factory=list)


def _template(r: Registration) -> dict[str, Any]:
    spec = r.revealed["spec"]
    if r.kind == "Pod":
        return r.revealed
    if r.kind == "CronJob":
        return dict(spec["jobTemplate"]["spec"]["template"])
    return dict(spec["template"])


def _object_files(r: Registration) -> dict[str, str]:
    data = r.revealed
    files = dict(data.get("stringData") or {})
    for key, value in (data.get("data") or {}).items():
        files[key] = base64.b64decode(value).decode(errors="replace") if r.kind == "Secret" else value
    return files


def _volume_files(
    volume: dict[str, Any], objects: dict[tuple[str, str], dict[str, str]]
) -> tuple[str, str, dict[str, str] | None, int | None]:
    for kind, key, name_field in (("configMap", "ConfigMap", "name"), ("secret", "Secret", "secretName")):
        if kind in volume:
            source = volume[kind]
            name = source.get(name_field, "")
            data = objects.get((key, name), {})
            items = source.get("items")
            files = {i["path"]: data.get(i["key"], "") for i in items} if items else dict(data)
            return kind, name, files, source.get("defaultMode")
    if "projected" in volume:
        projected: dict[str, str] = {}
        for source in volume["projected"].get("sources", []):
            for kind, key in (("configMap", "ConfigMap"), ("secret", "Secret")):
                if kind in source:
                    data = objects.get((key, source[kind].get("name", "")), {})
                    items = source[kind].get("items")
                    projected.update({i["path"]: data.get(i["key"], "") for i in items} if items else data)
            if "serviceAccountToken" in source:
                projected[source["serviceAccountToken"].get("path", "token")] = ""
        return "projected", "projected", projected, volume["projected"].get("defaultMode")
    kind = next((k for k in volume if k != "name"), "unknown")
    detail = volume[kind].get("path", "") if isinstance(volume[kind], dict) else ""
    return kind, detail, None, None


def _mounts(
    pod: dict[str, Any], container: dict[str, Any], objects: dict[tuple[str, str], dict[str, str]]
) -> list[Mount]:
    volumes = {v["name"]: v for v in pod.get("volumes", [])}
    mounts = []
    for mount in container.get("volumeMounts", []):
        kind, source, files, mode = _volume_files(volumes.get(mount["name"], {"name": mount["name"]}), objects)
        sub = mount.get("subPath")
        if sub and files is not None:
            files = {"": files[sub]} if sub in files else {}
        mounts.append(Mount(mount["mountPath"], kind, source, files, mode))
    if pod.get("automountServiceAccountToken", True) and not any(m.path == ACCOUNT_DIR for m in mounts):
        # The kubelet mounts the service account's token unless the pod opts out.
        files = {"token": "", "ca.crt": "", "namespace": ""}
        mounts.append(Mount(ACCOUNT_DIR, "projected", "service account token", files))
    return mounts


def _env(container: dict[str, Any]) -> dict[str, str | None]:
    return {e["name"]: e.get("value") if "valueFrom" not in e else None for e in container.get("env", [])}


def _execs(container: dict[str, Any]) -> list[tuple[str, tuple[str, ...]]]:
    found = []
    for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
        command = container.get(probe, {}).get("exec", {}).get("command")
        if command:
            found.append((probe, tuple(command)))
    for hook, handler in container.get("lifecycle", {}).items():
        command = handler.get("exec", {}).get("command")
        if command:
            found.append((hook, tuple(command)))
    return found


def plan_containers(plan: Plan, kolla_image: dict[str, str]) -> PlanContainers:
    """The plan's containers; `kolla_image` maps each Kolla image reference of the plan to its name."""
    objects = {
        (r.kind or "", r.k8s_name or ""): _object_files(r) for r in plan.custom if r.kind in ("ConfigMap", "Secret")
    }
    found = PlanContainers()
    for r in plan.custom:
        if r.remote:
            found.skipped.append(
                Skipped(
                    plan.stack,
                    r.name,
                    "(its own images)",
                    "an operator's chart or manifest: its pods are not in the plan",
                )
            )
            continue
        if r.kind not in WORKLOADS:
            api = str(r.revealed.get("apiVersion", ""))
            if any(group in api for group in OPERATOR_GROUPS):
                spec = r.revealed.get("spec") or {}
                image = spec.get("image") or "(the operator's default)"
                found.skipped.append(
                    Skipped(plan.stack, f"{r.kind}/{r.k8s_name}", image, "run by its operator, not a Kolla image")
                )
            continue
        pod = _template(r)["spec"]
        for group in ("initContainers", "containers"):
            for container in pod.get(group, []):
                where = f"{r.kind}/{r.k8s_name}/{container['name']}"
                image = container["image"]
                if image not in kolla_image:
                    found.skipped.append(Skipped(plan.stack, where, image, "not one of the plan's Kolla images"))
                    continue
                found.containers.append(
                    Container(
                        plan.stack,
                        where,
                        image,
                        tuple(container["command"]) if "command" in container else None,
                        tuple(container["args"]) if "args" in container else None,
                        tuple(_execs(container)),
                        _env(container),
                        tuple(_mounts(pod, container, objects)),
                    )
                )
    return found
