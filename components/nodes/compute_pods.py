"""Which DaemonSets run on compute nodes, by name: for each node group, its topology's pods.

Nova's host discovery waits for them (components/services/nova.py) and components/services/compute.py builds
them; both read the names here, so neither module needs the other's.
"""

from __future__ import annotations

from collections.abc import Iterator

from components.nodes import libvirt_tls
from components.settings.model import NodeGroup, Settings
from components.tables.roles import ISCSID_POD, LIBVIRT_TLS_POD, NodePod, compute_node_pods


def group_suffix(group: NodeGroup) -> str:
    """DaemonSets of the group 'default' carry no suffix; names never change with the group count."""
    return "" if group.name == "default" else f"-{group.name}"


def iscsi_pods(settings: Settings) -> tuple[NodePod, ...]:
    """iscsid runs as a pod where LVM volumes attach over iSCSI and the host runs no iscsid itself."""
    iscsi = settings.services.on("cinder") and "lvm" in settings.cinder.backends
    return (ISCSID_POD,) if iscsi and not settings.hypervisor_isolation.host_runs_hypervisor else ()


def libvirt_tls_pods(settings: Settings) -> tuple[NodePod, ...]:
    """The node's libvirt certificate keeper, where tls.libvirt names a CA and the program runs libvirt."""
    return (LIBVIRT_TLS_POD,) if libvirt_tls.in_pods(settings) else ()


def compute_pods(settings: Settings) -> Iterator[tuple[NodeGroup, NodePod, str]]:
    """(node group, pod, DaemonSet name) of every DaemonSet on compute nodes."""
    extra = iscsi_pods(settings) + libvirt_tls_pods(settings)
    for group in settings.compute.node_groups:
        for pod in compute_node_pods(settings.hypervisor_isolation) + extra:
            yield group, pod, f"{pod.name}{group_suffix(group)}"


def compute_daemonsets(settings: Settings) -> tuple[str, ...]:
    return tuple(name for _, _, name in compute_pods(settings))
