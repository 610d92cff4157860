"""NetworkPolicies as the lab's network plugin enforces them, in both ways plugins treat node traffic."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from tests.lab.cloud.netpol import CniMode, NetworkPolicies, PodAddress

NODES = ["192.168.200.11", "192.168.200.13"]
STORE = {"app": "rabbitmq"}
POLICY = {
    "podSelector": {"matchLabels": STORE},
    "policyTypes": ["Ingress"],
    "ingress": [
        {"from": [{"podSelector": {"matchLabels": {"part-of": "openstack"}}}, {"ipBlock": {"cidr": "192.168.0.0/16"}}],
         "ports": [{"protocol": "TCP", "port": 5672}]},
        {"ports": [{"protocol": "TCP", "port": 5671}]},  # open to every source
    ],
}  # fmt: skip


def policies(mode: CniMode) -> NetworkPolicies:
    found = NetworkPolicies([POLICY], NODES, mode)
    found.pods["client"] = PodAddress("client", "10.244.1.7", {"part-of": "openstack"}, "pod-client", "cp", ())
    found.pods["agent"] = PodAddress("agent", NODES[1], {"part-of": "openstack"}, None, "c1", ())
    return found


STORE_POD = PodAddress("rabbitmq-0", "10.244.1.9", STORE, "pod-rabbitmq-0", "cp", (NODES[0], "10.244.1.1"))


def test_pods_by_label_and_the_own_node_are_admitted_host_network_pods_by_no_label() -> None:
    rules = policies(CniMode.NODE_IPS_IN_IPBLOCK).rules(STORE_POD)
    assert "-A KUBE-NETWORK-POLICY -s 10.244.1.7 -p tcp --dport 5672 -j ACCEPT" in rules
    assert f"-A KUBE-NETWORK-POLICY -s {NODES[0]} -j ACCEPT" in rules  # its own node, the kubelet's probes
    assert "-A KUBE-NETWORK-POLICY -s 10.244.1.1 -j ACCEPT" in rules  # the node on its pod bridge
    # The agent is a host-network pod: its label does not make it a peer.
    assert not any(f"-s {NODES[1]} -p tcp --dport 5672" in r for r in rules)
    assert rules[-1] != "-A KUBE-NETWORK-POLICY -j ACCEPT"


def test_an_ipblock_admits_other_nodes_only_where_the_plugin_matches_node_addresses() -> None:
    calico = policies(CniMode.NODE_IPS_IN_IPBLOCK).rules(STORE_POD)
    cilium = policies(CniMode.NODE_IPS_NOT_IN_IPBLOCK).rules(STORE_POD)
    assert "-A KUBE-NWP-IPBLOCK -s 192.168.0.0/16 -p tcp --dport 5672 -j ACCEPT" in calico
    assert not any(r.endswith("-j RETURN") for r in calico)
    # Cilium's default: node addresses leave the ipBlock chain before any ipBlock matches them.
    returns = [r for r in cilium if r.endswith("-j RETURN")]
    assert returns == [f"-A KUBE-NWP-IPBLOCK -s {ip} -j RETURN" for ip in NODES]
    assert cilium.index(returns[-1]) < cilium.index(
        "-A KUBE-NWP-IPBLOCK -s 192.168.0.0/16 -p tcp --dport 5672 -j ACCEPT"
    )


@pytest.mark.parametrize("mode", list(CniMode))
def test_a_port_open_to_every_source_admits_node_traffic_in_both_ways(mode: CniMode) -> None:
    rules = policies(mode).rules(STORE_POD)
    assert "-A KUBE-NETWORK-POLICY -p tcp --dport 5671 -j ACCEPT" in rules
    assert rules.index("-A KUBE-NETWORK-POLICY -p tcp --dport 5671 -j ACCEPT") < rules.index(
        "-A KUBE-NETWORK-POLICY -j DROP"
    )


def test_an_unselected_pod_is_not_isolated() -> None:
    assert policies(CniMode.NODE_IPS_NOT_IN_IPBLOCK).rules(PodAddress("x", "10.244.1.3", {"app": "x"}, "n")) == []


def test_selectors_the_lab_does_not_implement_are_errors() -> None:
    found = NetworkPolicies([{**POLICY, "podSelector": {"matchExpressions": []}}], NODES)
    with pytest.raises(ValueError, match="matchExpressions"):
        found.rules(STORE_POD)


# Horizon's policy as components/infrastructure/isolation.py writes it: the gateway's proxies (their namespace) only.
FRONT = {"app": "horizon"}
GATEWAY_ONLY: dict[str, Any] = {
    "podSelector": {"matchLabels": FRONT},
    "policyTypes": ["Ingress"],
    "ingress": [{"from": [{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "gw-system"}}}],
                 "ports": [{"protocol": "TCP", "port": 8080}]}],
}  # fmt: skip
FRONT_POD = PodAddress("horizon-0", "10.244.1.20", FRONT, "pod-horizon-0", "cp", (NODES[0], "10.244.1.1"))
PROXY = PodAddress("envoy-0", "10.244.1.30", {"app": "envoy"}, "pod-envoy-0", "cp", (), namespace="gw-system")
NEIGHBOUR = PodAddress("client", "10.244.1.7", {"part-of": "openstack"}, "pod-client", "cp", ())


def _rules(policy: dict[str, Any], *pods: PodAddress) -> list[str]:
    found = NetworkPolicies([policy], NODES, namespace="openstack")
    found.pods.update({p.name: p for p in pods})
    return found.rules(FRONT_POD)


def test_a_namespace_selector_admits_the_pods_of_that_namespace_only() -> None:
    rules = _rules(GATEWAY_ONLY, PROXY, NEIGHBOUR)
    assert "-A KUBE-NETWORK-POLICY -s 10.244.1.30 -p tcp --dport 8080 -j ACCEPT" in rules
    assert not any("-s 10.244.1.7 " in r for r in rules)  # a pod of the stack's namespace


def test_a_namespace_and_pod_selector_need_both_and_a_pod_selector_alone_keeps_to_its_namespace() -> None:
    both = copy.deepcopy(GATEWAY_ONLY)
    both["ingress"][0]["from"][0]["podSelector"] = {"matchLabels": {"app": "envoy"}}
    other = PodAddress("other", "10.244.1.31", {"app": "other"}, "pod-other", "cp", (), namespace="gw-system")
    rules = _rules(both, PROXY, other)
    assert any("-s 10.244.1.30 " in r for r in rules) and not any("-s 10.244.1.31 " in r for r in rules)
    by_label = copy.deepcopy(GATEWAY_ONLY)
    by_label["ingress"][0]["from"] = [{"podSelector": {"matchLabels": {"app": "envoy"}}}]
    assert not any("-s 10.244.1.30 " in r for r in _rules(by_label, PROXY))  # another namespace's pod
