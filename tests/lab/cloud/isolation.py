"""Who reaches the data stores: connections tried as the cluster carries them, through Service addresses.

From three places: a pod of the cloud (`part-of: openstack`, on the control-plane node), a pod of
nobody's (an intruder on the same node), and a host-network process of a compute node (node
traffic from another node's address, what nova-compute and the agents are). Each tries the data
stores' client ports and the ports that must stay private (RabbitMQ's management API).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from components.mechanism import oslo
from tests.lab.cloud.node import run

if TYPE_CHECKING:
    from components.settings.model import Settings
    from tests.lab.cloud.deploy import Cloud

INTRUDER = "cloud-intruder"


def client_ports(settings: Settings) -> dict[str, int]:
    """Each data store's client port as the plan's clients use it (RabbitMQ's amqps under internal TLS)."""
    return {
        oslo.MARIADB: oslo.MARIADB_PORT,
        oslo.RABBITMQ: oslo.rabbitmq_port(settings),
        oslo.MEMCACHED: oslo.MEMCACHED_PORT,
    }


def private_ports(settings: Settings) -> dict[str, tuple[str, int]]:
    """Ports no client may reach: RabbitMQ's management API (https under internal TLS)."""
    return {"rabbitmq-management": ("rabbitmq", oslo.rabbitmq_management_port(settings))}


def connects(netns: str, ip: str, port: int) -> bool:
    probe = f"import socket; socket.create_connection(({ip!r}, {port}), timeout=3).close()"
    return run("python3", "-c", probe, netns=netns, check=False).returncode == 0


def _address(cloud: Cloud, service: str) -> str:
    found = cloud.table.service(service)
    if found.cluster_ip:
        return found.cluster_ip
    return cloud.table.endpoints[service][0].ip  # a headless Service: its first pod


def check_isolation(cloud: Cloud) -> dict[str, Any]:
    cp = cloud.cluster.control_plane
    computes = cloud.cluster.labelled(cloud.plan.settings.node_selectors.compute)
    compute = next((n for n in computes if n is not cp), None)
    openstack_pod = next(
        p for w in cloud.workloads.values() for p in w.active_pods
        if p.plan.labels.get("app.kubernetes.io/part-of") == "openstack" and not p.plan.host_network
        and p.node is cp and w.kind == "Deployment"
    )  # fmt: skip
    cp.create_pod_network(INTRUDER, cp.allocate_ip())
    places = {"from_openstack_pod": f"pod-{openstack_pod.plan.name}", "from_other_pod": INTRUDER}
    if compute is not None:
        places["from_other_node_host"] = compute.netns
    found: dict[str, Any] = {"openstack_pod": openstack_pod.plan.name, "cni": cloud.network_policies.mode.value}
    clients, private = client_ports(cloud.plan.settings), private_ports(cloud.plan.settings)
    try:
        for place, netns in places.items():
            reached = {f"{s}:{p}": connects(netns, _address(cloud, s), p) for s, p in clients.items()}
            reached |= {f"{s}:{p}": connects(netns, _address(cloud, s), p) for s, p in private.values()}
            found[place] = reached
    finally:
        cp.delete_pod_network(INTRUDER)
    return found
