"""MariaDB, RabbitMQ and memcached: where their operators come from and how clients reach them."""

from __future__ import annotations

from tests.conftest import plan_of
from tools.plan import Plan
from tools.runtime import Registration

HELM_CHART = "kubernetes:helm.sh/v4:Chart"


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
