"""Rotating the internal CA (tls.internal.generation and .rotation): the settings, and each phase's plan.

Read from what the plan registers: the Certificates each phase asks cert-manager for, the Job that
writes the bundle (its environment and rights), what waits for it, and which pod templates carry
the trusted CAs (a change of them rolls those pods).
"""

from __future__ import annotations

import copy
import json
from functools import cache
from typing import Any

import pytest

from components.cloud.stack_config import parse_settings
from components.settings.model import SettingsError
from tests.admission import admits
from tests.conftest import plan_of
from tests.helpers import containers, objects, pod_template
from tests.test_front_door import _check_against_the_crd
from tools import ca_rotation_view, diff_report, plan_diff
from tools.plan import Plan
from tools.runtime import Registration

PUBLIC = {"issuer": {"kind": "ClusterIssuer", "name": "letsencrypt-staging"}}
OLD_ISSUER = {"kind": "ClusterIssuer", "name": "vault-2025"}
NEW_ISSUER = {"kind": "ClusterIssuer", "name": "vault-2026"}
ANNOTATION = "openstack.org/trusted-cas"
WORKLOADS = ("Deployment", "StatefulSet", "DaemonSet")
# The processes that build a TLS context from the CA file once, when they start: memcached's clients.
# keystonemiddleware's token cache in each API (auth_token/__init__.py), oslo.cache's region where
# [cache] is on (keystone, nova's control plane: oslo_cache/core.py), Horizon's sessions (local_settings.py).
READ_ONCE = {
    "keystone-api", "glance-api", "placement-api", "nova-api", "nova-metadata", "neutron-server", "cinder-api",
    "nova-scheduler", "nova-conductor", "nova-novncproxy", "horizon",
}  # fmt: skip


def _tls(internal: dict[str, Any]) -> dict[str, Any]:
    return {"tls": {"public": PUBLIC, "internal": internal}}


@cache
def _plan(phase: str | None, generation: int = 2) -> Plan:
    internal: dict[str, Any] = {"selfSigned": True, "generation": generation}
    if phase:
        internal["rotation"] = {"phase": phase}
    return plan_of("staging", **_tls(internal))


@cache
def _issuer_plan(phase: str | None) -> Plan:
    internal: dict[str, Any] = {"issuer": NEW_ISSUER}
    if phase:
        internal["rotation"] = {"phase": phase, "previousIssuer": OLD_ISSUER}
    return plan_of("staging", **_tls(internal))


def _staging_settings(internal: dict[str, Any]) -> dict[str, Any]:
    gateway = {"className": "envoy", "proxies": {"namespace": "envoy-gateway-system"}}
    return {"gateway": gateway, "endpoints": {"scheme": "https"}, **_tls(internal)}


# (tls.internal, the key the error names, what it says)
REFUSED: list[tuple[dict[str, Any], str, str]] = [
    ({"plainText": True, "rotation": {"phase": "trust"}}, "tls.internal.rotation", "no CA to rotate"),
    ({"selfSigned": True, "rotation": {"phase": "trust"}}, "tls.internal.generation", "2 or more"),
    ({"selfSigned": True, "generation": 2, "rotation": {"phase": "drop"}}, "tls.internal.rotation.phase", "'trust'"),
    ({"selfSigned": True, "generation": 0}, "tls.internal.generation", "greater than or equal to 1"),
    ({"issuer": NEW_ISSUER, "generation": 2}, "tls.internal.generation", "selfSigned: true"),
    ({"issuer": NEW_ISSUER, "rotation": {"phase": "trust"}}, "tls.internal.rotation.previousIssuer", "name the issuer"),
    (
        {"selfSigned": True, "generation": 3, "rotation": {"phase": "issue", "previousIssuer": OLD_ISSUER}},
        "tls.internal.rotation.previousIssuer",
        "the previous generation",
    ),
    (
        {"issuer": NEW_ISSUER, "rotation": {"phase": "issue", "previousIssuer": {**NEW_ISSUER, "kind": "Issuer"}}},
        "tls.internal.rotation.previousIssuer",
        "from one issuer to another",
    ),
    (
        {"issuer": NEW_ISSUER, "rotation": {"phase": "trust", "previousIssuer": PUBLIC["issuer"]}},
        "tls.internal.rotation.previousIssuer",
        "public certificate's issuer",
    ),
]


@pytest.mark.parametrize(("internal", "key", "says"), REFUSED, ids=[f"{r[1]}-{r[2][:12]}" for r in REFUSED])
def test_bad_rotation_settings_name_their_key(internal: dict[str, Any], key: str, says: str) -> None:
    with pytest.raises(SettingsError) as caught:
        parse_settings(_staging_settings(internal))
    assert [p for p in caught.value.problems if p.startswith(f"openstack:{key}:") and says in p], caught.value.problems


@pytest.mark.parametrize(
    "internal",
    [
        {"selfSigned": True, "generation": 2, "rotation": {"phase": "trust"}},
        {"selfSigned": True, "generation": 7},
        {"issuer": NEW_ISSUER, "rotation": {"phase": "issue", "previousIssuer": OLD_ISSUER}},
    ],
)
def test_rotation_settings_are_accepted(internal: dict[str, Any]) -> None:
    assert parse_settings(_staging_settings(internal)).tls.internal_enabled


def _certificates(plan: Plan) -> dict[str, dict[str, Any]]:
    return {name: r.inputs["spec"] for name, r in objects(plan, "Certificate").items()}


def _leaf_issuers(plan: Plan) -> set[str]:
    """The issuers of the certificates the cluster serves (no CA, no trust certificate, not the public one)."""
    return {
        spec["issuerRef"]["name"]
        for name, spec in _certificates(plan).items()
        if not spec.get("isCA") and not name.endswith("-trust") and name != "public-tls"
        and "-trust-" not in name
    }  # fmt: skip


def _env(job: Registration) -> dict[str, str]:
    return {e["name"]: e["value"] for c in containers(job) for e in c.get("env", [])}


def _trusted(plan: Plan) -> list[str]:
    return _env(plan.by_name("internal-ca-bundle", "Job"))["TRUSTED_CAS"].split()


@pytest.mark.parametrize(
    ("phase", "roots", "issues", "trusted"),
    [
        # trust: the new root and its trust Certificate; the bundle holds both, the old CA first; it still issues.
        ("trust", {"internal-ca", "internal-ca-2"}, {"internal-ca"},
         ["internal-ca-trust=Issuer/internal-ca", "internal-ca-2-trust=Issuer/internal-ca-2"]),
        # issue: every certificate names the new CA's Issuer (cert-manager issues each again); both trusted.
        ("issue", {"internal-ca", "internal-ca-2"}, {"internal-ca-2"},
         ["internal-ca-trust=Issuer/internal-ca", "internal-ca-2-trust=Issuer/internal-ca-2"]),
        # done: only the new CA, in the bundle and as the program's root; the old one's objects go.
        (None, {"internal-ca-2"}, {"internal-ca-2"}, ["internal-ca-2-trust=Issuer/internal-ca-2"]),
    ],
)  # fmt: skip
def test_each_phase_of_a_self_signed_rotation(phase: str | None, roots: set[str], issues: set[str],
                                              trusted: list[str]) -> None:  # fmt: skip
    plan = _plan(phase)
    certificates = _certificates(plan)
    assert {name for name, spec in certificates.items() if spec.get("isCA")} == roots
    issuers = {name for name, r in objects(plan, "Issuer").items() if "ca" in r.inputs["spec"]}
    assert issuers == roots  # a CA Issuer per root, nothing signs with a root that is gone
    assert _leaf_issuers(plan) == issues
    assert _trusted(plan) == trusted
    for entry in trusted:
        trust, _, issuer = entry.partition("=")
        spec = certificates[trust]
        _check_against_the_crd(objects(plan, "Certificate")[trust])
        assert spec["usages"] == ["email protection"] and spec["issuerRef"]["name"] == issuer.split("/")[1]


def test_a_rotation_of_the_stacks_issuer_trusts_both_issuers_and_moves_the_certificates_at_issue() -> None:
    trust, issue, done = _issuer_plan("trust"), _issuer_plan("issue"), _issuer_plan(None)
    both = [
        "internal-ca-trust-vault-2025=ClusterIssuer/vault-2025",
        "internal-ca-trust-vault-2026=ClusterIssuer/vault-2026",
    ]
    assert _trusted(trust) == _trusted(issue) == both
    assert _leaf_issuers(trust) == {"vault-2025"} and _leaf_issuers(issue) == {"vault-2026"}
    assert _trusted(done) == ["internal-ca-trust-vault-2026=ClusterIssuer/vault-2026"]
    assert not [name for name, spec in _certificates(trust).items() if spec.get("isCA")]  # no CA of the program


def test_the_bundle_job_reads_only_the_trust_secrets_and_writes_only_the_bundle() -> None:
    plan = _plan("trust")
    job = plan.by_name("internal-ca-bundle", "Job")
    rules = plan.by_name("internal-ca-bundle", "Role").inputs["rules"]
    assert rules == [
        {"apiGroups": [""], "resources": ["secrets"], "resourceNames": ["internal-ca-trust", "internal-ca-2-trust"],
         "verbs": ["get"]},
        {"apiGroups": [""], "resources": ["secrets"], "resourceNames": ["internal-ca-bundle"],
         "verbs": ["get", "update"]},
        # A new stack has no bundle yet; RBAC cannot limit a create to a name.
        {"apiGroups": [""], "resources": ["secrets"], "verbs": ["create"]},
        # Each trusted CA alone, for the gateway's BackendTLSPolicies.
        {"apiGroups": [""], "resources": ["configmaps"], "resourceNames": ["internal-ca-trust", "internal-ca-2-trust"],
         "verbs": ["get", "update"]},
        {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["create"]},
    ]  # fmt: skip
    spec = pod_template(job)["spec"]
    secrets = {v["secret"]["secretName"] for v in spec.get("volumes", []) if "secret" in v}
    assert secrets == set()  # it mounts no CA (it writes the bundle) and no root's key
    assert spec["serviceAccountName"] == "internal-ca-bundle"
    assert _env(job)["BUNDLE_NAME"] == "internal-ca-bundle"


BUNDLE_ACCOUNT = "system:serviceaccount:openstack:internal-ca-bundle"


def _secret_write(
    operation: str, name: str, username: str = BUNDLE_ACCOUNT, namespace: str = "openstack", kind: str = "Secret"
) -> bool:
    """Whether the plan's ValidatingAdmissionPolicy admits this write of a Secret or ConfigMap (tests/admission.py):
    the request as the API server gives it, `resource` its group, version and resource."""
    policy = _plan("trust").by_name("openstack-internal-ca-bundle", "ValidatingAdmissionPolicy").inputs["spec"]
    written = {"apiVersion": "v1", "kind": kind, "metadata": {"name": name, "namespace": namespace}}
    resource = {"group": "", "version": "v1", "resource": f"{kind.lower()}s"}
    request = {"operation": operation, "name": name, "namespace": namespace, "userInfo": {"username": username},
               "resource": resource}  # fmt: skip
    return admits(policy, request, written, written if operation == "UPDATE" else None)


def test_the_bundle_jobs_right_to_create_secrets_is_narrowed_to_the_bundle_before_it_is_bound() -> None:
    plan = _plan("trust")
    policy = plan.by_name("openstack-internal-ca-bundle", "ValidatingAdmissionPolicy").inputs["spec"]
    binding = plan.by_name("openstack-internal-ca-bundle", "ValidatingAdmissionPolicyBinding").inputs["spec"]
    assert binding == {"policyName": "openstack-internal-ca-bundle", "validationActions": ["Deny"]}
    assert policy["failurePolicy"] == "Fail"
    assert _secret_write("CREATE", "internal-ca-bundle") and _secret_write("UPDATE", "internal-ca-bundle")
    # What the Role's create on every Secret would let the Job's token do, refused.
    assert not _secret_write("CREATE", "keystone-admin")  # another Secret of the namespace
    assert not _secret_write("CREATE", "internal-ca-2")  # a CA's name: a root of its own, with its key
    assert not _secret_write("UPDATE", "internal-ca-trust")
    assert not _secret_write("CREATE", "internal-ca-bundle", namespace="kube-system")
    assert _secret_write("CREATE", "keystone-admin", username="system:serviceaccount:openstack:keystone-bootstrap")
    # Its ConfigMaps: the trusted CAs' only, never a Secret of those names, nor another ConfigMap.
    for trust in ("internal-ca-trust", "internal-ca-2-trust"):
        assert _secret_write("CREATE", trust, kind="ConfigMap") and _secret_write("UPDATE", trust, kind="ConfigMap")
    assert not _secret_write("UPDATE", "keystone-bin", kind="ConfigMap")
    assert not _secret_write("CREATE", "internal-ca-bundle", kind="ConfigMap")
    # The RoleBinding that grants the rights waits for the policy and its binding.
    role_binding = plan.by_name("internal-ca-bundle", "RoleBinding")
    narrowing = {plan.by_name("openstack-internal-ca-bundle", kind).urn for kind in (
        "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding")}  # fmt: skip
    assert narrowing <= set(plan.dependencies[role_binding.urn])


def test_internal_tls_needs_kubernetes_130_for_the_bundle_jobs_admission_policy() -> None:
    old = {"kubernetesVersion": "1.29", "maintenance": {"enabled": False}}  # its own policy aside
    with pytest.raises(SettingsError) as caught:
        parse_settings({**_staging_settings({"selfSigned": True}), **old})
    assert [p for p in caught.value.problems if p.startswith("openstack:kubernetesVersion:") and "internal TLS" in p]
    parse_settings({**_staging_settings({"plainText": True}), **old})  # no bundle, no Job


@pytest.mark.parametrize("phase", ["trust", None])
def test_everything_that_mounts_the_bundle_waits_for_the_job_that_writes_it(phase: str | None) -> None:
    plan = _plan(phase)
    graph = plan.graph
    mounts = set()
    for kind in (*WORKLOADS, "Job", "CronJob"):
        for name, r in objects(plan, kind).items():
            volumes = pod_template(r)["spec"].get("volumes", [])
            if any((v.get("secret") or {}).get("secretName") == "internal-ca-bundle" for v in volumes):
                mounts.add(name if kind != "CronJob" else f"{name} (CronJob)")
    assert len(mounts) > 30
    for key in mounts | {"mariadb", "rabbitmq"}:  # the data stores' pods mount it too (their operators)
        assert "internal-ca-bundle" in {n.name for n in graph[key].needs}, key
    assert graph["internal-ca-bundle"].needs == tuple(n for n in graph["internal-ca-bundle"].needs
                                                     if n.name == "internal-tls-bin")  # fmt: skip


def _marked(plan: Plan) -> dict[str, str]:
    found = {}
    for kind in WORKLOADS:
        for name, r in objects(plan, kind).items():
            annotations = pod_template(r).get("metadata", {}).get("annotations", {})
            if ANNOTATION in annotations:
                found[name] = annotations[ANNOTATION]
    return found


def test_what_reads_the_ca_once_rolls_when_the_trusted_cas_change_and_only_then() -> None:
    trust, issue, done = _marked(_plan("trust")), _marked(_plan("issue")), _marked(_plan(None))
    assert set(trust) == set(issue) == set(done) == READ_ONCE
    assert set(trust.values()) == {"internal-ca-trust,internal-ca-2-trust"}
    assert trust == issue  # issuing again changes no trusted CA: no restart for it
    assert set(done.values()) == {"internal-ca-2-trust"}  # dropping the old CA restarts them again
    # Only the marker differs: the pods of a phase roll for that, not for something else.
    for name in READ_ONCE:
        kind = next(k for k in WORKLOADS if name in objects(_plan("trust"), k))
        before, after = (copy.deepcopy(pod_template(objects(_plan(p), kind)[name])) for p in ("trust", None))
        before["metadata"]["annotations"].pop(ANNOTATION)
        after["metadata"]["annotations"].pop(ANNOTATION)
        assert before == after, name


def test_a_stack_that_never_rotated_keeps_its_templates_and_one_ca() -> None:
    staging = plan_of("staging")
    assert _marked(staging) == {}
    assert _trusted(staging) == ["internal-ca-trust=Issuer/internal-ca"]
    assert _marked(_issuer_plan(None)) == {}  # the stack's own issuer, no rotation: as before
    assert (
        json.loads(_env(staging.by_name("internal-ca-bundle", "Job"))["CA_BUNDLE_LABELS"])["k8s.mariadb.com/watch"]
        == ""
    )


def test_plain_text_has_no_bundle_job() -> None:
    dev = plan_of("dev")
    assert "internal-ca-bundle" not in objects(dev, "Job")


def _change(before: Plan, after: Plan) -> dict[str, Any]:
    found = ca_rotation_view.change(plan_diff.view_of(before), plan_diff.view_of(after))
    assert found is not None
    return found


def test_against_says_what_each_phase_does_and_which_pods_it_restarts() -> None:
    rolled = {f"Deployment/{name}" for name in READ_ONCE}
    trust = _change(plan_of("staging"), _plan("trust"))
    assert trust["warnings"] == [] and set(trust["restarted"]) == rolled
    assert trust["trusted"] == {"before": ["internal-ca"], "after": ["internal-ca", "internal-ca-2"]}
    said = "\n".join(trust["steps"])
    assert "Job `internal-ca-bundle` runs again" in said and "MariaDB `mariadb`: rolls" in said
    assert "RabbitmqCluster `rabbitmq`: no restart" in said and "BackendTLSPolicy" in said
    issue = _change(_plan("trust"), _plan("issue"))
    assert issue["warnings"] == [] and issue["restarted"] == []  # issuing again restarts nothing of the program's
    assert issue["issuer"] == {"before": "internal-ca", "after": "internal-ca-2"}
    done = _change(_plan("issue"), _plan(None))
    assert done["warnings"] == [] and set(done["restarted"]) == rolled
    assert any("deletes the root(s) internal-ca" in s and "kubectl delete secret" in s for s in done["steps"])
    assert ca_rotation_view.change(plan_diff.view_of(plan_of("staging")), plan_diff.view_of(plan_of("staging"))) is None
    # Rendered where a pull request shows it.
    old, new = plan_diff.view_of(_plan("trust")), plan_diff.view_of(_plan("issue"))
    result = {**plan_diff.diff(old, new), "ca_rotation": ca_rotation_view.change(old, new)}
    assert "**Internal CA** (rotation phase `issue`)" in diff_report.render(result, "main")


@pytest.mark.parametrize(
    ("before", "after", "warning"),
    [
        ((None, 1), ("issue", 2), "internal-ca-2 issues before every bundle trusts it"),
        ((None, 1), (None, 2), "internal-ca-2 issues before every bundle trusts it"),
        (("trust", 2), (None, 2), "drops internal-ca, which issued the certificates"),
    ],
)
def test_against_warns_of_a_skipped_phase(before: tuple[str | None, int], after: tuple[str | None, int],
                                          warning: str) -> None:  # fmt: skip
    found = _change(_plan(*before), _plan(*after))
    assert [w for w in found["warnings"] if w.startswith(warning)], found["warnings"]


@pytest.mark.parametrize("stack", ["dev", "staging", "prod"])
def test_a_root_keeps_its_key_when_cert_manager_renews_it_and_leaves_get_new_ones(stack: str) -> None:
    """rotationPolicy Never on every CA the program makes (public, internal, libvirt, the gateway's own):
    a renewed root with a new key would no longer verify one certificate it signed before."""
    certificates = [r.inputs["spec"] for r in plan_of(stack).custom if r.kind == "Certificate"]
    roots = [spec for spec in certificates if spec.get("isCA")]
    assert roots
    assert all(spec["privateKey"]["rotationPolicy"] == "Never" for spec in roots), roots
    leaves = [spec for spec in certificates if not spec.get("isCA") and "privateKey" in spec]
    assert leaves and all(spec["privateKey"]["rotationPolicy"] == "Always" for spec in leaves)
