"""NetworkPolicies that would open a data store to everyone.

NetworkPolicies add up: a pod selected by any policy admits what any of them admits. So one
extra policy that selects MariaDB's, RabbitMQ's or memcached's pods and admits every source
undoes components/infrastructure/isolation.py. What may be open to every source is only the client port of
MariaDB (3306) and RabbitMQ (5672): their host-network clients connect from node addresses that
no podSelector matches, and both authenticate. Every other port of a store (management,
clustering, Galera, memcached, which authenticates nobody) admits only pods chosen by
podSelector, in the policy's namespace or in namespaces named by `kubernetes.io/metadata.name`
(a label only the API server sets; other namespace labels are their owners' to set).

A policy is taken to select a store unless its podSelector contradicts a label every pod of the
store carries; other network policy kinds (Cilium's, Calico's, AdminNetworkPolicy) can admit
what NetworkPolicies deny, and the pack does not read them: they are refused.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from policies.datastores import DATA_STORES, DataStore
from policies.k8s import K8sObject, get, is_list, items, mapping, show
from policies.messages import forbidden
from policies.settings import PackSettings

NAMESPACE_NAME = "kubernetes.io/metadata.name"
# Kinds that admit traffic beside NetworkPolicies, by (group, kind).
OTHER_POLICY_KINDS = {
    ("cilium.io", "CiliumNetworkPolicy"), ("cilium.io", "CiliumClusterwideNetworkPolicy"),
    ("crd.projectcalico.org", "NetworkPolicy"), ("crd.projectcalico.org", "GlobalNetworkPolicy"),
    ("projectcalico.org", "NetworkPolicy"), ("projectcalico.org", "GlobalNetworkPolicy"),
    ("policy.networking.k8s.io", "AdminNetworkPolicy"), ("policy.networking.k8s.io", "BaselineAdminNetworkPolicy"),
    ("policy.networking.k8s.io", "ClusterNetworkPolicy"),
}  # fmt: skip


def may_select(selector: Any, labels: Mapping[str, str]) -> bool:
    """Whether a label selector can match a pod carrying `labels` (and any others): only a
    requirement that contradicts one of them rules the pod out."""
    if not isinstance(selector, Mapping):
        return True  # no selector: every pod of the namespace
    for key, value in mapping(selector.get("matchLabels")).items():
        if key in labels and labels[key] != value:
            return False
    for requirement in items(selector.get("matchExpressions")):
        key, operator = get(requirement, "key"), get(requirement, "operator")
        values = items(get(requirement, "values"))
        if key not in labels:
            continue
        if (operator == "In" and labels[key] not in values) or (operator == "NotIn" and labels[key] in values):
            return False
        if operator == "DoesNotExist":
            return False
    return True


def _names_namespaces(selector: Mapping[str, Any]) -> bool:
    """A namespaceSelector that names its namespaces (by the label the API server sets)."""
    if NAMESPACE_NAME in mapping(selector.get("matchLabels")):
        return True
    return any(
        get(r, "key") == NAMESPACE_NAME and get(r, "operator") == "In" and items(get(r, "values"))
        for r in items(selector.get("matchExpressions"))
    )


def open_source(rule: Mapping[str, Any]) -> str:
    """Why an ingress rule admits sources beyond chosen pods; "" when it admits only those."""
    peers = rule.get("from")
    if not is_list(peers) or not peers:
        return "every source (no from)"
    for index, peer in enumerate(peers):
        peer = mapping(peer)
        if "ipBlock" in peer:
            cidr = get(peer, "ipBlock", "cidr")
            every = " (every address)" if str(cidr).endswith("/0") else ""
            return f"the addresses of from[{index}].ipBlock.cidr={show(cidr)}{every}"
        if "namespaceSelector" in peer:
            selector = mapping(peer["namespaceSelector"])
            if not _names_namespaces(selector):
                which = "every namespace" if not selector else "namespaces chosen by labels their owners set"
                return f"{which} (from[{index}].namespaceSelector={show(selector)})"
        elif "podSelector" not in peer:
            return f"every source (from[{index}]={show(peer)})"
    return ""


def _ports(rule: Mapping[str, Any]) -> list[Mapping[str, Any]] | None:
    ports = rule.get("ports")
    return [mapping(p) for p in ports] if is_list(ports) and ports else None  # None: every port


def _shown(ports: list[Mapping[str, Any]] | None) -> str:
    if ports is None:
        return "every port"
    shown = []
    for port in ports:
        number, end = port.get("port"), port.get("endPort")
        shown.append(f"{show(number)}-{show(end)}" if end not in (None, number) else show(number))
    return "port " + ", ".join(shown)


def _or(ports: tuple[int, ...]) -> str:
    return " or ".join(map(str, ports))


def only_client_port(ports: list[Mapping[str, Any]] | None, store: DataStore) -> bool:
    if ports is None or not store.open_to_all:
        return False
    return all(
        port.get("protocol", "TCP") == "TCP"
        and port.get("port") in store.client_ports
        and port.get("endPort") in (None, port.get("port"))
        for port in ports
    )


def _selects_ingress(spec: Mapping[str, Any]) -> bool:
    """Whether the policy governs ingress. The API server reads no policyTypes, and an empty list
    alike, as Ingress (with Egress when egress rules are given: SetDefaults_NetworkPolicy checks
    len(policyTypes) == 0), so `policyTypes: []` is an ingress policy with the rules it has."""
    types = spec.get("policyTypes")
    return "Ingress" in items(types) if is_list(types) and types else True


def other_policy_kind(group: str, kind: str) -> bool:
    """A kind of another network policy API: the ones named, and any kind called *NetworkPolicy
    outside networking.k8s.io (Antrea's crd.antrea.io ClusterNetworkPolicy, Calico's staged ones,
    whatever a CNI adds next), since the pack cannot read what they admit."""
    return (group, kind) in OTHER_POLICY_KINDS or (
        kind.endswith("NetworkPolicy") and (group, kind) != ("networking.k8s.io", "NetworkPolicy")
    )


def _stores(obj: K8sObject, settings: PackSettings) -> Iterator[DataStore]:
    if obj.namespace not in (None, settings.namespace):
        return  # a policy selects pods of its own namespace only
    selector = get(obj.props, "spec", "podSelector")
    yield from (store for store in DATA_STORES if may_select(selector, store.labels))


def data_store_ingress(obj: K8sObject, settings: PackSettings) -> list[str]:
    if other_policy_kind(obj.group, obj.kind):
        why = "it can admit what the data stores' NetworkPolicies deny, and the pack does not read it"
        return [forbidden(obj, "policy", obj.kind, "NetworkPolicies (networking.k8s.io)", why)]
    if (obj.group, obj.kind) != ("networking.k8s.io", "NetworkPolicy"):
        return []
    spec = mapping(get(obj.props, "spec"))
    if not _selects_ingress(spec):
        return []
    found = []
    for store in _stores(obj, settings):
        for index, rule in enumerate(items(spec.get("ingress"))):
            rule = mapping(rule)
            why = open_source(rule)
            ports = _ports(rule)
            if why and not only_client_port(ports, store):
                client = f"its port {_or(store.client_ports)} only" if store.open_to_all else "nothing of it"
                found.append(
                    f"{obj.describe()}: spec.ingress[{index}] opens {store.name}'s {_shown(ports)} to {why}; "
                    f"allowed to every source: {client}; to the rest, pods by podSelector, in namespaces named by "
                    f"{NAMESPACE_NAME} (NetworkPolicies add up: one that admits everyone opens the store)"
                )
    return found
