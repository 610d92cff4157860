"""RBAC lets nova-compute-maintenance patch any field of any Node; a ValidatingAdmissionPolicy
narrows it to its own annotations. Without it a compromised controller could relabel a
control-plane node so that the privileged compute DaemonSets land there.

The policy's CEL is evaluated with cel-python (celpy, tests/admission.py), a CEL implementation, over the
objects the API server would hand it: `object` and `oldObject` of an UPDATE (a PATCH is one),
`request.userInfo`, and `variables` computed first, as a ValidatingAdmissionPolicy does
(matchConditions all true, then every validation true, or the request is denied).
"""

from __future__ import annotations

import copy
from typing import Any

import pytest
from kubernetes_validate import ValidationError
from maintenance_plan import PHASE, PROGRESS, STATE

from components.cloud.stack_config import parse_settings
from components.nodes.maintenance import NAME
from components.settings.model import KUBERNETES_VERSIONS, SettingsError
from tests.admission import admits as policy_admits
from tests.conftest import plan_of
from tools import schemas
from tools.plan import Plan

NODE: dict[str, Any] = {
    "apiVersion": "v1",
    "kind": "Node",
    "metadata": {
        "name": "n1",
        "resourceVersion": "7",
        "labels": {"kubernetes.io/hostname": "n1", "openstack-compute-node": "enabled"},
        "annotations": {"node.alpha.kubernetes.io/ttl": "0", "openstack.org/maintenance": "requested"},
    },
    "spec": {"podCIDR": "10.244.1.0/24"},
}


def admits(plan: Plan, old: dict[str, Any], new: dict[str, Any], username: str) -> bool:
    """Whether the stack's ValidatingAdmissionPolicy admits this UPDATE of a Node by `username`."""
    policy = plan.by_name(f"{plan.settings.namespace}-{NAME}", "ValidatingAdmissionPolicy").inputs["spec"]
    return policy_admits(policy, {"operation": "UPDATE", "userInfo": {"username": username}}, new, old)


@pytest.fixture(scope="module")
def staging() -> Plan:
    return plan_of("staging")


def controller(plan: Plan) -> str:
    return f"system:serviceaccount:{plan.settings.namespace}:{NAME}"


def with_annotations(**annotations: str | None) -> dict[str, Any]:
    node = copy.deepcopy(NODE)
    for key, value in annotations.items():
        if value is None:
            node["metadata"]["annotations"].pop(key, None)
        else:
            node["metadata"]["annotations"][key] = value
    return node


OWN = {
    "openstack.org/maintenance": "migrating",
    "openstack.org/maintenance-progress": "moving vm3 (1 of 5)",
    "openstack.org/maintenance-state": '{"phase": "migrating"}',
}


def test_the_controller_may_set_and_remove_its_own_annotations(staging: Plan) -> None:
    assert set(OWN) == {PHASE, PROGRESS, STATE}  # what the controller writes (maintenance_plan.py)
    after = copy.deepcopy(NODE)
    after["metadata"]["annotations"].update(OWN)
    after["metadata"]["managedFields"] = [{"manager": NAME, "operation": "Update"}]  # the server adds this
    assert admits(staging, NODE, after, controller(staging))
    removed = copy.deepcopy(NODE)
    del removed["metadata"]["annotations"]["openstack.org/maintenance"]
    assert admits(staging, NODE, removed, controller(staging))
    bare = copy.deepcopy(NODE)
    del bare["metadata"]["annotations"]
    annotated = copy.deepcopy(bare)
    annotated["metadata"]["annotations"] = {"openstack.org/maintenance": "refused"}
    assert admits(staging, bare, annotated, controller(staging))  # annotating a node that had none
    assert admits(staging, annotated, bare, controller(staging))  # and removing the last one


def relabelled(node: dict[str, Any]) -> None:
    node["metadata"]["labels"]["openstack-compute-node"] = "disabled"


def control_plane_made_compute(node: dict[str, Any]) -> None:
    node["metadata"]["labels"]["node-role.kubernetes.io/control-plane"] = ""


def cordoned(node: dict[str, Any]) -> None:
    node["spec"]["unschedulable"] = True


def tainted(node: dict[str, Any]) -> None:
    node["spec"]["taints"] = [{"key": "x", "effect": "NoSchedule"}]


def other_annotation(node: dict[str, Any]) -> None:
    node["metadata"]["annotations"]["node.alpha.kubernetes.io/ttl"] = "30"


def other_annotation_removed(node: dict[str, Any]) -> None:
    del node["metadata"]["annotations"]["node.alpha.kubernetes.io/ttl"]


def lookalike_annotation(node: dict[str, Any]) -> None:
    node["metadata"]["annotations"]["openstack.org/maintenance-x"] = "1"


def labels_removed(node: dict[str, Any]) -> None:
    del node["metadata"]["labels"]


def finalizer(node: dict[str, Any]) -> None:
    node["metadata"]["finalizers"] = ["example.com/keep"]


def owner(node: dict[str, Any]) -> None:
    node["metadata"]["ownerReferences"] = [{"apiVersion": "v1", "kind": "Pod", "name": "p", "uid": "u"}]


@pytest.mark.parametrize(
    "change",
    [relabelled, control_plane_made_compute, cordoned, tainted, other_annotation, other_annotation_removed,
     lookalike_annotation, labels_removed, finalizer, owner],
)  # fmt: skip
def test_the_controller_may_change_nothing_else(staging: Plan, change: Any) -> None:
    after = copy.deepcopy(NODE)
    change(after)
    assert not admits(staging, NODE, after, controller(staging))
    # Anyone else (an operator, the kubelet) is not held to it.
    assert admits(staging, NODE, after, "kubernetes-admin")
    assert admits(staging, NODE, after, f"system:serviceaccount:other:{NAME}")


def test_the_policy_binds_and_denies(staging: Plan) -> None:
    name = f"{staging.settings.namespace}-{NAME}"
    policy = staging.by_name(name, "ValidatingAdmissionPolicy").inputs
    assert policy["apiVersion"] == "admissionregistration.k8s.io/v1"
    spec = policy["spec"]
    assert spec["failurePolicy"] == "Fail"
    assert spec["matchConstraints"]["resourceRules"] == [
        {"apiGroups": [""], "apiVersions": ["v1"], "operations": ["UPDATE"], "resources": ["nodes"]}
    ]
    binding = staging.by_name(name, "ValidatingAdmissionPolicyBinding").inputs
    assert binding["spec"] == {"policyName": name, "validationActions": ["Deny"]}


def test_its_rights_come_after_the_narrowing(staging: Plan) -> None:
    """The ClusterRoleBinding is created only once the policy and its binding exist."""
    name = f"{staging.settings.namespace}-{NAME}"
    rights = staging.by_name(name, "ClusterRoleBinding")
    narrowing = {staging.by_name(name, kind).urn for kind in ("ValidatingAdmissionPolicy",
                                                              "ValidatingAdmissionPolicyBinding")}  # fmt: skip
    assert narrowing <= set(staging.ancestors(rights.urn))


@pytest.mark.parametrize("version", [v for v in KUBERNETES_VERSIONS if int(v.split(".")[1]) >= 30])
def test_the_objects_validate_for_every_version_that_has_them(staging: Plan, version: str) -> None:
    name = f"{staging.settings.namespace}-{NAME}"
    for kind in ("ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"):
        try:
            schemas.validate(copy.deepcopy(staging.by_name(name, kind).inputs), f"{version}.0", strict=True)
        except ValidationError as error:
            pytest.fail(f"{kind} invalid for {version}: {error}")


@pytest.mark.parametrize("version", [v for v in KUBERNETES_VERSIONS if int(v.split(".")[1]) < 30])
def test_a_cluster_too_old_for_the_policy_is_a_settings_error(version: str) -> None:
    with pytest.raises(SettingsError) as caught:
        parse_settings({"kubernetesVersion": version})
    [problem] = [p for p in caught.value.problems if p.startswith("openstack:kubernetesVersion: ")]
    assert "1.30" in problem and "maintenance.enabled: false" in problem
    # Without the controller, nothing needs the policy.
    parse_settings({"kubernetesVersion": version, "maintenance": {"enabled": False}})
