"""MariaDB, RabbitMQ and memcached: where their operators come from and how clients reach them."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pulumi
import pytest

from components.infrastructure.child_transforms import KEEP_DEFINITIONS
from components.mechanism.inifile import parse_ini
from tests.conftest import plan_of
from tests.helpers import containers, horizon_settings, objects, waits_for
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
    # retainOnDelete set on the chart would not reach them (pulumi-kubernetes #3065): a transform does.
    assert KEEP_DEFINITIONS.does in crds.transforms


def _crd(name: str) -> dict[str, Any]:
    """A CustomResourceDefinition as the charts and the manifest carry it (abridged)."""
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": name},
        "spec": {"group": name.split(".", 1)[1], "names": {"kind": "X", "plural": name.split(".")[0]}},
    }


def _child(type_: str, props: dict[str, Any], parent: pulumi.Resource | None = None) -> pulumi.ResourceTransformArgs:
    return pulumi.ResourceTransformArgs(True, type_, "child", props, pulumi.ResourceOptions(parent=parent))


def test_keep_definitions_retains_each_crd_and_nothing_else() -> None:
    crd = _crd("rabbitmqclusters.rabbitmq.com")
    result = KEEP_DEFINITIONS(_child("kubernetes:apiextensions.k8s.io/v1:CustomResourceDefinition", crd))
    assert isinstance(result, pulumi.ResourceTransformResult)
    assert result.opts is not None and result.opts.retain_on_delete is True
    assert result.props == crd and result.props is crd  # the object itself is as released
    for type_, kind in (("kubernetes:apps/v1:Deployment", "Deployment"), ("kubernetes:core/v1:Namespace", "Namespace")):
        assert KEEP_DEFINITIONS(_child(type_, {"kind": kind, "metadata": {"name": "x"}})) is None


def test_keep_definitions_keeps_the_options_a_child_already_has() -> None:
    args = pulumi.ResourceTransformArgs(
        True,
        "kubernetes:apiextensions.k8s.io/v1:CustomResourceDefinition",
        "mariadbs.k8s.mariadb.com",
        _crd("mariadbs.k8s.mariadb.com"),
        pulumi.ResourceOptions(ignore_changes=["metadata"], depends_on=[]),
    )
    result = KEEP_DEFINITIONS(args)
    assert result is not None and result.opts is not None
    assert result.opts.ignore_changes == ["metadata"] and result.opts.retain_on_delete


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_every_operator_chart_and_manifest_keeps_its_crds(stack: str) -> None:
    """Whatever the program installs from an operator's chart or manifest keeps its CRDs on delete."""
    plan = plan_of(stack)
    installed = [r for r in plan.registrations if r.type in (HELM_CHART, CONFIG_FILE)]
    operators = {"mariadb-operator-crds", "mariadb-operator", "rabbitmq-cluster-operator"}
    gateway = plan.settings.gateway
    # Envoy Gateway's chart brings the Gateway API's CRDs: deleting them would delete every route.
    installs_gateway = gateway is not None and gateway.envoy_gateway.install
    assert {r.name for r in installed} == operators | ({"envoy-gateway"} if installs_gateway else set())
    for r in installed:
        assert KEEP_DEFINITIONS.does in r.transforms, r.name


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


DATABASE_URL = re.compile(r"mysql\+pymysql://[^@\s]+@([^:/\s]+):3306/")


def _texts(plan: Plan) -> Iterator[str]:
    """Every rendered file and every literal env value of the plan, secrets shown."""
    for r in plan.custom:
        if r.kind in ("Secret", "ConfigMap"):
            yield from (r.revealed.get("stringData") or r.revealed.get("data") or {}).values()
        elif r.kind in ("Deployment", "DaemonSet", "StatefulSet", "Job", "CronJob"):
            for container in containers(r):
                yield from (e["value"] for e in container.get("env", []) if "value" in e)


@pytest.mark.parametrize(
    ("stack", "service"), [("dev", "mariadb"), ("staging", "mariadb"), ("prod", "mariadb-primary")]
)
def test_every_database_client_uses_the_service_the_operator_means_for_it(stack: str, service: str) -> None:
    plan = plan_of(stack)
    settings = plan.settings
    host = f"{service}.{settings.namespace}.svc.{settings.endpoints.cluster_domain}"
    # Galera (ha) takes writes on its primary only; `mariadb` is for a standalone server.
    galera = plan.by_name("mariadb", "MariaDB").inputs["spec"].get("galera", {}).get("enabled", False)
    assert galera is (service == "mariadb-primary")
    urls = [m for text in _texts(plan) for m in DATABASE_URL.findall(text)]
    assert len(urls) >= 6 and set(urls) == {host}
    db_inits = [j for name, j in objects(plan, "Job").items() if name.endswith("-db-init")]
    assert db_inits
    for job in db_inits:
        [container] = containers(job)
        env = {e["name"]: e.get("value") for e in container["env"]}
        assert env["DB_ADDRESS"] == f"{host}:3306", job.k8s_name


@pytest.mark.parametrize(("stack", "replicas"), [("dev", 1), ("staging", 1), ("prod", 3)])
def test_memcached_servers_are_each_named_in_every_client(stack: str, replicas: int) -> None:
    plan = plan_of(stack)
    settings = plan.settings
    [memcached] = [r for r in plan.custom if r.k8s_name == "memcached" and r.kind in ("Deployment", "StatefulSet")]
    spec = memcached.inputs["spec"]
    assert memcached.kind == "StatefulSet" and spec["replicas"] == replicas
    assert spec["serviceName"] == "memcached" and spec["podManagementPolicy"] == "Parallel"
    service = plan.by_name("memcached", "Service").inputs["spec"]
    assert service["clusterIP"] == "None" and service["publishNotReadyAddresses"] is False
    assert service["selector"].items() <= spec["template"]["metadata"]["labels"].items()
    domain = f"memcached.{settings.namespace}.svc.{settings.endpoints.cluster_domain}"
    servers = [f"memcached-{i}.{domain}:11211" for i in range(replicas)]
    files = {s: plan.by_name(f"{s}-etc", "Secret").revealed["stringData"] for s in ("keystone", "glance", "horizon")}
    keystone = parse_ini(files["keystone"]["keystone.conf"])
    assert keystone["cache"]["memcache_servers"].split(",") == servers
    glance = parse_ini(files["glance"]["glance-api.conf"])
    assert glance["keystone_authtoken"]["memcached_servers"].split(",") == servers
    django = horizon_settings(files["horizon"]["local_settings.py"])
    assert django["CACHES"]["default"]["LOCATION"] == servers  # PyMemcacheCache hashes keys over a list
    # Nothing reaches memcached through one address for all (the Service's own name).
    shared = re.compile(rf"(?<![\w.-]){re.escape(domain)}")
    assert not [text for text in _texts(plan) if shared.search(text)]
    assert "memcached" in waits_for(plan, "keystone-api")
