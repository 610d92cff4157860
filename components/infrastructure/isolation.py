"""NetworkPolicies of the data stores: who may reach MariaDB, RabbitMQ and memcached, on which port.

Each store admits its own peers (Galera, RabbitMQ clustering) and its operator on the ports
they use, and its clients on its client port. Its clients are the cloud's pods
(`app.kubernetes.io/part-of=openstack`), and for MariaDB and RabbitMQ also pods in the host
network (nova-compute, neutron's agents, cinder-volume). No selector holds for those on every
network plugin: Kubernetes leaves open whether a plugin sees their traffic as the pod's, the
node's or neither, Cilium leaves node addresses out of `ipBlock` unless
`policy-cidr-match-mode=nodes`, and overlays send a node's traffic to a Service from the node's
tunnel address, in the pod network. So a client port that a host-network pod uses is open to
every source, and its credentials protect it (`networkPolicies.nodeCidrs` narrows it where the
plugin shows host-network traffic from the nodes' addresses: README, "Isolation"). A store no
host-network pod uses (memcached, which has no credentials at all) admits the cloud's pods
only. Peer, clustering, management and Galera ports never admit a client.

Behind a gateway (`gateway`), what only users reach through it (Horizon, the noVNC proxy) admits
the gateway's proxy pods alone (gateway_only_policies).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from components.infrastructure.public_routes import PublicRoute
from components.infrastructure.rabbitmq import OPERATOR_POD_LABELS as RABBITMQ_OPERATOR_POD_LABELS
from components.mechanism import oslo
from components.mechanism.meta import PART_OF, metadata
from components.settings.model import Settings

Manifest = dict[str, Any]
OPENSTACK_PODS = {"podSelector": {"matchLabels": {"app.kubernetes.io/part-of": PART_OF}}}
# The operators' own labels on the pods they run (mariadb-operator pkg/builder/labels; RabbitMQ
# Cluster Operator internal/metadata/label.go), and on the operator's pods (their charts).
MARIADB_PODS = {"app.kubernetes.io/name": "mariadb", "app.kubernetes.io/instance": "mariadb"}
MARIADB_OPERATOR_POD_LABELS = {"app.kubernetes.io/name": "mariadb-operator"}
RABBITMQ_PODS = {"app.kubernetes.io/name": "rabbitmq", "app.kubernetes.io/part-of": "rabbitmq"}
RABBIT_INIT_JOBS = {
    "podSelector": {"matchLabels": {"app.kubernetes.io/part-of": PART_OF, "app.kubernetes.io/component": "rabbit-init"}}
}
MEMCACHED_PODS = {"app.kubernetes.io/name": "memcached", "app.kubernetes.io/component": "server"}
RABBITMQ_CLUSTERING = (4369, 25672)  # epmd and Erlang distribution between RabbitMQ nodes
# mariadb-operator's agent beside each server under Galera: its API, which the operator calls
# to recover the cluster, and its probe port (api/v1alpha1/base_types.go, Agent defaults).
MARIADB_AGENT = (5555, 5566)
NAMESPACE_NAME = "kubernetes.io/metadata.name"  # the label Kubernetes sets on every namespace

# The pods in the host network that use each store, by the service whose switch deploys them:
# what their configs name (transport_url, [database] connection). tests/test_isolation.py
# reads the same from every stack's plan, so a new host-network client cannot go unnoticed.
HOST_NETWORK_CLIENTS: dict[str, dict[str, tuple[str, ...]]] = {
    oslo.MARIADB: {"cinder": ("cinder-volume",)},
    oslo.RABBITMQ: {
        "nova": ("nova-compute",),
        "neutron": ("neutron-ovs-agent", "neutron-l3-agent", "neutron-dhcp-agent"),
        "cinder": ("cinder-volume",),
    },
    oslo.MEMCACHED: {},
}


def host_network_clients(settings: Settings, store: str) -> tuple[str, ...]:
    """The host-network workloads of this stack that connect to `store`."""
    by_service = HOST_NETWORK_CLIENTS[store]
    return tuple(w for service, workloads in by_service.items() if settings.services.on(service) for w in workloads)


def _tcp(*ports: int) -> list[Manifest]:
    return [{"protocol": "TCP", "port": port} for port in ports]


def _peers(labels: dict[str, str]) -> Manifest:
    return {"podSelector": {"matchLabels": labels}}


def _clients(settings: Settings, store: str, port: int) -> Manifest:
    """The rule of a store's client port: the cloud's pods, or every source for host-network clients."""
    rule: Manifest = {"ports": _tcp(port)}
    if not host_network_clients(settings, store):
        rule["from"] = [OPENSTACK_PODS]
    elif settings.network_policies.node_cidrs:
        # The operator's word that the plugin shows host-network clients from these addresses.
        rule["from"] = [OPENSTACK_PODS, *({"ipBlock": {"cidr": cidr}} for cidr in settings.network_policies.node_cidrs)]
    # else no `from`: every source, whatever the plugin makes of host-network traffic
    return rule


def operator_peer(namespace: str, stack_namespace: str, labels: dict[str, str], installed: bool) -> Manifest:
    """The operator's pods: by their labels where the stack installed it, else by its namespace alone.

    An operator installed another way (another chart release, OLM, kustomize) labels its pods
    its own way (mariadb-operator's kustomize manifests: `control-plane`), so a cluster's own
    operator in a namespace of its own is admitted by that namespace. In the stack's own
    namespace only the labels can tell it from the rest.
    """
    if namespace == stack_namespace:
        return {"podSelector": {"matchLabels": labels}}
    peer: Manifest = {"namespaceSelector": {"matchLabels": {NAMESPACE_NAME: namespace}}}
    if installed:
        peer["podSelector"] = {"matchLabels": labels}
    return peer


def policies(settings: Settings) -> dict[str, Manifest]:
    """Each data store's NetworkPolicy spec, by the name of the store."""
    ns, operators = settings.namespace, settings.operators
    mariadb, rabbitmq = operators.mariadb, operators.rabbitmq
    mariadb_operator = operator_peer(mariadb.namespace_in(ns), ns, MARIADB_OPERATOR_POD_LABELS, mariadb.install)
    rabbitmq_operator = operator_peer(rabbitmq.namespace, ns, RABBITMQ_OPERATOR_POD_LABELS, rabbitmq.install)
    return {
        "memcached": {
            "podSelector": {"matchLabels": MEMCACHED_PODS},
            "policyTypes": ["Ingress"],
            "ingress": [_clients(settings, oslo.MEMCACHED, oslo.MEMCACHED_PORT)],
        },
        "mariadb": {
            "podSelector": {"matchLabels": MARIADB_PODS},
            "policyTypes": ["Ingress"],
            "ingress": [
                _clients(settings, oslo.MARIADB, oslo.MARIADB_PORT),
                # Galera replication and state transfers, and the agents, between the servers.
                {"from": [_peers(MARIADB_PODS)]},
                # The operator's queries (users, grants, databases) and its calls to the agents.
                {"from": [mariadb_operator], "ports": _tcp(oslo.MARIADB_PORT, *MARIADB_AGENT)},
            ],
        },
        "rabbitmq": {
            "podSelector": {"matchLabels": RABBITMQ_PODS},
            "policyTypes": ["Ingress"],
            "ingress": [
                _clients(settings, oslo.RABBITMQ, oslo.rabbitmq_port(settings)),
                # The rabbit-init Jobs create vhosts and users; the operator reads each node's
                # quorum status and the cluster's overview (internal/rabbitmqclient of v2.21.1).
                {"from": [RABBIT_INIT_JOBS, rabbitmq_operator], "ports": _tcp(oslo.rabbitmq_management_port(settings))},
                {"from": [_peers(RABBITMQ_PODS)], "ports": _tcp(*RABBITMQ_CLUSTERING)},
            ],
        },
    }


def gateway_peer(settings: Settings) -> Manifest:
    """The gateway's proxy pods, as operator_peer finds an operator's: by their namespace, and their
    labels where known (the stack's `gateway.proxies.labels`, or Envoy Gateway's when it installs it)."""
    assert settings.gateway is not None
    proxies, known = settings.gateway.proxies, settings.gateway.proxy_labels()
    return operator_peer(proxies.namespace, settings.namespace, known, installed=bool(known))


def gateway_only_policies(settings: Settings, routes: Iterable[PublicRoute]) -> dict[str, Manifest]:
    """The NetworkPolicy spec of each backend that only the gateway reaches, by the policy's name.

    Horizon and the noVNC proxy serve browsers, through the gateway, and nothing in the cloud calls
    them: their port admits the gateway's proxies alone (a node always reaches its own pods, so the
    kubelet's probes pass). The APIs are left as they are: pods in the nodes' network (nova-compute,
    cinder-volume) call them through the catalog's internal endpoints, and no selector holds for those
    on every network plugin (above), so their ports stay open to every source, and their tokens guard
    them. Without a gateway nothing routes to them: no policy either.
    """
    if settings.gateway is None:
        return {}
    return {
        f"{route.backend}-ingress": {
            "podSelector": {"matchLabels": route.pods},
            "policyTypes": ["Ingress"],
            "ingress": [{"from": [gateway_peer(settings)], "ports": _tcp(route.port)}],
        }
        for route in routes
        if route.gateway_only
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


class FrontDoorIsolation(pulumi.ComponentResource):
    """The NetworkPolicies of the backends only the gateway reaches (gateway_only_policies)."""

    def __init__(self, settings: Settings, routes: Iterable[PublicRoute], opts: pulumi.ResourceOptions | None = None):
        super().__init__("openstack:infra:FrontDoorIsolation", "front-door-isolation", None, opts)
        if settings.network_policies.enabled:
            for name, spec in gateway_only_policies(settings, routes).items():
                service = spec["podSelector"]["matchLabels"]["app.kubernetes.io/name"]
                k8s.networking.v1.NetworkPolicy(
                    name,
                    metadata=metadata(name, settings.namespace, service, "network-policy"),
                    spec=spec,
                    opts=pulumi.ResourceOptions(parent=self),
                )
        self.register_outputs({})
