"""The program's own stacks pass the pack: every real resource of dev, staging and prod,
recorded by the mock runtime (tools/runtime.py), judged with the stack's policy config,
both through report.check_resources (the offline plan's call) and policy by policy
through ResourceValidationArgs (the engine's call); and the stacks in the shapes their
settings allow (a CA rotation, Rook...), judged with the config derived from those settings."""

from __future__ import annotations

import copy
from collections.abc import Callable
from functools import cache
from typing import Any

import pytest

from policies.k8s import get
from policies.node_roles import judge
from policies.podspec import pod_templates
from policies.registry import RESOURCE_RULES
from policies.report import check_resources, load_config, objects_from_plan, settings_for
from policies.tls_names import ca_of
from tests.conftest import plan_of
from tools.plan import policy_report
from tools.runtime import run_stack

from .builders import POLICIES, run_policy

STACKS = ("dev", "staging", "prod")


@cache
def planned(stack: str) -> tuple[dict[str, Any], ...]:
    """The stack's resources in the shape tools/plan writes them to plan.json."""
    return tuple(
        {
            "urn": r.urn,
            "type": r.type,
            "name": r.name,
            "parent": r.parent,
            "custom": r.custom,
            "dependencies": r.dependencies,
            "kind": r.kind,
            "k8s_name": r.k8s_name,
            "namespace": r.namespace,
            "inputs": r.inputs,
        }
        for r in run_stack(stack)
    )


@pytest.mark.parametrize("stack", STACKS)
def test_the_stack_has_zero_mandatory_violations(stack: str) -> None:
    resources = copy.deepcopy(list(planned(stack)))
    mandatory = [v.message for v in check_resources(resources, load_config(stack)) if v.enforcement == "mandatory"]
    assert mandatory == []


@pytest.mark.parametrize("stack", STACKS)
def test_the_rules_really_saw_the_stacks_workloads(stack: str) -> None:
    """Not a vacuous pass: the pods the rules judged include the control plane's API and Jobs."""
    pods = [pod for obj in objects_from_plan(planned(stack)) for pod in pod_templates(obj)]
    kinds = {p.obj.kind for p in pods}
    assert {"Deployment", "Job", "MariaDB", "RabbitmqCluster"} <= kinds
    assert "keystone-api" in {p.obj.name for p in pods}


@pytest.mark.parametrize("stack", STACKS)
def test_every_resource_passes_each_mandatory_policy_as_the_engine_calls_it(stack: str) -> None:
    config = load_config(stack)
    checked = 0
    for resource in planned(stack):
        if not resource["custom"] or not resource["type"].startswith("kubernetes:"):
            continue
        for rule in RESOURCE_RULES:
            if config[rule.name]["enforcementLevel"] != "mandatory":
                continue
            assert POLICIES[rule.name].name == rule.name
            manifest = {**resource["inputs"], "apiVersion": resource["inputs"].get("apiVersion", "v1")}
            manifest.setdefault("kind", resource["type"].rsplit(":", 1)[-1])
            assert run_policy(rule.name, manifest, config, urn=resource["urn"]) == [], resource["urn"]
            checked += 1
    assert checked > 50


@pytest.mark.parametrize("stack", STACKS)
def test_every_daemonset_is_a_node_pod_whose_containers_all_hold_their_role(stack: str) -> None:
    """The program builds node pods from the role table; the pack must recognise each of them
    completely (labels, namespace, every container's image), or it judged them as strangers."""
    settings = settings_for(load_config(stack), "privileged-containers")
    for obj in objects_from_plan(planned(stack)):
        if obj.kind == "DaemonSet":
            [(pod, roles)] = judge(obj, settings)
            assert roles.node_pod is not None, roles.refusal
            unheld = [c.name for c in pod.containers() if roles.role(c) is None]
            assert unheld == [], f"{obj.describe()}: {dict(roles.mismatches)}"


def test_a_privileged_keystone_api_in_the_real_stack_is_caught() -> None:
    resources = copy.deepcopy(list(planned("prod")))
    api = next(r for r in resources if r["k8s_name"] == "keystone-api" and r["kind"] == "Deployment")
    api["inputs"]["spec"]["template"]["spec"]["containers"][0]["securityContext"]["privileged"] = True
    found = [v for v in check_resources(resources, load_config("prod")) if v.enforcement == "mandatory"]
    assert [(v.policy, v.urn) for v in found] == [("privileged-containers", api["urn"])]


# Settings no stack file has that bring objects of the kinds the certificate, admission and Rook rules
# judge: a CA rotation's phases (two internal CAs), the stack's issuer, libvirt's own CA beside the internal
# one, Galera (its certificates' usages), and Rook's pools and clients.
PUBLIC = {"issuer": {"kind": "ClusterIssuer", "name": "letsencrypt-staging"}}
VARIANTS: dict[str, tuple[str, dict[str, Any]]] = {
    "rotation-trust": ("staging", {"tls": {"public": PUBLIC, "internal": {
        "selfSigned": True, "generation": 2, "rotation": {"phase": "trust"}}}}),
    "rotation-issue": ("staging", {"tls": {"public": PUBLIC, "internal": {
        "selfSigned": True, "generation": 2, "rotation": {"phase": "issue"}}}}),
    "stack-issuer-rotation": ("staging", {"tls": {"public": PUBLIC, "internal": {
        "issuer": {"kind": "ClusterIssuer", "name": "vault-2026"},
        "rotation": {"phase": "trust", "previousIssuer": {"kind": "ClusterIssuer", "name": "vault-2025"}}}}}),
    "libvirt-and-internal-ca": ("prod", {"tls": {"public": {"issuer": {"kind": "ClusterIssuer", "name": "letsencrypt"}},
                                                 "internal": {"selfSigned": True}, "libvirt": {"selfSigned": True}}}),
    "galera": ("staging", {"ha": True}),
    "rook": ("prod", {"ceph": {"rook": {"cluster": {"name": "ceph", "namespace": "rook-ceph"}}, "external": None}}),
}  # fmt: skip
JUDGED = ("Certificate", "Issuer", "ValidatingAdmissionPolicyBinding", "ReferenceGrant", "CephClient")


@pytest.mark.parametrize("variant", VARIANTS)
def test_the_programs_certificates_issuers_bindings_and_clients_pass_in_every_shape(variant: str) -> None:
    stack, overrides = VARIANTS[variant]
    plan = plan_of(stack, **overrides)
    mandatory = [v["message"] for v in policy_report(plan) if v["enforcement"] == "mandatory"]
    assert mandatory == []
    assert {"Certificate", "ValidatingAdmissionPolicyBinding"} <= {r.kind for r in plan.registrations}


@pytest.mark.parametrize("stack", STACKS)
def test_the_certificate_rules_really_saw_certificates_of_the_stacks_cas(stack: str) -> None:
    config = load_config(stack)
    settings = settings_for(config, "ca-certificates")
    found = [o for o in objects_from_plan(planned(stack)) if o.kind == "Certificate"]
    assert any(ca_of(get(o.props, "spec", "issuerRef"), settings) for o in found)
    kinds = {o.kind for o in objects_from_plan(planned(stack))}
    assert {"Issuer", "ValidatingAdmissionPolicyBinding"} <= kinds


def _extend(field: str, *added: str) -> Callable[[dict[str, Any]], None]:
    return lambda inputs: inputs["spec"][field].extend(added)


def _set(field: str, value: Any) -> Callable[[dict[str, Any]], None]:
    return lambda inputs: inputs["spec"].update({field: value})


def _no_name(inputs: dict[str, Any]) -> None:
    inputs["spec"]["to"][0].pop("name")


def _name_the_ca(inputs: dict[str, Any]) -> None:
    inputs["rules"][0]["resourceNames"].append("internal-ca")


# The program's own objects, changed as a pull request that wants the CA's reach would: (stack, kind,
# name, the change, the policy that must refuse it).
ATTACKS = {
    "mariadbs-names-in-an-apis-certificate": (
        "staging", "Certificate", "keystone-api-internal-tls",
        _extend("dnsNames", "mariadb.openstack.svc", "mariadb"), ["ca-certificates"] * 2),
    "the-ca-issuer-on-another-key": ("staging", "Issuer", "internal-ca", _set("ca", {"secretName": "x"}), ["ca-keys"]),
    "the-binding-only-warns": ("staging", "ValidatingAdmissionPolicyBinding", "openstack-nova-compute-maintenance",
                               _set("validationActions", ["Warn"]), ["admission-control"]),
    "a-grant-of-every-secret": ("prod", "ReferenceGrant", "public-tls-for-gateway", _no_name, ["reference-grants"]),
    "the-bundle-job-reads-the-ca": ("staging", "Role", "internal-ca-bundle", _name_the_ca, ["rbac-grants"]),
}  # fmt: skip


@pytest.mark.parametrize("attack", ATTACKS)
def test_a_real_object_changed_as_an_attack_would_is_caught(attack: str) -> None:
    stack, kind, name, change, policies = ATTACKS[attack]
    resources = copy.deepcopy(list(planned(stack)))
    [target] = [r for r in resources if r["kind"] == kind and r["k8s_name"] == name]
    change(target["inputs"])
    found = [v for v in check_resources(resources, load_config(stack)) if v.enforcement == "mandatory"]
    assert [(v.policy, v.urn) for v in found] == [(policy, target["urn"]) for policy in policies]
