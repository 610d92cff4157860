"""Node pods built from the role table: each container gets exactly its role's host access.

The compute- and network-node DaemonSets are built here, from `components.tables.roles`, which
is also what the policy pack judges them by.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from components.mechanism.workload import Manifest, Mount
from components.tables.roles import NodePod, Role

# Node agents run as root: privsep, ovs-vsctl and libvirt need it, and Kolla's node
# images start as root. Their privileges beyond that come only from the role table.
ROOT = 0


def container_security(role: Role) -> Manifest:
    if role.privileged:
        return {"privileged": True, "runAsUser": ROOT}
    capabilities: Manifest = {"drop": ["ALL"]}
    if role.capabilities:
        capabilities["add"] = list(role.capabilities)
    return {
        "allowPrivilegeEscalation": False,
        "capabilities": capabilities,
        "runAsUser": ROOT,
        "seccompProfile": {"type": "RuntimeDefault"},
    }


def volume_name(path: str) -> str:
    return "host" + re.sub(r"[^a-z0-9]+", "-", path.lower()).rstrip("-")


def host_path_volumes(roles: tuple[Role, ...]) -> tuple[Manifest, ...]:
    paths = sorted({p.path for role in roles for p in role.host_paths})
    return tuple({"name": volume_name(path), "hostPath": {"path": path, "type": "DirectoryOrCreate"}} for path in paths)


def host_path_mounts(role: Role) -> tuple[Mount, ...]:
    return tuple(
        Mount(volume_name(p.path), p.path, read_only=p.read_only, propagation=p.propagation) for p in role.host_paths
    )


def pod_overrides(pod: NodePod) -> Manifest:
    overrides: Manifest = {}
    if pod.host_network:
        # Host-network pods must still resolve cluster Services (keystone-api, rabbitmq, ...).
        overrides.update(hostNetwork=True, dnsPolicy="ClusterFirstWithHostNet")
    if pod.host_pid:
        overrides["hostPID"] = True
    if pod.host_ipc:
        overrides["hostIPC"] = True
    return overrides


def avoid(labels: dict[str, str] | Mapping[str, str]) -> Manifest:
    """Node affinity that keeps a pod off nodes carrying all of `labels` (e.g. compute nodes)."""
    return {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {"matchExpressions": [{"key": key, "operator": "NotIn", "values": [value]}]}
                    for key, value in labels.items()
                ]
            }
        }
    }
