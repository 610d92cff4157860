"""Namespaces a stack may not take: the cluster's own, an operator's, Rook's, another the program makes.

A namespace the program creates as a Namespace object (Envoy Gateway's, when it installs it) is
deleted by `pulumi destroy` with everything in it, and its create fails where the namespace exists
(pulumi-kubernetes creates client-side since pulumi/pulumi-kubernetes#4278).
"""

from __future__ import annotations

from typing import Any

import pytest

from components.cloud.stack_config import parse_settings
from tests.conftest import plan_of
from tests.helpers import settings_problems
from tests.test_plan_diff import stack_settings

ROOK = {"rook": {"cluster": {"name": "ceph", "namespace": "rook-ceph"}}}


def _with_proxies(namespace: str) -> dict[str, Any]:
    dev = stack_settings("dev")  # installs Envoy Gateway for its own Gateway
    return {**dev, "gateway": {**dev["gateway"], "proxies": {"namespace": namespace}}}


REFUSED: list[tuple[str, dict[str, Any], str, str]] = [
    ("proxies-in-kube-system", _with_proxies("kube-system"), "openstack:gateway.proxies.namespace", "cluster's own"),
    ("proxies-in-default", _with_proxies("default"), "openstack:gateway.proxies.namespace", "cluster's own"),
    ("proxies-where-rabbitmq-runs", _with_proxies("rabbitmq-system"), "openstack:gateway.proxies.namespace",
     "RabbitMQ Cluster Operator"),
    ("cloud-in-rooks-cluster-namespace", {**stack_settings("prod"), "ceph": ROOK, "namespace": "rook-ceph"},
     "openstack:namespace", "CephCluster Rook runs"),
]  # fmt: skip


@pytest.mark.parametrize(("raw", "key", "says"), [c[1:] for c in REFUSED], ids=[c[0] for c in REFUSED])
def test_a_namespace_the_program_must_not_own_is_refused_naming_the_key(
    raw: dict[str, Any], key: str, says: str
) -> None:
    problems = [p for p in settings_problems(raw) if p.startswith(f"{key}:")]
    assert problems, settings_problems(raw)
    assert says in problems[0]


def test_the_defaults_take_namespaces_of_their_own() -> None:
    parse_settings(stack_settings("dev"))
    parse_settings({**stack_settings("prod"), "ceph": ROOK, "operators": {"rook": {"install": True}}})
    # The proxies in the cloud's own namespace make no Namespace (the program only patches that one).
    parse_settings(
        {**_with_proxies("openstack"), "gateway": {**_with_proxies("openstack")["gateway"],
                                                   "proxies": {"namespace": "openstack", "labels": {"a": "b"}}}}
    )  # fmt: skip


def test_namespaces_that_hold_data_are_patched_never_owned() -> None:
    """The cloud's namespace and Rook's (its CephCluster beside the operator, rook-ceph) outlive the stack."""
    plan = plan_of("prod", ceph=ROOK, operators={"rook": {"install": True}})
    namespaces = {r.k8s_name: r.type for r in plan.custom if r.kind == "Namespace"}
    assert namespaces["openstack"] == namespaces["rook-ceph"] == "kubernetes:core/v1:NamespacePatch"
