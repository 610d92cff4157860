"""MariaDB, RabbitMQ and memcached: where their operators come from and how clients reach them."""

from __future__ import annotations

from tests.conftest import plan_of
from tests.helpers import waits_for
from tools.plan import Plan
from tools.runtime import Registration

HELM_CHART = "kubernetes:helm.sh/v4:Chart"
CONFIG_FILE = "kubernetes:yaml/v2:ConfigFile"
# Pinned below v2.22.0, whose manifest needs cert-manager (cluster-operator issue #2187).
RABBITMQ_OPERATOR = "https://github.com/rabbitmq/cluster-operator/releases/download/v2.21.1/cluster-operator.yml"


def _charts(plan: Plan) -> dict[str, Registration]:
    return {r.name: r for r in plan.registrations if r.type == HELM_CHART}


def test_mariadb_operator_comes_from_its_oci_charts_and_its_crds_outlive_the_chart() -> None:
    charts = _charts(plan_of("dev"))
    crds, operator = charts["mariadb-operator-crds"], charts["mariadb-operator"]
    assert crds.inputs["chart"] == "oci://ghcr.io/mariadb-operator/charts/mariadb-operator-crds"
    assert operator.inputs["chart"] == "oci://ghcr.io/mariadb-operator/charts/mariadb-operator"
    assert crds.inputs["version"] == operator.inputs["version"] == "26.6.0"
    assert "repositoryOpts" not in crds.inputs and "repositoryOpts" not in operator.inputs
    # Deleting the CRDs would cascade-delete every MariaDB: Pulumi must leave them in the cluster.
    assert crds.retain_on_delete
    assert not operator.retain_on_delete


def _manifests(plan: Plan) -> list[Registration]:
    return [r for r in plan.registrations if r.type == CONFIG_FILE]


def test_rabbitmq_operator_comes_from_its_pinned_release_manifest() -> None:
    plan = plan_of("dev")
    [operator] = _manifests(plan)
    assert operator.inputs == {"file": RABBITMQ_OPERATOR}
    # A remote component: one resource under the mock runtime, in the plan and its waves.
    assert operator.remote and operator in plan.custom
    assert not [r for r in _charts(plan).values() if "rabbitmq" in r.inputs["chart"]]
    cluster = plan.by_name("rabbitmq", "RabbitmqCluster")
    assert cluster.inputs["spec"]["image"] == "rabbitmq:4.2.8-management"
    assert operator.urn in plan.dependencies[cluster.urn]


def test_a_cluster_that_runs_the_rabbitmq_operator_gets_none_installed() -> None:
    plan = plan_of("dev", operators={"rabbitmq": {"install": False, "version": "v2.21.1"}})
    assert _manifests(plan) == []
    assert waits_for(plan, "rabbitmq") == set()
    assert plan.by_name("rabbitmq", "RabbitmqCluster").inputs["spec"]["image"] == "rabbitmq:4.2.8-management"
