"""What the program declares for nova-compute-maintenance: one pod, its token, its rights, its settings."""

from __future__ import annotations

import pytest
from nova_compute_maintenance import Config

from components.mechanism.internal_tls import CA_DIR, CA_FILE
from components.nodes.maintenance import NAME, SCRIPTS, restart_components
from components.tables.roles import Topology
from tests.conftest import plan_of
from tests.doubles.kubefake import grants_for
from tests.helpers import containers, pod_template, waits_for
from tools.plan import Plan
from tools.runtime import REPO

RBAC = ("ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding")


def _deployment(plan: Plan) -> dict:
    return plan.by_name(NAME, "Deployment").inputs


def test_one_controller_pod_with_its_own_token(stack_plan: Plan) -> None:
    spec = _deployment(stack_plan)["spec"]
    assert spec["replicas"] == 1 and spec["strategy"] == {"type": "Recreate"}  # even under ha (prod)
    pod = spec["template"]["spec"]
    assert pod["serviceAccountName"] == NAME and pod["automountServiceAccountToken"] is True
    [container] = pod["containers"]
    assert container["image"].split("/")[-1].startswith("kolla-toolbox:")
    assert container["args"] == ["python3", "/scripts/nova_compute_maintenance.py"]
    assert container["readinessProbe"]["httpGet"] == container["livenessProbe"]["httpGet"]
    # Every other pod of the stack still gets no token.
    for r in stack_plan.custom:
        # The key rotation CronJobs are the cloud's other API clients (tests/test_key_rotation.py).
        rotation = r.kind == "CronJob" and r.k8s_name in ("keystone-fernet-rotate", "keystone-credential-rotate")
        # So are the compute nodes' libvirt certificate keepers under tls.libvirt (tests/test_libvirt_tls.py).
        keeper = r.kind == "DaemonSet" and str(r.k8s_name).startswith("libvirt-tls")
        # And the Job that writes the internal CA bundle (tests/test_ca_rotation.py).
        keeper |= r.kind == "Job" and r.k8s_name == "internal-ca-bundle"
        if (
            r.kind in ("Deployment", "DaemonSet", "StatefulSet", "Job", "CronJob")
            and r.k8s_name != NAME
            and not rotation
            and not keeper
        ):
            assert pod_template(r)["spec"]["automountServiceAccountToken"] is False, r.k8s_name
    account = stack_plan.by_name(NAME, "ServiceAccount").inputs
    assert account["automountServiceAccountToken"] is False  # only the pod that asks gets a token


def test_its_rights_are_nodes_cluster_wide_pods_in_the_namespace_and_events_in_default(stack_plan: Plan) -> None:
    rbac = [r.inputs for r in stack_plan.custom if r.kind in RBAC]
    namespace = stack_plan.settings.namespace
    assert grants_for(rbac, namespace, NAME) == {
        *((None, "nodes", verb) for verb in ("get", "list", "watch", "patch")),
        (namespace, "pods", "list"),
        (namespace, "pods", "delete"),
        ("default", "events", "create"),
    }
    assert grants_for(rbac, namespace, "default") == set()
    cluster = [r.k8s_name for r in stack_plan.custom if r.kind in ("ClusterRole", "ClusterRoleBinding")]
    assert set(cluster) == {f"{namespace}-{NAME}"}  # cluster-wide names carry the stack's namespace


def test_it_starts_after_the_apis_it_calls_and_the_rights_it_uses(stack_plan: Plan) -> None:
    assert {"nova-api", "placement-api"} <= waits_for(stack_plan, NAME)
    urn = stack_plan.by_name(NAME, "Deployment").urn
    by_urn = {r.urn: r for r in stack_plan.custom}
    before = {(by_urn[u].kind, by_urn[u].k8s_name) for u in stack_plan.ancestors(urn)}
    assert {("ServiceAccount", NAME), ("ClusterRoleBinding", f"openstack-{NAME}"), ("RoleBinding", NAME)} <= before
    assert ("Secret", "compute-credentials") in before


@pytest.mark.parametrize(
    ("topology", "restarted"),
    [
        (Topology.ALL_IN_ONE, ("compute-node",)),
        (Topology.BAREMETAL_HYPERVISOR_SHARED_POD, ("compute-node",)),
        (Topology.BAREMETAL_HYPERVISOR, ("neutron-ovs-agent",)),
        (Topology.POD_PER_SERVICE, ("libvirt", "openvswitch-db", "openvswitch-vswitchd", "neutron-ovs-agent")),
        (Topology.POD_PER_SERVICE_HOST_PID, ("libvirt", "openvswitch-db", "openvswitch-vswitchd", "neutron-ovs-agent")),
    ],
)
def test_a_maintenance_restarts_the_pods_holding_vms_or_the_datapath_and_the_ovs_agent(
    topology: Topology, restarted: tuple[str, ...]
) -> None:
    assert restart_components(topology) == restarted


def test_the_deployments_environment_configures_the_controller(stack_plan: Plan) -> None:
    [container] = containers(stack_plan.by_name(NAME, "Deployment"))
    literal = {e["name"]: e["value"] for e in container["env"] if "value" in e}
    config = Config.from_env(literal)
    assert config.namespace == stack_plan.settings.namespace
    assert config.node_selector == "openstack-compute-node=enabled"
    assert config.restart_components == restart_components(stack_plan.settings.hypervisor_isolation)
    assert config.interval == 10 and config.health_port == container["readinessProbe"]["httpGet"]["port"]
    assert {e["name"] for e in container["env"] if "valueFrom" in e} == {"OS_PASSWORD", "POD_NAME"}
    # The scripts it imports are all mounted next to it, from the ConfigMap that holds them; under
    # internal TLS (staging) also the internal CA, which its clients verify with (OS_CACERT).
    mounted = {m["mountPath"] for m in container["volumeMounts"]}
    tls = stack_plan.settings.tls.internal_enabled
    assert mounted == {f"/scripts/{s}" for s in SCRIPTS} | ({CA_DIR} if tls else set())
    assert literal.get("OS_CACERT") == (CA_FILE if tls else None)
    assert set(SCRIPTS) <= set(stack_plan.by_name("compute-bin", "ConfigMap").inputs["data"])


def test_its_imports_are_the_standard_library_and_its_own_modules() -> None:
    """kolla-toolbox has openstacksdk and keystoneauth1 (Kolla docker/kolla-toolbox/Dockerfile.j2) but no
    Kubernetes client; the scripts import nothing else."""
    import ast
    import sys

    allowed = {*sys.stdlib_module_names, "openstack", "keystoneauth1", *(s.removesuffix(".py") for s in SCRIPTS)}
    for script in SCRIPTS:
        tree = ast.parse((REPO / "components" / "scripts" / script).read_text())
        imported = {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
        imported |= {n.module.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
        assert imported <= allowed, (script, imported - allowed)


@pytest.mark.parametrize("overrides", [{"maintenance": {"enabled": False}}, {"services": {"nova": False}}])
def test_nothing_of_it_without_the_setting_or_without_nova(overrides: dict) -> None:
    plan = plan_of("dev", **overrides)
    assert not [r for r in plan.custom if NAME in (r.k8s_name or "")]


def test_the_readme_documents_the_setting_and_the_annotations() -> None:
    readme = (REPO / "README.md").read_text()
    assert "| `maintenance.enabled` | `true` |" in readme
    for text in ("openstack.org/maintenance=requested", "openstack.org/maintenance-progress", "kubectl drain"):
        assert text in readme
