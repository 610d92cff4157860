"""Admission after the pack (admission-control, admission-policies-bound): no webhook or mutating
policy changes or sees what the pack judged, the program's ValidatingAdmissionPolicies deny wherever
they match and each has its binding; the program's own policies and bindings pass."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from policies.report import load_config
from tests.helpers import objects
from tools.plan import Plan

from .builders import run_policy
from .test_stack_rules import run_stack_policy

STAGING = load_config("staging")
API = "admissionregistration.k8s.io/v1"
CHART = "urn:pulumi:test::openstack::openstack:infra:X$kubernetes:helm.sh/v4:Chart$kubernetes:{}::x"


def policy(name: str = "openstack-nova-compute-maintenance", **spec: Any) -> dict[str, Any]:
    rules = [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["UPDATE"], "resources": ["nodes"]}]
    body = {"failurePolicy": "Fail", "matchConstraints": {"resourceRules": rules},
            "validations": [{"expression": "true"}], **spec}  # fmt: skip
    return {"apiVersion": API, "kind": "ValidatingAdmissionPolicy", "metadata": {"name": name}, "spec": body}


def binding(name: str = "openstack-nova-compute-maintenance", **spec: Any) -> dict[str, Any]:
    body = {"policyName": name, "validationActions": ["Deny"], **spec}
    return {"apiVersion": API, "kind": "ValidatingAdmissionPolicyBinding", "metadata": {"name": name}, "spec": body}


def mutating(kind: str = "MutatingAdmissionPolicy") -> dict[str, Any]:
    """A MutatingAdmissionPolicy that gives every pod hostPID, after the pack judged it."""
    pods = {"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["pods"]}
    host_pid = {"expression": "Object{spec: Object.spec{hostPID: true}}"}
    spec = {
        "matchConstraints": {"resourceRules": [pods]},
        "mutations": [{"patchType": "ApplyConfiguration", "applyConfiguration": host_pid}],
    }
    return {"apiVersion": "admissionregistration.k8s.io/v1beta1", "kind": kind, "metadata": {"name": "x"}, "spec": spec}


def webhook(kind: str) -> dict[str, Any]:
    hook = {"name": "x.example.org", "clientConfig": {"url": "https://hook.example.org"}, "sideEffects": "None",
            "admissionReviewVersions": ["v1"],
            "rules": [{"apiGroups": ["*"], "apiVersions": ["*"], "operations": ["*"], "resources": ["*"]}]}  # fmt: skip
    return {"apiVersion": API, "kind": kind, "metadata": {"name": "x"}, "webhooks": [hook]}


@pytest.mark.parametrize(
    ("manifest", "found"),
    [
        (binding(validationActions=["Audit"]), 'spec.validationActions=["Audit"] is not allowed; allowed: Deny among'),
        (binding(validationActions=["Warn", "Audit"]), "Audit and Warn only report"),
        (binding(validationActions=[]), "spec.validationActions=[]"),
        (
            binding(matchResources={"objectSelector": {"matchLabels": {"never": "x"}}}),
            "spec.matchResources is not allowed",
        ),
        (binding(paramRef={"name": "x", "parameterNotFoundAction": "Allow"}), "spec.paramRef is not allowed"),
        (policy(failurePolicy="Ignore"), 'spec.failurePolicy="Ignore" is not allowed; allowed: Fail'),
        (mutating(), "admission: MutatingAdmissionPolicy is not allowed"),
        (mutating("MutatingAdmissionPolicyBinding"), "MutatingAdmissionPolicyBinding is not allowed"),
        (webhook("MutatingWebhookConfiguration"), "MutatingWebhookConfiguration is not allowed"),
        (webhook("ValidatingWebhookConfiguration"), "Secrets included"),
    ],
)
def test_admission_that_lets_through_or_changes_what_the_pack_judged_is_refused(
    manifest: dict[str, Any], found: str
) -> None:
    [message] = run_policy("admission-control", manifest, STAGING)
    assert found in message, message


def test_webhooks_are_refused_in_charts_too_and_a_charts_own_bindings_are_its_own() -> None:
    for manifest in (webhook("MutatingWebhookConfiguration"), mutating()):
        resource_type = f"kubernetes:{manifest['apiVersion']}:{manifest['kind']}"
        urn = CHART.format(f"{manifest['apiVersion']}:{manifest['kind']}")
        assert run_policy("admission-control", manifest, STAGING, urn=urn, resource_type=resource_type)
    warn = binding(validationActions=["Warn"])
    assert run_policy("admission-control", warn, STAGING, urn=CHART.format(f"{API}:{warn['kind']}")) == []


def test_the_stacks_policies_and_bindings_pass_and_are_bound(stack_plan: Plan) -> None:
    config = load_config(stack_plan.stack)
    manifests: list[tuple[dict, tuple[str, ...]]] = []
    for kind in ("ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"):
        for found in objects(stack_plan, kind).values():
            manifest = {k: found.inputs[k] for k in ("apiVersion", "kind", "metadata", "spec")}
            assert run_policy("admission-control", manifest, config) == [], found.k8s_name
            manifests.append((manifest, ()))
    assert len(manifests) >= 2  # the maintenance controller's policy and binding at least
    assert run_stack_policy("admission-policies-bound", manifests, config) == []


def test_a_policy_without_its_binding_is_reported() -> None:
    other = binding()
    other["metadata"]["name"] = other["spec"]["policyName"] = "openstack-something-else"
    [(urn, message)] = run_stack_policy("admission-policies-bound", [(policy(), ()), (other, ())], STAGING)
    assert "ValidatingAdmissionPolicy::openstack-nova-compute-maintenance" in urn
    assert "a ValidatingAdmissionPolicyBinding with spec.policyName=openstack-nova-compute-maintenance is not set" in (
        message
    )
    assert run_stack_policy("admission-policies-bound", [(policy(), ()), (copy.deepcopy(binding()), ())], STAGING) == []
