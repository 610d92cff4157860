"""Who signs with the stack's CA keys (ca-keys).

A CA Issuer of the stack (`caIssuers`, in its namespace) signs with the Secret of its own name, and
the self-signed Issuer `<root>-selfsigned` signs only that root (components/mechanism/certificates.py):
an Issuer of the stack's CA that signs with another Secret makes every certificate of the CA, and its
trust copy in the bundle every client reads, someone else's. No other Issuer names a CA's or a
certificate's Secret (`ca.secretName`, or any `...SecretRef`): it would sign with, or hand out, that key.
The program declares no ClusterIssuer: one signs for every namespace of the cluster, and the stack's
named ClusterIssuers are the cluster owner's. And no Secret of the program takes the place of one
cert-manager writes (a CA's or a certificate's key) or of one the clients trust (the bundle, a trust copy),
and no ConfigMap of a trust copy's name, which the CA bundle Job writes for the gateway's BackendTLSPolicies
(components/infrastructure/ca_rotation.py): its ca.crt would be a CA the clients or the gateway trust.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from policies.k8s import K8sObject, get, is_list, mapping
from policies.messages import forbidden, not_allowed
from policies.podspec import join
from policies.settings import PackSettings
from policies.tls_names import GROUP, SIGNER_SUFFIX, ca_secrets, key_secret, written_for_trust

ISSUER_TYPES = ("ca", "selfSigned", "acme", "vault", "venafi")  # cert-manager's IssuerConfig


def secret_refs(value: Any, path: str = "spec") -> Iterator[tuple[str, str]]:
    """Every Secret an issuer's spec names: `secretName`, and the `name` of any `...SecretRef`."""
    if isinstance(value, Mapping):
        for key, inner in value.items():
            at = join(path, str(key))
            if key == "secretName" and isinstance(inner, str):
                yield at, inner
            elif str(key).lower().endswith("secretref") and isinstance(get(inner, "name"), str):
                yield f"{at}.name", get(inner, "name")
            else:
                yield from secret_refs(inner, at)
    elif is_list(value):
        for index, inner in enumerate(value):
            yield from secret_refs(inner, join(path, index))


def _signs_with(obj: K8sObject, allowed: str, expected: Mapping[str, Any], why: str) -> Iterator[str]:
    spec = mapping(get(obj.props, "spec"))
    for kind in ISSUER_TYPES:
        if kind in spec and kind not in expected:
            yield forbidden(obj, "issuer", f"spec.{kind}", allowed, why)
    for kind, value in expected.items():
        if kind not in spec or any(get(spec, kind, key) != inner for key, inner in value.items()):
            yield not_allowed(obj, "issuer", f"spec.{kind}", get(spec, kind), allowed, why)


def _issuer(obj: K8sObject, settings: PackSettings) -> Iterator[str]:
    cas = ca_secrets(settings)
    if obj.name in cas:
        why = f"Issuer {obj.name} is the {cas[obj.name]} CA: it signs with the CA's key, Secret {obj.name}"
        yield from _signs_with(obj, f"ca.secretName {obj.name} only", {"ca": {"secretName": obj.name}}, why)
        return
    root = obj.name.removesuffix(SIGNER_SUFFIX)
    if obj.name.endswith(SIGNER_SUFFIX) and root in cas:
        why = f"it signs the {cas[root]} CA's root {root}: a signer with a key of its own would own the CA"
        yield from _signs_with(obj, "selfSigned only", {"selfSigned": {}}, why)
        return
    yield from _names_no_key(obj, settings)


def _names_no_key(obj: K8sObject, settings: PackSettings) -> Iterator[str]:
    for field, name in secret_refs(get(obj.props, "spec")):
        held = key_secret(name, settings)
        if held:
            why = f"Secret {name} holds {held}: only its own Issuer signs with it, nobody else reads it"
            yield not_allowed(obj, "issuer", field, name, "a Secret of its own", why)


def _written_for_it(obj: K8sObject, settings: PackSettings) -> Iterator[str]:
    """A Secret or ConfigMap of the program named as one cert-manager or the CA bundle Job writes."""
    held = key_secret(obj.name, settings) if obj.kind == "Secret" else None
    if held or written_for_trust(obj.name):
        what = held or "its ca.crt, a CA that is trusted"
        why = f"cert-manager or the bundle Job writes {obj.kind} {obj.name} ({what}): the program's would replace it"
        yield forbidden(obj, obj.kind.lower(), "metadata.name", f"a name of the program's own {obj.kind}s", why)


def ca_keys(obj: K8sObject, settings: PackSettings) -> list[str]:
    in_stack = obj.namespace in (None, settings.namespace)
    if obj.group == "core" and obj.kind in ("Secret", "ConfigMap"):
        return list(_written_for_it(obj, settings)) if in_stack else []
    if obj.group != GROUP:
        return []
    if obj.kind == "ClusterIssuer":
        why = "it signs for every namespace; the stack's CAs are Issuers of its namespace, or the cluster's own"
        return [forbidden(obj, "issuer", "ClusterIssuer", "Issuers in the stack's namespace", why)]
    if obj.kind == "Issuer" and in_stack:
        return list(_issuer(obj, settings))
    return []
