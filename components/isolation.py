"""NetworkPolicies: only the cloud's own pods reach its data stores.

MariaDB, RabbitMQ and memcached authenticate weakly or not at all (memcached not at all, and
python-memcached unpickles what it reads), so each admits only the pods of this program
(`app.kubernetes.io/part-of=openstack`), its own peers (Galera, RabbitMQ clustering) and its
operator. RabbitMQ's AMQP port also serves the node agents (nova-compute, neutron's agents),
which run in the host network: Kubernetes lets a node reach the pods on it, but pods on other
nodes only through `networkPolicies.nodeCidrs`; without it, AMQP stays open to the cluster
(the README says so). Which pod may use the management API: the rabbit-init Jobs alone.
"""

from __future__ import annotations

from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from components import oslo
from components.meta import PART_OF, metadata
from components.settings import Settings

Manifest = dict[str, Any]
OPENSTACK_PODS = {"podSelector": {"matchLabels": {"app.kubernetes.io/part-of": PART_OF}}}
# The operators' own labels on the pods they run (mariadb-operator pkg/builder/labels; RabbitMQ
# Cluster Operator internal/metadata/label.go), and on the operator's pods (their charts).
MARIADB_PODS = {"app.kubernetes.io/name": "mariadb", "app.kubernetes.io/instance": "mariadb"}
MARIADB_OPERATOR = {"podSelector": {"matchLabels": {"app.kubernetes.io/name": "mariadb-operator"}}}
RABBITMQ_PODS = {"app.kubernetes.io/name": "rabbitmq", "app.kubernetes.io/part-of": "rabbitmq"}
RABBIT_INIT_JOBS = {
    "podSelector": {"matchLabels": {"app.kubernetes.io/part-of": PART_OF, "app.kubernetes.io/component": "rabbit-init"}}
}
MEMCACHED_PODS = {"app.kubernetes.io/name": "memcached", "app.kubernetes.io/component": "server"}
RABBITMQ_CLUSTERING = (4369, 25672)  # epmd and Erlang distribution between RabbitMQ nodes


def _tcp(*ports: int) -> list[Manifest]:
    return [{"protocol": "TCP", "port": port} for port in ports]


def _peers(labels: dict[str, str]) -> Manifest:
    return {"podSelector": {"matchLabels": labels}}


def policies(settings: Settings) -> dict[str, Manifest]:
    """Each data store's NetworkPolicy spec, by the name of the store."""
    nodes = [{"ipBlock": {"cidr": cidr}} for cidr in settings.network_policies.node_cidrs]
    amqp_from = [OPENSTACK_PODS, *nodes] if nodes else []  # [] admits every source
    amqp: Manifest = {"ports": _tcp(oslo.RABBITMQ_PORT)}
    if amqp_from:
        amqp["from"] = amqp_from
    return {
        "memcached": {
            "podSelector": {"matchLabels": MEMCACHED_PODS},
            "policyTypes": ["Ingress"],
            "ingress": [{"from": [OPENSTACK_PODS], "ports": _tcp(oslo.MEMCACHED_PORT)}],
        },
        "mariadb": {
            "podSelector": {"matchLabels": MARIADB_PODS},
            "policyTypes": ["Ingress"],
            "ingress": [
                {"from": [OPENSTACK_PODS], "ports": _tcp(oslo.MARIADB_PORT)},
                # Galera replication and state transfers, and the operator's agent and queries.
                {"from": [_peers(MARIADB_PODS), MARIADB_OPERATOR]},
            ],
        },
        "rabbitmq": {
            "podSelector": {"matchLabels": RABBITMQ_PODS},
            "policyTypes": ["Ingress"],
            "ingress": [
                amqp,
                {"from": [RABBIT_INIT_JOBS], "ports": _tcp(oslo.RABBITMQ_MANAGEMENT_PORT)},
                {"from": [_peers(RABBITMQ_PODS)], "ports": _tcp(*RABBITMQ_CLUSTERING)},
            ],
        },
    }


class DataStoreIsolation(pulumi.ComponentResource):
    def __init__(self, settings: Settings, opts: pulumi.ResourceOptions | None = None):
        super().__init__("openstack:infra:DataStoreIsolation", "isolation", None, opts)
        if settings.network_policies.enabled:
            for store, spec in policies(settings).items():
                k8s.networking.v1.NetworkPolicy(
                    f"{store}-ingress",
                    metadata=metadata(f"{store}-ingress", settings.namespace, store, "network-policy"),
                    spec=spec,
                    opts=pulumi.ResourceOptions(parent=self),
                )
        self.register_outputs({})
