"""Isolated data stores: encrypted token caches, NetworkPolicies, and what node pods may read."""

from __future__ import annotations

from typing import Any

import pytest

from components.inifile import parse_ini
from tests.conftest import plan_of
from tests.helpers import objects
from tools.plan import Plan

TOKEN_VALIDATORS = ("glance", "placement", "nova", "neutron", "cinder")


def _files(plan: Plan, service: str) -> dict[str, str]:
    return plan.by_name(f"{service}-etc", "Secret").revealed["stringData"]


def test_cached_tokens_are_encrypted_with_a_key_per_service(stack_plan: Plan) -> None:
    keys = {}
    for service in TOKEN_VALIDATORS:
        if not getattr(stack_plan.settings.services, service):
            continue
        conf = {"nova": "nova.conf", "placement": "placement.conf", "neutron": "neutron.conf"}.get(
            service, f"{service}-api.conf" if service == "glance" else f"{service}.conf"
        )
        section = parse_ini(_files(stack_plan, service)[conf])["keystone_authtoken"]
        assert section["memcache_security_strategy"] == "ENCRYPT", service
        keys[service] = section["memcache_secret_key"]
        assert len(keys[service]) >= 32
    assert len(set(keys.values())) == len(keys)  # one service cannot read or forge another's cache


def test_compute_nodes_neither_validate_tokens_nor_cache() -> None:
    plan = plan_of("prod")
    node = parse_ini(plan.by_name("compute-node-etc", "Secret").revealed["stringData"]["nova-kvm-general.conf"])
    assert not {"keystone_authtoken", "cache", "database", "api_database"} & set(node.sections())


def test_agents_get_rpc_only_neutron_conf() -> None:
    plan = plan_of("prod")
    agent = parse_ini(plan.by_name("neutron-node-etc", "Secret").revealed["stringData"]["neutron-agent.conf"])
    assert "transport_url" in agent["DEFAULT"]
    assert not {"database", "keystone_authtoken", "nova"} & set(agent.sections())
    server = parse_ini(_files(plan, "neutron")["neutron.conf"])
    assert {"database", "keystone_authtoken", "nova"} <= set(server.sections())


def test_node_pods_mount_node_secrets_only() -> None:
    plan = plan_of("prod")
    for name, daemonset in objects(plan, "DaemonSet").items():
        volumes = daemonset.inputs["spec"]["template"]["spec"].get("volumes", [])
        etc = [v["secret"]["secretName"] for v in volumes if v["name"] == "etc"]
        assert all(secret.endswith("-node-etc") for secret in etc), (name, etc)


def _policy(plan: Plan, store: str) -> dict:
    return plan.by_name(f"{store}-ingress", "NetworkPolicy").inputs["spec"]


@pytest.mark.parametrize("store", ["mariadb", "memcached"])
def test_only_the_clouds_pods_reach_mariadb_and_memcached(store: str) -> None:
    spec = _policy(plan_of("prod"), store)
    assert spec["policyTypes"] == ["Ingress"]
    [clients, *peers] = spec["ingress"]
    assert clients["from"] == [{"podSelector": {"matchLabels": {"app.kubernetes.io/part-of": "openstack"}}}]
    for rule in peers:  # Galera peers and the operator only
        selectors = [peer["podSelector"]["matchLabels"] for peer in rule["from"]]
        assert all(s.get("app.kubernetes.io/name") in ("mariadb", "mariadb-operator") for s in selectors)


def test_rabbitmq_management_only_for_rabbit_init_and_amqp_from_nodes() -> None:
    spec = _policy(plan_of("prod"), "rabbitmq")
    amqp, management, clustering = spec["ingress"]
    assert amqp["ports"] == [{"protocol": "TCP", "port": 5672}]
    assert {"ipBlock": {"cidr": "192.168.0.0/16"}} in amqp["from"]
    assert management["from"][0]["podSelector"]["matchLabels"]["app.kubernetes.io/component"] == "rabbit-init"
    assert {p["port"] for p in clustering["ports"]} == {4369, 25672}
    open_amqp = _policy(plan_of("prod", networkPolicies={"nodeCidrs": []}), "rabbitmq")["ingress"][0]
    assert "from" not in open_amqp  # without the nodes' networks, AMQP stays reachable (README says so)


def test_the_policies_select_the_operators_pods_and_rabbit_init_pods_match() -> None:
    plan = plan_of("staging")
    rabbit_init = plan.by_name("nova-rabbit-init", "Job").inputs["spec"]["template"]["metadata"]["labels"]
    rule = _policy(plan, "rabbitmq")["ingress"][1]["from"][0]["podSelector"]["matchLabels"]
    assert rule.items() <= rabbit_init.items()
    memcached = plan.by_name("memcached", "StatefulSet").inputs["spec"]["template"]["metadata"]["labels"]
    assert _policy(plan, "memcached")["podSelector"]["matchLabels"].items() <= memcached.items()


def test_network_policies_can_be_switched_off() -> None:
    assert "NetworkPolicy" not in {r.kind for r in plan_of("dev", networkPolicies={"enabled": False}).custom}


def test_mariadb_operator_is_namespace_scoped() -> None:
    chart = next(r for r in plan_of("prod").registrations if r.name == "mariadb-operator")
    assert chart.inputs["values"] == {"currentNamespaceOnly": True}
    assert chart.inputs["namespace"] == "openstack"  # the chart watches its own namespace only


def _operator_deployment() -> dict:
    """The operator's Deployment as config/manager/manager.yaml of cluster-operator v2.21.1 has it."""
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "rabbitmq-cluster-operator", "namespace": "rabbitmq-system"},
        "spec": {
            "template": {
                "spec": {
                    "containers": [
                        {
                            "name": "operator",
                            "env": [
                                {
                                    "name": "OPERATOR_NAMESPACE",
                                    "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}},
                                }
                            ],
                        }
                    ]
                }
            }
        },
    }


def test_rabbitmq_operator_watches_the_stacks_namespace_only() -> None:
    import pulumi

    from components.rabbitmq import watch_only

    transform = watch_only("openstack")
    opts = pulumi.ResourceOptions()
    deployment = _operator_deployment()
    result = transform(pulumi.ResourceTransformArgs(True, "kubernetes:apps/v1:Deployment", "x", deployment, opts))
    assert isinstance(result, pulumi.ResourceTransformResult)
    spec: Any = result.props["spec"]  # the manifest's plain dicts and lists
    env = spec["template"]["spec"]["containers"][0]["env"]
    assert {"name": "OPERATOR_SCOPE_NAMESPACE", "value": "openstack"} in env
    assert env[0]["name"] == "OPERATOR_NAMESPACE"  # what the manifest sets stays
    assert "OPERATOR_SCOPE_NAMESPACE" not in str(deployment)  # the manifest's object is not changed in place
    role = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": "x"}}
    args = pulumi.ResourceTransformArgs(True, "kubernetes:rbac.authorization.k8s.io/v1:ClusterRole", "r", role, opts)
    assert transform(args) is None
