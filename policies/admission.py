"""Admission after the pack: nothing changes or lets through what the pack judged.

`admission-control`: webhooks (Mutating/ValidatingWebhookConfiguration) and MutatingAdmissionPolicies
(and their bindings) are refused in every object, charts' too: a mutating one changes a pod after the
pack judged it (a MutatingAdmissionPolicy adding hostPID), and any webhook is handed every object it
matches, Secrets included, and may refuse them all. The program narrows rights the pack lets through
with ValidatingAdmissionPolicies (the maintenance controller's node patches, the CA bundle Job's
Secrets, the nodes' CertificateRequests): in its own objects, a binding denies
(`validationActions` holds Deny; Audit and Warn only report) wherever its policy matches (no
`matchResources`, no `paramRef`), and a policy fails closed (no `failurePolicy: Ignore`).

`admission-policies-bound` (stack): every ValidatingAdmissionPolicy of the program has a binding of the
program that names it, so a binding removed, or renamed to another policy, shows too.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from policies.k8s import K8sObject, get, items
from policies.messages import forbidden, missing, not_allowed
from policies.settings import PackSettings

GROUP = "admissionregistration.k8s.io"
POLICY, BINDING = "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"
REFUSED = {
    "MutatingWebhookConfiguration": "it changes objects after the pack judged them, and is handed every object it "
    "matches",
    "ValidatingWebhookConfiguration": "it is handed every object it matches (Secrets included) and may refuse "
    "them all; the program narrows with ValidatingAdmissionPolicies",
    "MutatingAdmissionPolicy": "it changes objects after the pack judged them (a pod's hostPID, say)",
    "MutatingAdmissionPolicyBinding": "it applies a MutatingAdmissionPolicy: objects change after the pack judged them",
}
NARROWING = {"matchResources": "narrows where its policy applies", "paramRef": "hands its policy parameters"}


def _binding(obj: K8sObject) -> Iterator[str]:
    actions = items(get(obj.props, "spec", "validationActions"))
    if "Deny" not in actions:
        why = "Audit and Warn only report: what the policy narrows would pass"
        yield not_allowed(obj, "binding", "spec.validationActions", actions, "Deny among them", why)
    for field, does in NARROWING.items():
        if get(obj.props, "spec", field) is not None:
            why = f"it {does}: the program's policies apply wherever they match, and take no parameters"
            yield forbidden(obj, "binding", f"spec.{field}", "policyName and validationActions", why)


def admission_control(obj: K8sObject, settings: PackSettings) -> list[str]:
    if obj.group != GROUP:
        return []
    if obj.kind in REFUSED:
        allowed = "ValidatingAdmissionPolicies and their bindings, which only refuse"
        return [forbidden(obj, "admission", obj.kind, allowed, REFUSED[obj.kind])]
    if obj.from_chart:
        return []  # a chart's own policies are its own; the kinds above are refused there too
    if obj.kind == BINDING:
        return list(_binding(obj))
    if obj.kind == POLICY and get(obj.props, "spec", "failurePolicy") == "Ignore":
        why = "a request the policy cannot evaluate would pass"
        return [not_allowed(obj, "policy", "spec.failurePolicy", "Ignore", "Fail (the default)", why)]
    return []


def admission_policies_bound(objects: Sequence[K8sObject], settings: PackSettings) -> list[tuple[str, str]]:
    own = [o for o in objects if o.group == GROUP and not o.from_chart]
    bound = {get(o.props, "spec", "policyName") for o in own if o.kind == BINDING}
    found = []
    for obj in own:
        if obj.kind == POLICY and obj.name not in bound:
            field = f"a {BINDING} with spec.policyName={obj.name}"
            why = "a policy without a binding applies nowhere"
            found.append((obj.urn, missing(obj, "policy", field, "one that denies", why)))
    return found
