"""RBAC the pack judges (rbac-grants): what would hand over the cluster or its secrets is refused;
what the program itself grants (key rotation, the maintenance controller) passes; the operators'
released RBAC is advice, except what none of them needs."""

from __future__ import annotations

from typing import Any

import pytest

from components.tables.roles import Topology
from policies.report import check_objects, load_config

from .builders import k8s_object, messages, stack_config

STAGING = stack_config(Topology.POD_PER_SERVICE)
CHART = "openstack:infra:X$kubernetes:helm.sh/v4:Chart"
RBAC = "rbac.authorization.k8s.io/v1"


def role(*rules: dict[str, Any], kind: str = "Role") -> dict[str, Any]:
    metadata = {"name": "r", "namespace": "openstack"} if kind == "Role" else {"name": "r"}
    return {"apiVersion": RBAC, "kind": kind, "metadata": metadata, "rules": list(rules)}


def rule(resources: list[str], verbs: list[str], groups: list[str] | None = None, **extra: Any) -> dict[str, Any]:
    return {"apiGroups": [""] if groups is None else groups, "resources": resources, "verbs": verbs, **extra}


def binding(role_name: str, kind: str = "ClusterRoleBinding", subjects: list[dict] | None = None) -> dict[str, Any]:
    metadata = {"name": "b"} if kind == "ClusterRoleBinding" else {"name": "b", "namespace": "openstack"}
    return {
        "apiVersion": RBAC,
        "kind": kind,
        "metadata": metadata,
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role_name},
        "subjects": subjects or [{"kind": "ServiceAccount", "name": "x", "namespace": "openstack"}],
    }


def found(manifest: dict[str, Any], parent: str = "") -> list[tuple[str, str]]:
    return [(v.policy, v.enforcement) for v in check_objects([k8s_object(manifest, parent)], STAGING)]


REFUSED: list[tuple[str, dict[str, Any], str]] = [
    ("cluster-admin", binding("cluster-admin"), "roleRef.name=\"cluster-admin\""),
    ("cluster-admin-in-a-namespace", binding("cluster-admin", "RoleBinding"), "roleRef.name=\"cluster-admin\""),
    ("admin", binding("admin", "RoleBinding"), "roleRef.name=\"admin\""),
    ("everyone", binding("view", subjects=[{"kind": "Group", "name": "system:authenticated"}]),
     "subjects[0].name=\"system:authenticated\""),
    ("anonymous", binding("r", subjects=[{"kind": "User", "name": "system:anonymous"}]),
     "subjects[0].name=\"system:anonymous\""),
    ("wildcard-verbs", role(rule(["configmaps"], ["*"])), "rules[0].verbs[0]=\"*\""),
    ("wildcard-resources", role(rule(["*"], ["get"])), "rules[0].resources[0]=\"*\""),
    ("wildcard-group-and-resources", role(rule(["*"], ["list"], ["*"]), kind="ClusterRole"),
     "rules[0].resources[0]=\"*\""),
    ("secrets-for-all", role(rule(["secrets"], ["get", "list"])), "rules[0].resources[0]=\"secrets\""),
    ("secrets-through-any-group", role(rule(["secrets"], ["watch"], ["*"])), "rules[0].resources[0]=\"secrets\""),
    ("secrets-written", role(rule(["secrets"], ["update"])), "rules[0].resources[0]=\"secrets\""),
    ("nodes-proxy", role(rule(["nodes/proxy"], ["get"]), kind="ClusterRole"), "rules[0].resources[0]=\"nodes/proxy\""),
    ("pods-exec", role(rule(["pods/exec"], ["create"])), "rules[0].resources[0]=\"pods/exec\""),
    ("any-exec", role(rule(["*/exec"], ["create"])), "rules[0].resources[0]=\"*/exec\""),
    ("pods-attach", role(rule(["pods/attach"], ["create"])), "rules[0].resources[0]=\"pods/attach\""),
    ("escalate", role(rule(["roles"], ["escalate"], ["rbac.authorization.k8s.io"])), "rules[0].verbs[0]=\"escalate\""),
    ("bind", role(rule(["clusterroles"], ["bind"], ["rbac.authorization.k8s.io"]), kind="ClusterRole"),
     "rules[0].verbs[0]=\"bind\""),
    ("impersonate", role(rule(["serviceaccounts"], ["impersonate"]), kind="ClusterRole"),
     "rules[0].verbs[0]=\"impersonate\""),
    ("aggregation", {**role(kind="ClusterRole"),
                     "aggregationRule": {"clusterRoleSelectors": [{"matchLabels": {"x": "y"}}]}}, "aggregationRule"),
]  # fmt: skip


@pytest.mark.parametrize(("manifest", "field"), [c[1:] for c in REFUSED], ids=[c[0] for c in REFUSED])
def test_rbac_that_hands_over_the_cluster_or_its_secrets_is_refused(manifest: dict[str, Any], field: str) -> None:
    violations = check_objects([k8s_object(manifest)], STAGING)
    assert [(v.policy, v.enforcement) for v in violations] == [("rbac-grants", "mandatory")]
    assert field in violations[0].message, violations[0].message


def test_a_patch_of_a_role_is_judged_as_the_role() -> None:
    resource_type = "kubernetes:rbac.authorization.k8s.io/v1:RolePatch"
    obj = k8s_object(role(rule(["secrets"], ["get"])), resource_type=resource_type)
    assert [v.policy for v in check_objects([obj], STAGING)] == ["rbac-grants"]


PASSING: list[tuple[str, dict[str, Any]]] = [
    # keystone-fernet-rotate's Role: named Secrets only.
    ("named-secrets", role(rule(["secrets"], ["get", "update"], resourceNames=["keystone-fernet-keys"]))),
    # Creating a Secret cannot be narrowed by name, and reads nothing.
    ("create-secrets", role(rule(["secrets"], ["create"]))),
    # The maintenance controller's rights (components/nodes/maintenance.py).
    ("nodes", role(rule(["nodes"], ["get", "list", "watch", "patch"]), kind="ClusterRole")),
    ("pods", role(rule(["pods"], ["list", "delete"]))),
    ("events", role(rule(["events"], ["create"]))),
    ("a-role-of-its-own", binding("openstack-nova-compute-maintenance")),
    ("view", binding("view", "RoleBinding")),
]


@pytest.mark.parametrize("manifest", [c[1] for c in PASSING], ids=[c[0] for c in PASSING])
def test_what_the_program_grants_passes(manifest: dict[str, Any]) -> None:
    assert found(manifest) == []


# The operators' released RBAC (config/rbac/role.yaml of the RabbitMQ Cluster Operator v2.21.1,
# mariadb-operator's rbac-namespace.yaml): Secrets of every namespace and exec into pods.
RABBITMQ_OPERATOR = role(
    rule(["configmaps", "persistentvolumeclaims", "secrets", "serviceaccounts", "services"],
         ["create", "get", "list", "update", "watch"]),
    rule(["pods/exec"], ["create"]),
    kind="ClusterRole",
)  # fmt: skip


def test_an_operators_released_rbac_is_advice() -> None:
    violations = check_objects([k8s_object(RABBITMQ_OPERATOR, CHART)], load_config("staging"))
    assert [(v.policy, v.enforcement) for v in violations] == [("third-party-chart-hygiene", "advisory")] * 2
    # The same rules written by the program are refused.
    assert found(RABBITMQ_OPERATOR) == [("rbac-grants", "mandatory")] * 2


@pytest.mark.parametrize(
    "manifest",
    [binding("cluster-admin"), role(rule(["configmaps"], ["*"])), role(rule(["users"], ["impersonate"]))],
    ids=["cluster-admin", "wildcard-verbs", "impersonate"],
)
def test_what_no_operator_needs_is_refused_in_charts_too(manifest: dict[str, Any]) -> None:
    assert ("rbac-grants", "mandatory") in found(manifest, CHART)


def test_messages_say_why() -> None:
    [message] = messages(check_objects([k8s_object(binding("cluster-admin"))], STAGING))
    assert message.startswith('ClusterRoleBinding b: binding: roleRef.name="cluster-admin" is not allowed')
    assert message.endswith("(cluster-admin holds every right in the cluster)")


KEYS: list[tuple[str, dict[str, Any], str]] = [
    ("the-internal-ca", role(rule(["secrets"], ["get"], resourceNames=["internal-ca"])),
     'rules[0].resourceNames[0]="internal-ca" is not allowed; allowed: Secrets that hold no private key '
     "(Secret internal-ca holds the internal CA's key"),
    ("a-server-key", role(rule(["secrets"], ["get"], resourceNames=["keystone-fernet-keys", "mariadb-internal-tls"])),
     'rules[0].resourceNames[1]="mariadb-internal-tls"'),
    ("a-client-key-written", role(rule(["secrets"], ["update"], resourceNames=["mariadb-client-tls"])),
     'resourceNames[0]="mariadb-client-tls"'),
    ("the-public-key-cluster-wide", role(rule(["secrets"], ["watch"], ["*"], resourceNames=["public-tls"]),
                                         kind="ClusterRole"), 'resourceNames[0]="public-tls"'),
    ("rooks-admin-key", role(rule(["secrets"], ["get"], resourceNames=["rook-ceph-mon"])),
     "the Ceph cluster's admin key"),
]  # fmt: skip


@pytest.mark.parametrize(("manifest", "field"), [c[1:] for c in KEYS], ids=[c[0] for c in KEYS])
def test_a_secret_that_holds_a_private_key_is_named_by_no_role(manifest: dict[str, Any], field: str) -> None:
    """Named Secrets pass the rule above; a CA's or a certificate's key does not, in a chart's RBAC either."""
    for parent in ("", CHART):
        violations = check_objects([k8s_object(manifest, parent)], load_config("staging"))
        assert [(v.policy, v.enforcement) for v in violations] == [("rbac-grants", "mandatory")]
        assert field in violations[0].message, violations[0].message


def test_the_ca_bundle_jobs_rights_pass() -> None:
    """It reads a CA's trust copy (a certificate good for no TLS peer) and writes the bundle."""
    bundle = role(rule(["secrets"], ["get"], resourceNames=["internal-ca-trust"]),
                  rule(["secrets"], ["get", "update"], resourceNames=["internal-ca-bundle"]))  # fmt: skip
    assert check_objects([k8s_object(bundle)], load_config("staging")) == []
    # The CA of another stack's settings is no CA of staging's.
    assert check_objects([k8s_object(role(rule(["secrets"], ["get"], resourceNames=["libvirt-ca"])))],
                         load_config("staging")) == []  # fmt: skip
