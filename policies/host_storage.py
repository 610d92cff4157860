"""Storage that reaches the host around the hostPath rule.

A PersistentVolume on a node's path (`hostPath`, `local`) hands a node's files or disks to
whatever claims it; a claim that binds by `volumeName` takes a volume someone else made, such
as one of those; `volumeDevices` give a container a raw block device (a claim bound to a local
disk is that disk); an inline CSI volume runs a node driver with what the pod's author asks of
it, and a flexVolume runs a driver binary on the host. The program uses none of them: its claims
name a storage class, and node roles reach the host only through hostPath (host_volumes.py).
Held for every object, charts' and operators' pods too.

Not seen: what a storage class's provisioner makes (a local-path provisioner makes hostPath
volumes for any claim of its class).
"""

from __future__ import annotations

from policies.k8s import K8sObject, get, items, mapping
from policies.messages import forbidden
from policies.podspec import pod_templates
from policies.settings import PackSettings

HOST_VOLUME_SOURCES = {
    "hostPath": "a node's files, to whatever claims it",
    "local": "a node's disk or directory, to whatever claims it",
    "flexVolume": "a driver binary run on the host",
}
POD_VOLUME_SOURCES = {
    "csi": "an inline CSI volume: a node driver does what the pod's author asks of it",
    "flexVolume": "a driver binary run on the host",
}
CLUSTER_STORAGE = "a claim of a storage class (persistentVolumeClaim), or the pack's hostPath rules"


def _volume(obj: K8sObject) -> list[str]:
    spec = mapping(get(obj.props, "spec"))
    return [
        forbidden(obj, "volume", f"spec.{source}", "a network or CSI volume source", why)
        for source, why in HOST_VOLUME_SOURCES.items()
        if spec.get(source) is not None
    ]


def _claim(obj: K8sObject) -> list[str]:
    if get(obj.props, "spec", "volumeName") is None:
        return []
    why = "it binds to a volume made outside the program, which may be a node's path"
    return [forbidden(obj, "claim", "spec.volumeName", "a storage class (storageClassName) to provision it", why)]


def _pods(obj: K8sObject) -> list[str]:
    found = []
    for pod in pod_templates(obj):
        for index, volume in enumerate(items(pod.spec.get("volumes"))):
            for source, why in POD_VOLUME_SOURCES.items():
                if get(volume, source) is not None:
                    subject = f"volume {get(volume, 'name')!r}"
                    found.append(forbidden(obj, subject, pod.field("volumes", index, source), CLUSTER_STORAGE, why))
        for container in pod.containers():
            if items(container.spec.get("volumeDevices")):
                why = "a raw block device: bound to a node's disk, it is that disk"
                found.append(forbidden(obj, container.subject, container.field("volumeDevices"), "volumeMounts", why))
    return found


def host_storage(obj: K8sObject, settings: PackSettings) -> list[str]:
    if obj.group == "core" and obj.kind == "PersistentVolume":
        return _volume(obj)
    if obj.group == "core" and obj.kind == "PersistentVolumeClaim":
        return _claim(obj)
    return _pods(obj)
