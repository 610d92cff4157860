"""Isolated data stores: encrypted token caches, NetworkPolicies, and what node pods may read."""

from __future__ import annotations

import configparser
from typing import Any

import pytest

from components.cloud.stack_config import parse_settings
from components.infrastructure.isolation import RABBITMQ_PODS, host_network_clients
from components.mechanism.inifile import parse_ini
from tests.conftest import plan_of
from tests.helpers import objects, pod_template
from tools.plan import Plan
from tools.runtime import run_program, stack_config

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


CLOUD_PODS = {"podSelector": {"matchLabels": {"app.kubernetes.io/part-of": "openstack"}}}
CLIENT_PORTS = {"mariadb": 3306, "rabbitmq": 5672, "memcached": 11211}


def _rule_of_port(spec: dict, port: int) -> dict:
    """The rule of a store's client port (the operator's rule names it among others)."""
    [rule] = [r for r in spec["ingress"] if r.get("ports") == [{"protocol": "TCP", "port": port}]]
    return rule


def _mounted_files(plan: Plan, pod: dict, container: dict) -> dict[str, str]:
    """A container's mounted config files (path → text), read from the Secrets and ConfigMaps they come from."""
    sources = {}
    planned = {r.k8s_name for r in plan.custom if r.kind == "Secret"}
    for volume in pod.get("volumes", []):
        # A Secret the user provides (a Ceph keyring) holds no config file of the plan.
        if "secret" in volume and volume["secret"]["secretName"] in planned:
            sources[volume["name"]] = plan.by_name(volume["secret"]["secretName"], "Secret").revealed["stringData"]
        elif "configMap" in volume:
            sources[volume["name"]] = plan.by_name(volume["configMap"]["name"], "ConfigMap").revealed["data"]
    return {
        m["mountPath"]: sources[m["name"]][m["subPath"]]
        for m in container.get("volumeMounts", [])
        if m["name"] in sources and m.get("subPath")
    }


def stores_used(plan: Plan, pod: dict, container: dict) -> set[str]:
    """The data stores a container connects to, as its mounted oslo.config files say.

    AMQP: any transport_url; MariaDB: a [database] or [api_database] connection; memcached:
    oslo.cache ([cache] enabled), or keystonemiddleware's token cache, which only an API's WSGI
    pipeline loads (an API container mounts its uWSGI config).
    """
    ns = plan.settings.namespace
    files = _mounted_files(plan, pod, container)
    serves_api = any(path.endswith("uwsgi.ini") for path in files)
    used = set()
    for path, text in files.items():
        if not path.endswith((".conf", ".ini")) or path.endswith("uwsgi.ini"):
            continue
        try:
            ini = parse_ini(text)
        except configparser.Error:
            continue  # not an INI file (libvirtd.conf, qemu.conf)
        for section in ini.sections():
            if f"@rabbitmq.{ns}.svc" in ini[section].get("transport_url", ""):
                used.add("rabbitmq")
        if any("mysql+pymysql://" in ini[s].get("connection", "") for s in ("database", "api_database") if s in ini):
            used.add("mariadb")
        if "cache" in ini and ini["cache"].get("enabled") == "true" and ini["cache"].get("memcache_servers"):
            used.add("memcached")
        if serves_api and ini.has_option("keystone_authtoken", "memcached_servers"):
            used.add("memcached")
    return used


def host_network_use(plan: Plan) -> dict[str, set[str]]:
    """Store → the containers of host-network pods that connect to it."""
    found: dict[str, set[str]] = {store: set() for store in CLIENT_PORTS}
    for r in plan.custom:
        if r.kind not in ("Deployment", "DaemonSet", "StatefulSet", "Job", "CronJob"):
            continue
        pod = pod_template(r)["spec"]
        if not pod.get("hostNetwork"):
            continue
        for container in (*pod.get("initContainers", []), *pod["containers"]):
            for store in stores_used(plan, pod, container):
                found[store].add(container["name"])
    return found


def test_the_store_detection_sees_api_clients_and_agents() -> None:
    """The config reading above finds what it should where the answer is known (else the next test proves nothing)."""
    plan = plan_of("prod")
    api = next(iter(objects(plan, "Deployment")["cinder-api"].inputs["spec"]["template"]["spec"]["containers"]))
    pod = objects(plan, "Deployment")["cinder-api"].inputs["spec"]["template"]["spec"]
    assert stores_used(plan, pod, api) == {"mariadb", "rabbitmq", "memcached"}
    keystone = objects(plan, "Deployment")["keystone-api"].inputs["spec"]["template"]["spec"]
    assert stores_used(plan, keystone, keystone["containers"][0]) == {"mariadb", "memcached"}  # [cache], no RPC
    assert host_network_use(plan) == {
        "mariadb": {"cinder-volume"},
        "rabbitmq": {"nova-compute", "neutron-ovs-agent", "neutron-l3-agent", "neutron-dhcp-agent", "cinder-volume"},
        "memcached": set(),
    }


@pytest.mark.parametrize(
    ("stack", "overrides"),
    [
        ("dev", {}),  # all-in-one, no Cinder: no host-network pod writes to MariaDB
        ("staging", {}),
        ("prod", {}),
        ("prod", {"services": {"cinder": False}}),
        (
            "staging",
            {"hypervisorIsolation": "baremetal-hypervisor", "cinder": {"backend": "nfs", "nfsShares": ["h:/x"]}},
        ),
    ],
)
def test_host_network_clients_reach_their_stores_on_every_plugin_and_nothing_else_is_open(
    stack: str, overrides: dict[str, Any]
) -> None:
    """Whatever a network plugin makes of host-network traffic, a rule without `from` admits it.

    So each store a host-network pod uses has its client port open to every source, and each
    store none uses (memcached, with no credentials at all) admits the cloud's pods only; the
    program's table of such clients (HOST_NETWORK_CLIENTS) is what the plan shows.
    """
    plan = plan_of(stack, **overrides)
    used = host_network_use(plan)
    assert used["rabbitmq"] >= {"nova-compute", "neutron-ovs-agent"}  # every stack has compute nodes
    # RabbitMQ's client port is amqps under internal TLS (staging's).
    amqp = 5671 if plan.settings.tls.internal_enabled else 5672  # amqps under internal TLS
    for store, port in {**CLIENT_PORTS, "rabbitmq": amqp}.items():
        rule = _rule_of_port(_policy(plan, store), port)
        if used[store]:
            assert "from" not in rule, (store, used[store])
        else:
            assert rule["from"] == [CLOUD_PODS], store
        assert set(host_network_clients(plan.settings, store)) == used[store], store
    assert used["memcached"] == set()


def test_stores_no_host_network_pod_uses_stay_closed_to_other_pods() -> None:
    plan = plan_of("dev")  # no Cinder: MariaDB's clients are all pods of the cloud
    assert host_network_use(plan)["mariadb"] == set()
    assert _rule_of_port(_policy(plan, "mariadb"), 3306)["from"] == [CLOUD_PODS]
    assert _rule_of_port(_policy(plan, "memcached"), 11211)["from"] == [CLOUD_PODS]


def test_node_cidrs_narrow_the_client_ports_host_network_pods_use() -> None:
    plan = plan_of("prod", networkPolicies={"nodeCidrs": ["192.168.0.0/16", "10.1.0.0/24"]})
    nodes = [{"ipBlock": {"cidr": "192.168.0.0/16"}}, {"ipBlock": {"cidr": "10.1.0.0/24"}}]
    assert _rule_of_port(_policy(plan, "mariadb"), 3306)["from"] == [CLOUD_PODS, *nodes]
    assert _rule_of_port(_policy(plan, "rabbitmq"), 5672)["from"] == [CLOUD_PODS, *nodes]
    assert _rule_of_port(_policy(plan, "memcached"), 11211)["from"] == [CLOUD_PODS]  # no host-network client
    no_cinder = plan_of("prod", networkPolicies={"nodeCidrs": ["192.168.0.0/16"]}, services={"cinder": False})
    assert _rule_of_port(_policy(no_cinder, "mariadb"), 3306)["from"] == [CLOUD_PODS]


def _peers_on(spec: dict, port: int) -> list[dict]:
    """Every peer admitted on a port: rules naming it, and rules without ports (all of them)."""
    return [
        peer for rule in spec["ingress"] if "ports" not in rule or _has(rule, port) for peer in rule.get("from", [])
    ]


def _has(rule: dict, port: int) -> bool:
    return {"protocol": "TCP", "port": port} in rule["ports"]


@pytest.mark.parametrize("port", [4444, 4567, 4568, 5555, 5566])
def test_galera_and_agent_ports_admit_the_servers_and_the_operator_only(port: int) -> None:
    spec = _policy(plan_of("prod"), "mariadb")
    peers = _peers_on(spec, port)
    assert all("ipBlock" not in p for p in peers) and CLOUD_PODS not in peers
    names = {p["podSelector"]["matchLabels"]["app.kubernetes.io/name"] for p in peers}
    assert names == ({"mariadb", "mariadb-operator"} if port in (5555, 5566) else {"mariadb"})


def test_rabbitmq_management_and_clustering_admit_no_client() -> None:
    spec = _policy(plan_of("prod"), "rabbitmq")
    management = _peers_on(spec, 15672)
    assert management[0]["podSelector"]["matchLabels"]["app.kubernetes.io/component"] == "rabbit-init"
    assert CLOUD_PODS not in management and all("ipBlock" not in p for p in management)
    for port in (4369, 25672):
        assert _peers_on(spec, port) == [{"podSelector": {"matchLabels": RABBITMQ_PODS}}]


# The operators' pods as their own manifests label them: mariadb-operator's chart
# (selectorLabels: the chart's name) and config/manager/manager.yaml of cluster-operator v2.21.1.
MARIADB_OPERATOR_POD = {"app.kubernetes.io/name": "mariadb-operator", "app.kubernetes.io/instance": "mariadb-operator"}
RABBITMQ_OPERATOR_POD = {
    "app.kubernetes.io/component": "rabbitmq-operator",
    "app.kubernetes.io/name": "rabbitmq-cluster-operator",
    "app.kubernetes.io/part-of": "rabbitmq",
}


def _admits(peer: dict, namespace: str, labels: dict[str, str], stack_namespace: str = "openstack") -> bool:
    """Whether a NetworkPolicy peer admits a pod with these labels in this namespace."""
    if "ipBlock" in peer:
        return False
    namespaces = peer.get("namespaceSelector")
    if namespaces is None:
        in_namespace = namespace == stack_namespace
    else:
        in_namespace = namespaces["matchLabels"].items() <= {"kubernetes.io/metadata.name": namespace}.items()
    pods = (peer.get("podSelector") or {}).get("matchLabels", {})
    return in_namespace and pods.items() <= labels.items()


def _admitted(spec: dict, port: int, namespace: str, labels: dict[str, str]) -> bool:
    return any(_admits(peer, namespace, labels) for peer in _peers_on(spec, port))


@pytest.mark.parametrize("port", [3306, 5555, 5566])
def test_mariadb_admits_its_operator_wherever_it_runs(port: int) -> None:
    installed = _policy(plan_of("prod"), "mariadb")
    assert _admitted(installed, port, "openstack", MARIADB_OPERATOR_POD)
    assert not _admitted(installed, port, "mariadb-operator", MARIADB_OPERATOR_POD)
    cluster = {"mariadb": {"install": False, "chartVersion": "26.6.0"}}
    elsewhere = _policy(plan_of("prod", operators=cluster), "mariadb")
    # Installed by others (OLM, kustomize: `control-plane` labels), it is known by its namespace.
    assert _admitted(elsewhere, port, "mariadb-operator", {"control-plane": "mariadb-operator-controller-manager"})
    assert not _admitted(elsewhere, port, "openstack", MARIADB_OPERATOR_POD)
    named = {"mariadb": {"install": False, "chartVersion": "26.6.0", "namespace": "databases"}}
    assert _admitted(_policy(plan_of("prod", operators=named), "mariadb"), port, "databases", MARIADB_OPERATOR_POD)


def test_rabbitmq_management_admits_its_operator_wherever_it_runs() -> None:
    installed = _policy(plan_of("prod"), "rabbitmq")
    assert _admitted(installed, 15672, "rabbitmq-system", RABBITMQ_OPERATOR_POD)
    assert not _admitted(installed, 15672, "rabbitmq-system", {"app.kubernetes.io/name": "something-else"})
    cluster = {"rabbitmq": {"install": False, "version": "v2.21.1", "namespace": "messaging"}}
    elsewhere = _policy(plan_of("prod", operators=cluster), "rabbitmq")
    assert _admitted(elsewhere, 15672, "messaging", {"app": "anything"})
    assert not _admitted(elsewhere, 15672, "rabbitmq-system", RABBITMQ_OPERATOR_POD)


def test_the_policies_select_the_operators_pods_and_rabbit_init_pods_match() -> None:
    plan = plan_of("staging")
    rabbit_init = plan.by_name("nova-rabbit-init", "Job").inputs["spec"]["template"]["metadata"]["labels"]
    assert _admitted(_policy(plan, "rabbitmq"), 15671, "openstack", rabbit_init)  # staging: https management
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


def _scope_of(transform: Any) -> str:
    import pulumi

    opts = pulumi.ResourceOptions()
    deployment = _operator_deployment()
    result = transform(pulumi.ResourceTransformArgs(True, "kubernetes:apps/v1:Deployment", "x", deployment, opts))
    assert isinstance(result, pulumi.ResourceTransformResult)
    spec: Any = result.props["spec"]  # the manifest's plain dicts and lists
    env = spec["template"]["spec"]["containers"][0]["env"]
    assert env[0]["name"] == "OPERATOR_NAMESPACE"  # what the manifest sets stays
    assert "OPERATOR_SCOPE_NAMESPACE" not in str(deployment)  # the manifest's object is not changed in place
    [scope] = [e["value"] for e in env if e["name"] == "OPERATOR_SCOPE_NAMESPACE"]
    return scope


def test_rabbitmq_operator_watches_the_stacks_namespace_only() -> None:
    import pulumi

    from components.infrastructure.rabbitmq import watch_only

    transform = watch_only(["openstack"])
    assert _scope_of(transform) == "openstack"
    role = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": "x"}}
    args = pulumi.ResourceTransformArgs(
        True, "kubernetes:rbac.authorization.k8s.io/v1:ClusterRole", "r", role, pulumi.ResourceOptions()
    )
    assert transform(args) is None


def test_one_rabbitmq_operator_serves_several_stacks() -> None:
    """The manifest's names are cluster-wide: the stack that installs it lists the others' namespaces.

    cmd/main.go of v2.21.1 splits OPERATOR_SCOPE_NAMESPACE at each comma and trims nothing.
    """
    from components.infrastructure.rabbitmq import watch_only

    assert _scope_of(watch_only(["openstack", "openstack-b", "openstack"])) == "openstack,openstack-b,openstack"
    owner = {"rabbitmq": {"version": "v2.21.1", "watchNamespaces": ["openstack-b", "openstack"]}}
    plan = plan_of("prod", operators=owner)
    [manifest] = [r for r in plan.registrations if r.type == "kubernetes:yaml/v2:ConfigFile"]
    assert (
        "OPERATOR_SCOPE_NAMESPACE=openstack,openstack-b on Deployment rabbitmq-cluster-operator" in manifest.transforms
    )
    other = {"rabbitmq": {"install": False, "version": "v2.21.1"}}  # the other stack: in rabbitmq-system
    guest = plan_of("prod", namespace="openstack-b", operators=other)
    assert not [r for r in guest.registrations if r.type == "kubernetes:yaml/v2:ConfigFile"]
    assert _admitted(_policy(guest, "rabbitmq"), 15672, "rabbitmq-system", RABBITMQ_OPERATOR_POD)


@pytest.mark.parametrize(
    ("operators", "key", "message"),
    [
        (
            {"mariadb": {"chartVersion": "26.6.0", "namespace": "databases"}},
            "openstack:operators.mariadb",
            "runs in the stack's namespace",
        ),
        (
            {"rabbitmq": {"version": "v2.21.1", "namespace": "messaging"}},
            "openstack:operators.rabbitmq",
            "installs the operator into 'rabbitmq-system'",
        ),
        (
            {"rabbitmq": {"install": False, "version": "v2.21.1", "watchNamespaces": ["a"]}},
            "openstack:operators.rabbitmq",
            "set by the stack that installs the operator",
        ),
        (
            {"rabbitmq": {"version": "v2.21.1", "watchNamespaces": ["Not A Namespace"]}},
            "openstack:operators.rabbitmq.watchNamespaces.0",
            "",
        ),
    ],
)
def test_operator_namespaces_that_cannot_be_are_settings_errors(operators: dict, key: str, message: str) -> None:
    from components.settings.model import SettingsError

    with pytest.raises(SettingsError) as caught:
        parse_settings({"operators": operators})
    assert any(p.startswith(f"{key}: ") and message in p for p in caught.value.problems), caught.value.problems


def test_an_operator_not_installed_runs_in_a_namespace_of_its_own_by_default() -> None:

    operators = parse_settings(
        {
            "operators": {
                "mariadb": {"install": False, "chartVersion": "26.6.0"},
                "rabbitmq": {"install": False, "version": "v2.21.1"},
            }
        }
    ).operators
    assert operators.mariadb.namespace_in("openstack") == "mariadb-operator"
    assert operators.rabbitmq.namespace == "rabbitmq-system"
    assert parse_settings({}).operators.mariadb.namespace_in("openstack") == "openstack"  # installed: the stack's


# Envoy Gateway's proxy pods as it labels them (internal/infrastructure/kubernetes/proxy/resource.go
# of v1.9.0), with the owning Gateway's labels it adds.
ENVOY_PROXY_POD = {
    "app.kubernetes.io/name": "envoy",
    "app.kubernetes.io/component": "proxy",
    "app.kubernetes.io/managed-by": "envoy-gateway",
    "gateway.envoyproxy.io/owning-gateway-name": "public",
}
GATEWAY_ONLY = {"horizon": ("horizon", 8080), "nova-novncproxy": ("nova-novncproxy", 6080)}


@pytest.mark.parametrize("backend", sorted(GATEWAY_ONLY))
def test_what_only_users_reach_admits_the_gateways_proxies_alone(stack_plan: Plan, backend: str) -> None:
    """Horizon and the console proxy take requests from the gateway only; the APIs stay as they were
    (host-network pods call them too: no NetworkPolicy selects them)."""
    deployment, port = GATEWAY_ONLY[backend]
    spec = _policy(stack_plan, backend)
    pods = stack_plan.by_name(deployment, "Deployment").inputs["spec"]["template"]["metadata"]["labels"]
    assert spec["podSelector"]["matchLabels"].items() <= pods.items()
    assert [rule["ports"] for rule in spec["ingress"]] == [[{"protocol": "TCP", "port": port}]]
    proxies = stack_plan.settings.gateway.proxies.namespace  # type: ignore[union-attr]
    assert _admitted(spec, port, proxies, ENVOY_PROXY_POD)
    assert not _admitted(spec, port, stack_plan.settings.namespace, {"app.kubernetes.io/part-of": "openstack"})
    assert not _admitted(spec, port, "default", ENVOY_PROXY_POD)
    assert all("ipBlock" not in peer for rule in spec["ingress"] for peer in rule["from"])
    selected = {name for name, r in objects(stack_plan, "NetworkPolicy").items()}
    assert not selected & {"keystone-api-ingress", "nova-api-ingress", "glance-api-ingress"}


def test_installed_envoy_gateway_is_admitted_by_its_labels_and_a_clusters_gateway_by_its_namespace() -> None:
    installed = _policy(plan_of("dev"), "horizon")
    assert not _admitted(installed, 8080, "envoy-gateway-system", {"app": "something-else"})
    shared = _policy(plan_of("prod"), "horizon")
    assert _admitted(shared, 8080, "envoy-gateway-system", {"app": "any-implementation"})
    labelled = {"existing": {"name": "shared", "namespace": "openstack"},
                "proxies": {"namespace": "openstack", "labels": {"gateway": "shared"}}}  # fmt: skip
    in_namespace = _policy(plan_of("prod", gateway=labelled), "nova-novncproxy")
    assert _admitted(in_namespace, 6080, "openstack", {"gateway": "shared", "app": "proxy"})
    assert not _admitted(in_namespace, 6080, "openstack", {"app.kubernetes.io/part-of": "openstack"})


def test_without_a_gateway_nothing_is_closed_to_all_but_it() -> None:
    config = {k: v for k, v in stack_config("prod").items() if k not in ("openstack:gateway", "openstack:tls")}
    names = {r.k8s_name for r in run_program(config, "prod") if r.kind == "NetworkPolicy"}
    assert names == {"mariadb-ingress", "rabbitmq-ingress", "memcached-ingress"}
