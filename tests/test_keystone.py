"""Keystone and the infrastructure it stands on, per stack: objects, names and the chain."""

from __future__ import annotations

import pytest

from components.mechanism.inifile import parse_ini
from tests.conftest import plan_of
from tests.helpers import bundle_job, objects, pod_template, waits_for
from tools.plan import Plan

KEYSTONE_JOBS = {
    "keystone-db-init",
    "keystone-db-sync",
    "keystone-fernet-setup",
    "keystone-credential-setup",
    "keystone-bootstrap",
}

# What each step really needs when it starts (issue 2): edge by edge, nothing more.
KEYSTONE_CHAIN = {
    "keystone-db-init": {"mariadb"},
    "keystone-fernet-setup": set(),
    "keystone-credential-setup": set(),
    "keystone-db-sync": {"keystone-db-init", "keystone-fernet-setup", "keystone-credential-setup"},
    "keystone-bootstrap": {"keystone-db-sync"},
    "keystone-api": {"keystone-db-sync", "memcached"},
    "mariadb": set(),
    "rabbitmq": set(),
    "memcached": set(),
}


def test_infrastructure_and_keystone_objects_exist(stack_plan: Plan) -> None:
    assert set(objects(stack_plan, "Job")) >= KEYSTONE_JOBS
    assert "keystone-api" in objects(stack_plan, "Deployment")
    assert "memcached" in objects(stack_plan, "StatefulSet")
    assert {"keystone-api", "memcached"} <= set(objects(stack_plan, "Service"))
    assert set(objects(stack_plan, "MariaDB")) == {"mariadb"}
    assert set(objects(stack_plan, "RabbitmqCluster")) == {"rabbitmq"}


@pytest.mark.parametrize("name", sorted(KEYSTONE_CHAIN))
def test_keystone_chain_edge_by_edge(stack_plan: Plan, name: str) -> None:
    # Under internal TLS each of them mounts the CA bundle, so waits for the Job that writes it too.
    assert waits_for(stack_plan, name) == KEYSTONE_CHAIN[name] | bundle_job(stack_plan)


def test_every_object_is_labelled_and_namespaced(stack_plan: Plan) -> None:
    namespace = stack_plan.settings.namespace
    # Only these live outside the stack's namespace: what has none, and nova-compute-maintenance's
    # Role to create Events about Nodes, which the API server keeps in `default` (components/nodes/maintenance.py).
    elsewhere: dict[tuple[str, str | None], str | None] = {
        ("Namespace", namespace): None,
        ("ClusterRole", f"{namespace}-nova-compute-maintenance"): None,
        ("ClusterRoleBinding", f"{namespace}-nova-compute-maintenance"): None,
        # What narrows its ClusterRole to its own annotations of a Node (cluster-scoped too).
        ("ValidatingAdmissionPolicy", f"{namespace}-nova-compute-maintenance"): None,
        ("ValidatingAdmissionPolicyBinding", f"{namespace}-nova-compute-maintenance"): None,
        # What narrows libvirt-tls's CertificateRequests to its own node's (tls.libvirt; cluster-scoped).
        ("ValidatingAdmissionPolicy", f"{namespace}-libvirt-tls"): None,
        ("ValidatingAdmissionPolicyBinding", f"{namespace}-libvirt-tls"): None,
        # What narrows the CA bundle Job's right to create Secrets to its own (internal TLS; cluster-scoped).
        ("ValidatingAdmissionPolicy", f"{namespace}-internal-ca-bundle"): None,
        ("ValidatingAdmissionPolicyBinding", f"{namespace}-internal-ca-bundle"): None,
        ("Role", f"{namespace}-nova-compute-maintenance-events"): "default",
        ("RoleBinding", f"{namespace}-nova-compute-maintenance-events"): "default",
    }
    gateway = stack_plan.settings.gateway
    if gateway is not None and gateway.envoy_gateway.install and gateway.class_name:
        # Envoy Gateway's namespace, its GatewayClass, and the TLS of its control plane, which the
        # chart's certgen hook would have made there (components/infrastructure/envoy_gateway.py).
        proxies = gateway.proxies.namespace
        elsewhere[("Namespace", proxies)] = None
        elsewhere[("GatewayClass", gateway.class_name)] = None
        tls = [
            ("Issuer", "envoy-gateway-ca-selfsigned"),
            ("Certificate", "envoy-gateway-ca"),
            ("Issuer", "envoy-gateway-ca"),
        ]
        tls += [("Certificate", n) for n in ("envoy-gateway", "envoy", "envoy-rate-limit")]
        for kind, name in [*tls, ("Secret", "envoy-oidc-hmac")]:
            elsewhere[(kind, name)] = proxies
    for r in stack_plan.custom:
        if not r.kind:
            continue
        labels = r.inputs["metadata"]["labels"]
        assert labels["app.kubernetes.io/part-of"] == "openstack", r.k8s_name
        assert labels["app.kubernetes.io/managed-by"] == "pulumi", r.k8s_name
        assert labels["app.kubernetes.io/name"] and labels["app.kubernetes.io/component"], r.k8s_name
        assert r.namespace == elsewhere.get((r.kind, r.k8s_name), namespace), r.k8s_name


@pytest.mark.parametrize(("stack", "replicas", "galera"), [("dev", 1, False), ("prod", 3, True)])
def test_database_and_messaging_scale_with_ha(stack: str, replicas: int, galera: bool) -> None:
    plan = plan_of(stack)
    mariadb = plan.by_name("mariadb", "MariaDB").inputs["spec"]
    assert mariadb["replicas"] == replicas
    assert mariadb.get("galera", {}).get("enabled", False) is galera
    assert plan.by_name("rabbitmq", "RabbitmqCluster").inputs["spec"]["replicas"] == replicas


def test_custom_resources_are_awaited(stack_plan: Plan) -> None:
    for name, kind in (("mariadb", "MariaDB"), ("rabbitmq", "RabbitmqCluster")):
        annotations = stack_plan.by_name(name, kind).inputs["metadata"]["annotations"]
        assert annotations["pulumi.com/waitFor"].startswith("condition=")


def test_operators_can_be_left_to_the_cluster() -> None:
    installed = plan_of("dev")
    skipped = plan_of("dev", operators={"mariadb": {"install": False, "chartVersion": "26.6.0"}})
    charts = lambda plan: {r.name for r in plan.registrations if r.type == "kubernetes:helm.sh/v4:Chart"}  # noqa: E731
    assert "mariadb-operator" in charts(installed)
    assert "mariadb-operator" not in charts(skipped) and "mariadb-operator-crds" in charts(skipped)
    assert waits_for(skipped, "mariadb") == set()


def test_ha_spreads_keystone_and_guards_it_with_a_budget() -> None:
    prod, dev = plan_of("prod"), plan_of("dev")
    api = prod.by_name("keystone-api", "Deployment").inputs["spec"]
    assert api["replicas"] >= 3
    assert "podAntiAffinity" in api["template"]["spec"]["affinity"]
    assert "keystone-api" in objects(prod, "PodDisruptionBudget")
    assert "keystone-api" not in objects(dev, "PodDisruptionBudget")
    assert "affinity" not in dev.by_name("keystone-api", "Deployment").inputs["spec"]["template"]["spec"]


def test_keystone_api_has_probes_resources_and_restricted_security(stack_plan: Plan) -> None:
    pod = pod_template(stack_plan.by_name("keystone-api", "Deployment"))["spec"]
    [container] = pod["containers"]
    assert container["readinessProbe"]["httpGet"]["path"] == "/v3"
    assert container["livenessProbe"]["initialDelaySeconds"] > container["readinessProbe"]["initialDelaySeconds"]
    assert set(container["resources"]) == {"requests", "limits"}
    assert container["securityContext"]["allowPrivilegeEscalation"] is False
    assert container["securityContext"]["capabilities"]["drop"] == ["ALL"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["seccompProfile"]["type"] == "RuntimeDefault"
    assert pod["nodeSelector"] == stack_plan.settings.node_selectors.control_plane


def test_keystone_conf_points_at_the_stack_database_and_cache(stack_plan: Plan) -> None:
    files = stack_plan.by_name("keystone-etc", "Secret").revealed["stringData"]
    conf = parse_ini(files["keystone.conf"])
    ns = stack_plan.settings.namespace
    database = "mariadb-primary" if stack_plan.settings.ha else "mariadb"  # Galera takes writes on its primary
    assert f"@{database}.{ns}.svc.cluster.local:3306/keystone" in conf["database"]["connection"]
    servers = conf["cache"]["memcache_servers"].split(",")
    assert servers[0] == f"memcached-0.memcached.{ns}.svc.cluster.local:11211"
    assert conf["token"]["provider"] == "fernet"


def test_bootstrap_registers_the_stack_region_and_endpoints(stack_plan: Plan) -> None:
    [container] = pod_template(stack_plan.by_name("keystone-bootstrap", "Job"))["spec"]["containers"]
    env = {e["name"]: e.get("value") for e in container["env"]}
    settings = stack_plan.settings
    assert env["OS_BOOTSTRAP_REGION_ID"] == settings.region
    assert env["OS_BOOTSTRAP_PUBLIC_URL"] == f"{settings.endpoints.scheme}://keystone.{settings.endpoints.domain}"
    internal = "https" if settings.tls.internal_enabled else "http"  # https where tls.internal names a CA
    assert env["OS_BOOTSTRAP_INTERNAL_URL"].startswith(f"{internal}://keystone-api.")
    assert env["OS_BOOTSTRAP_PASSWORD"] is None  # from a Secret, never a literal


def _checksum(plan: Plan, name: str, kind: str) -> str:
    return pod_template(plan.by_name(name, kind))["metadata"]["annotations"]["openstack.org/config-checksum"]


def test_a_config_change_rolls_exactly_the_pods_that_read_it() -> None:
    before = plan_of("dev")
    after = plan_of("dev", endpoints={"domain": "openstack.dev.example.com", "clusterDomain": "k8s.internal"})
    assert _checksum(before, "keystone-api", "Deployment") != _checksum(after, "keystone-api", "Deployment")
    # Memcached reads no OpenStack config: a change of it must not restart the cache.
    assert pod_template(before.by_name("memcached", "StatefulSet")) == pod_template(
        after.by_name("memcached", "StatefulSet")
    )
    # The key checks mount no keystone.conf, so their Jobs are not re-run.
    assert _checksum(before, "keystone-fernet-setup", "Job") == _checksum(after, "keystone-fernet-setup", "Job")
