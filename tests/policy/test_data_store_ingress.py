"""NetworkPolicies the pack judges (data-store-ingress): NetworkPolicies add up, so any one that
selects a data store's pods and admits everyone opens it. Only MariaDB's and RabbitMQ's client
ports (3306, 5672) may be open to every source (host-network clients on every network plugin);
management, clustering and Galera ports, and memcached, admit pods chosen by podSelector, in
namespaces named by kubernetes.io/metadata.name."""

from __future__ import annotations

from typing import Any

import pytest

from components.cloud.stack_config import parse_settings
from components.infrastructure import isolation
from components.mechanism import oslo
from components.settings.model import Settings
from components.tables.roles import Topology
from policies.datastores import DATA_STORES
from policies.report import check_objects

from .builders import k8s_object, stack_config

STAGING = stack_config(Topology.POD_PER_SERVICE)
MARIADB = {"app.kubernetes.io/name": "mariadb", "app.kubernetes.io/instance": "mariadb"}
RABBITMQ = {"app.kubernetes.io/name": "rabbitmq", "app.kubernetes.io/part-of": "rabbitmq"}
MEMCACHED = {"app.kubernetes.io/name": "memcached", "app.kubernetes.io/component": "server"}
OPENSTACK = {"podSelector": {"matchLabels": {"app.kubernetes.io/part-of": "openstack"}}}
EVERY_NAMESPACE: dict[str, Any] = {"namespaceSelector": {}}
ANYWHERE = {"ipBlock": {"cidr": "0.0.0.0/0"}}


def policy(spec: dict[str, Any], namespace: str | None = "openstack") -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": "extra"}
    if namespace is not None:
        metadata["namespace"] = namespace
    return {"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy", "metadata": metadata, "spec": spec}


def ingress(selector: dict[str, Any], *rules: dict[str, Any]) -> dict[str, Any]:
    return {"podSelector": selector, "policyTypes": ["Ingress"], "ingress": list(rules)}


def tcp(*ports: int | str) -> list[dict[str, Any]]:
    return [{"protocol": "TCP", "port": port} for port in ports]


def judged(manifest: dict[str, Any]) -> list[str]:
    violations = check_objects([k8s_object(manifest)], STAGING)
    assert {v.policy for v in violations} <= {"data-store-ingress"}
    return [v.message for v in violations]


REFUSED: list[tuple[str, dict[str, Any], str]] = [
    # An extra policy admitting everything to every pod of the namespace: every store, every port.
    ("allow-all", policy(ingress({}, {})), "mariadb"),
    ("allow-all-no-policy-types", policy({"podSelector": {}, "ingress": [{}]}), "rabbitmq"),
    # An empty list is no policyTypes to the API server: Ingress, with the rules given.
    ("allow-all-empty-policy-types", policy({"podSelector": {}, "policyTypes": [], "ingress": [{}]}), "mariadb"),
    ("allow-all-memcached", policy(ingress({"matchLabels": {"app.kubernetes.io/name": "memcached"}}, {})),
     "memcached"),
    ("empty-from", policy(ingress({"matchLabels": MARIADB}, {"from": []})), "mariadb"),
    ("every-namespace", policy(ingress({"matchLabels": RABBITMQ}, {"from": [EVERY_NAMESPACE]})), "rabbitmq"),
    ("every-namespace-management", policy(ingress({"matchLabels": RABBITMQ},
                                                  {"from": [EVERY_NAMESPACE], "ports": tcp(15672)})), "15672"),
    ("every-namespace-and-pod",
     policy(ingress({"matchLabels": RABBITMQ}, {"from": [{"namespaceSelector": {}, "podSelector": {}}]})),
     "rabbitmq"),
    ("namespaces-by-label",
     policy(ingress({"matchLabels": MARIADB},
                    {"from": [{"namespaceSelector": {"matchLabels": {"team": "a"}}}], "ports": tcp(4567)})),
     "4567"),
    ("anywhere-on-management-tls",
     policy(ingress({"matchLabels": RABBITMQ}, {"from": [ANYWHERE], "ports": tcp(15671)})), "15671"),
    ("anywhere-on-clustering", policy(ingress({"matchLabels": RABBITMQ}, {"from": [ANYWHERE], "ports": tcp(25672)})),
     "0.0.0.0/0"),
    ("ipv6-anywhere-on-galera",
     policy(ingress({"matchLabels": MARIADB}, {"from": [{"ipBlock": {"cidr": "::/0"}}], "ports": tcp(4444)})),
     "::/0"),
    ("anywhere-on-every-port", policy(ingress({"matchLabels": MARIADB}, {"from": [ANYWHERE]})), "every port"),
    ("client-port-range", policy(ingress({"matchLabels": MARIADB}, {"ports": [{"port": 3306, "endPort": 4567}]})),
     "3306-4567"),
    ("named-port", policy(ingress({"matchLabels": MARIADB}, {"ports": tcp("mysql")})), "mysql"),
    ("memcached-client-port", policy(ingress({"matchLabels": MEMCACHED}, {"ports": tcp(11211)})), "11211"),
    ("mariadb-port-on-rabbitmq", policy(ingress({"matchLabels": RABBITMQ}, {"ports": tcp(3306)})), "3306"),
    # A selector the pack cannot rule out selects the store: an expression, a label it does not know.
    ("expression", policy(ingress({"matchExpressions": [{"key": "app.kubernetes.io/name", "operator": "In",
                                                          "values": ["rabbitmq", "x"]}]}, {})), "rabbitmq"),
    ("no-namespace", policy(ingress({}, {"ports": tcp(15672)}), namespace=None), "15672"),
    # Other network policy kinds can admit what the NetworkPolicies deny; the pack cannot read them.
    ("cilium", {"apiVersion": "cilium.io/v2", "kind": "CiliumNetworkPolicy", "metadata": {"name": "x"},
                "spec": {}}, "CiliumNetworkPolicy"),
    ("admin-network-policy", {"apiVersion": "policy.networking.k8s.io/v1alpha1", "kind": "AdminNetworkPolicy",
                              "metadata": {"name": "x"}, "spec": {}}, "AdminNetworkPolicy"),
    # Any *NetworkPolicy of another API: the class, not a list (Antrea's, a CNI's next one).
    ("antrea-cluster", {"apiVersion": "crd.antrea.io/v1beta1", "kind": "ClusterNetworkPolicy",
                        "metadata": {"name": "x"}, "spec": {}}, "ClusterNetworkPolicy"),
    ("antrea-namespaced", {"apiVersion": "crd.antrea.io/v1beta1", "kind": "NetworkPolicy",
                           "metadata": {"name": "x", "namespace": "openstack"}, "spec": {}}, "NetworkPolicy"),
    ("calico-staged", {"apiVersion": "projectcalico.org/v3", "kind": "StagedGlobalNetworkPolicy",
                       "metadata": {"name": "x"}, "spec": {}}, "StagedGlobalNetworkPolicy"),
]  # fmt: skip


@pytest.mark.parametrize(("manifest", "says"), [c[1:] for c in REFUSED], ids=[c[0] for c in REFUSED])
def test_a_policy_that_opens_a_data_store_to_everyone_is_refused(manifest: dict[str, Any], says: str) -> None:
    found = judged(manifest)
    assert found, "not refused"
    assert any(says in message for message in found), found


PASSING: list[tuple[str, dict[str, Any]]] = [
    # The design the program's policies follow: client ports open to every source ...
    ("mariadb-client-open", policy(ingress({"matchLabels": MARIADB}, {"ports": tcp(3306)}))),
    ("rabbitmq-client-open", policy(ingress({"matchLabels": RABBITMQ}, {"from": [ANYWHERE], "ports": tcp(5672)}))),
    # amqps, RabbitMQ's client port under internal TLS
    ("rabbitmq-tls-client-open", policy(ingress({"matchLabels": RABBITMQ}, {"from": [ANYWHERE], "ports": tcp(5671)}))),
    ("client-port-unset-protocol", policy(ingress({"matchLabels": MARIADB}, {"ports": [{"port": 3306}]}))),
    # ... everything else to pods by podSelector, and operators in named namespaces.
    ("galera-peers", policy(ingress({"matchLabels": MARIADB}, {"from": [{"podSelector": {"matchLabels": MARIADB}}]}))),
    ("operator-elsewhere", policy(ingress({"matchLabels": RABBITMQ}, {"from": [{
        "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "rabbitmq-system"}},
        "podSelector": {"matchLabels": {"app.kubernetes.io/name": "rabbitmq-cluster-operator"}}}],
        "ports": tcp(15672)}))),
    ("named-namespaces-by-expression", policy(ingress({"matchLabels": MARIADB}, {"from": [{"namespaceSelector": {
        "matchExpressions": [{"key": "kubernetes.io/metadata.name", "operator": "In", "values": ["a", "b"]}]}}]}))),
    ("memcached-cloud", policy(ingress({"matchLabels": MEMCACHED}, {"from": [OPENSTACK], "ports": tcp(11211)}))),
    # Selecting no data store: another namespace, another app, or egress only.
    ("other-namespace", policy(ingress({}, {}), namespace="elsewhere")),
    ("other-app", policy(ingress({"matchLabels": {"app.kubernetes.io/name": "keystone"}}, {}))),
    ("excluded-by-expression", policy(ingress({"matchExpressions": [
        {"key": "app.kubernetes.io/name", "operator": "NotIn", "values": ["mariadb", "rabbitmq", "memcached"]}]}, {}))),
    ("egress-only", policy({"podSelector": {}, "policyTypes": ["Egress"], "ingress": [{}], "egress": [{}]})),
]  # fmt: skip


@pytest.mark.parametrize("manifest", [c[1] for c in PASSING], ids=[c[0] for c in PASSING])
def test_what_the_design_needs_passes(manifest: dict[str, Any]) -> None:
    assert judged(manifest) == []


# The operators the stack installs (in its namespace and rabbitmq-system), and a cluster's own
# elsewhere: the policies then admit the operators' pods in those namespaces.
OPERATORS_ELSEWHERE = {
    "mariadb": {"install": False, "namespace": "databases"},
    "rabbitmq": {"install": False, "namespace": "messaging"},
}


@pytest.mark.parametrize("tls", [{}, {"internal": {"selfSigned": True}}], ids=["plain", "internal-tls"])
@pytest.mark.parametrize("operators", [{}, OPERATORS_ELSEWHERE], ids=["installed", "elsewhere"])
@pytest.mark.parametrize("node_cidrs", [(), ("192.168.0.0/16",)])
def test_the_programs_own_policies_pass(
    node_cidrs: tuple[str, ...], operators: dict[str, Any], tls: dict[str, Any]
) -> None:
    settings = parse_settings({"networkPolicies": {"nodeCidrs": list(node_cidrs)}, "operators": operators, "tls": tls})
    for store, spec in isolation.policies(settings).items():
        assert judged(policy(spec)) == [], store


def test_the_packs_data_stores_are_the_programs() -> None:
    """The pack keeps its own copy (it imports no Pulumi program code): it must not drift."""
    selected = {store: spec["podSelector"]["matchLabels"] for store, spec in isolation.policies(Settings()).items()}
    assert {store.name: dict(store.labels) for store in DATA_STORES} == selected
    ports = {store.name: store.client_ports for store in DATA_STORES}
    assert ports == {
        "mariadb": (oslo.MARIADB_PORT,),
        "rabbitmq": (oslo.RABBITMQ_PORT, oslo.RABBITMQ_TLS_PORT),
        "memcached": (oslo.MEMCACHED_PORT,),
    }
    assert {store.name for store in DATA_STORES if store.open_to_all} == {"mariadb", "rabbitmq"}
