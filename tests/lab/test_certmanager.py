"""The lab's cert-manager: each Certificate issued into its Secret with what cert-manager v1.21 writes there."""

from __future__ import annotations

import base64
import datetime
from typing import Any

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.verification import PolicyBuilder, Store

from tests.conftest import STACKS, plan_of
from tests.lab.cloud.certmanager import CertManager, Issued

NS = "openstack"
HOSTS = ["keystone.cloud.test", "nova.cloud.test"]


def _object(kind: str, name: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "cert-manager.io/v1", "kind": kind, "metadata": {"name": name, "namespace": NS}, "spec": spec}


def _issuer(kind: str, name: str) -> dict[str, str]:
    return {"group": "cert-manager.io", "kind": kind, "name": name}


# The program's self-signed CA and its leaf (components/mechanism/certificates.py), the leaf listed first:
# cert-manager issues it once the CA's Secret exists.
LEAF = _object("Certificate", "public-tls", {
    "secretName": "public-tls", "dnsNames": HOSTS, "duration": "2160h", "renewBefore": "720h",
    "privateKey": {"algorithm": "ECDSA", "size": 256, "rotationPolicy": "Always"},
    "usages": ["server auth", "digital signature"], "issuerRef": _issuer("Issuer", "public-ca"),
})  # fmt: skip
ROOT_SPEC = {
    "isCA": True, "commonName": "public-ca", "secretName": "public-ca", "duration": "87600h",
    "privateKey": {"algorithm": "ECDSA", "size": 256}, "issuerRef": _issuer("Issuer", "public-ca-selfsigned"),
}  # fmt: skip
SELF_SIGNED_CA = [
    _object("Issuer", "public-ca-selfsigned", {"selfSigned": {}}),
    _object("Certificate", "public-ca", ROOT_SPEC),
    _object("Issuer", "public-ca", {"ca": {"secretName": "public-ca"}}),
]


def _verify(issued: Issued, host: str) -> None:
    """A client that trusts only the issued certificate's root, as a browser verifies a server."""
    roots = x509.load_pem_x509_certificates(issued.trust_anchor.encode())
    verifier = PolicyBuilder().store(Store(roots)).build_server_verifier(x509.DNSName(host))
    verifier.verify(issued.chain[0], list(issued.chain[1:]))


def test_a_ca_issuer_signs_with_its_self_signed_root_and_writes_what_cert_manager_writes() -> None:
    manager = CertManager([LEAF, *SELF_SIGNED_CA])
    assert manager.issue_all() == []
    issued = manager.secrets[(NS, "public-tls")]
    root = manager.secrets[(NS, "public-ca")]
    manifest = issued.manifest()
    assert manifest["type"] == "kubernetes.io/tls"
    assert sorted(manifest["data"]) == ["ca.crt", "tls.crt", "tls.key"]
    # tls.crt is the leaf alone (the self-signed root is left out), ca.crt the root.
    assert len(x509.load_pem_x509_certificates(base64.b64decode(manifest["data"]["tls.crt"]))) == 1
    assert issued.data["ca.crt"] == root.data["tls.crt"] == root.data["ca.crt"]
    assert manifest["metadata"]["annotations"] == {
        "cert-manager.io/common-name": "",
        "cert-manager.io/alt-names": ",".join(HOSTS),
        "cert-manager.io/ip-sans": "",
        "cert-manager.io/uri-sans": "",
        "cert-manager.io/certificate-name": "public-tls",
        "cert-manager.io/issuer-name": "public-ca",
        "cert-manager.io/issuer-kind": "Issuer",
        "cert-manager.io/issuer-group": "cert-manager.io",
    }
    assert manifest["metadata"]["labels"] == {"controller.cert-manager.io/fao": "true"}
    _verify(issued, HOSTS[1])
    leaf = issued.leaf
    assert leaf.issuer == root.leaf.subject
    assert leaf.not_valid_after_utc - leaf.not_valid_before_utc == datetime.timedelta(hours=2160)
    usage = leaf.extensions.get_extension_for_class(x509.KeyUsage).value
    assert usage.digital_signature and not usage.key_encipherment and not usage.key_cert_sign
    eku = leaf.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert list(eku) == [x509.oid.ExtendedKeyUsageOID.SERVER_AUTH]
    assert not leaf.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    # ECDSA P-256 in SEC 1 PEM (cert-manager's PKCS1 default), the certificate's own key.
    assert issued.data["tls.key"].startswith("-----BEGIN EC PRIVATE KEY-----")
    key = serialization.load_pem_private_key(issued.data["tls.key"].encode(), None)
    assert isinstance(key, ec.EllipticCurvePrivateKey) and key.curve.name == "secp256r1"
    assert key.public_key() == leaf.public_key()


def test_a_ca_certificate_carries_cert_sign_and_its_key_ids() -> None:
    manager = CertManager(SELF_SIGNED_CA)
    manager.issue_all()
    root = manager.secrets[(NS, "public-ca")].leaf
    assert root.issuer == root.subject
    assert root.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    usage = root.extensions.get_extension_for_class(x509.KeyUsage).value
    # isCA adds cert sign to the default usages (digital signature, key encipherment).
    assert usage.key_cert_sign and usage.digital_signature and usage.key_encipherment
    ski = root.extensions.get_extension_for_class(x509.SubjectKeyIdentifier).value.digest
    assert root.extensions.get_extension_for_class(x509.AuthorityKeyIdentifier).value.key_identifier == ski
    assert root.not_valid_after_utc - root.not_valid_before_utc == datetime.timedelta(hours=87600)


def test_a_clusterissuer_the_plan_only_names_is_a_lab_acme_ca_reported_as_a_stand_in() -> None:
    leaf = {**LEAF, "spec": {**LEAF["spec"], "issuerRef": _issuer("ClusterIssuer", "letsencrypt")}}
    manager = CertManager([leaf])
    assert manager.issue_all() == []
    assert list(manager.stand_ins) == ["ClusterIssuer letsencrypt"]
    issued = manager.secrets[(NS, "public-tls")]
    # What ACME returns: the leaf and the intermediate, no CA; the root is the clients' to trust.
    assert sorted(issued.data) == ["tls.crt", "tls.key"] and len(issued.chain) == 2
    assert issued.annotations["cert-manager.io/issuer-kind"] == "ClusterIssuer"
    _verify(issued, HOSTS[0])
    with pytest.raises(x509.verification.VerificationError):
        _verify(issued, "horizon.cloud.test")  # a name the certificate does not carry


def test_a_missing_issuer_leaves_the_certificate_pending() -> None:
    manager = CertManager([LEAF])  # the CA Issuer public-ca is not there
    problems = manager.issue_all()
    assert problems == ["Certificate public-tls: Issuer public-ca does not exist in openstack: cert-manager leaves "
                        "it pending"]  # fmt: skip
    assert manager.secrets == {}


def test_fields_the_lab_does_not_implement_are_errors() -> None:
    odd = {**LEAF, "spec": {**LEAF["spec"], "keystores": {"pkcs12": {"create": True}}}}
    manager = CertManager([odd, *SELF_SIGNED_CA])
    assert manager.issue_all() == [
        "Certificate public-tls: Certificate fields ['keystores'] are not implemented by the lab's cert-manager"
    ]


def test_defaults_are_cert_managers_rsa_2048_pkcs1_ninety_days_and_pkcs8_on_request() -> None:
    self_signed = _issuer("Issuer", "public-ca-selfsigned")
    plain = _object("Certificate", "plain", {"secretName": "plain", "dnsNames": ["a.test"], "issuerRef": self_signed})
    big_key = {"algorithm": "RSA", "size": 4096, "encoding": "PKCS8"}
    pkcs8 = _object("Certificate", "pkcs8", {**plain["spec"], "secretName": "pkcs8", "privateKey": big_key})
    manager = CertManager([plain, pkcs8, SELF_SIGNED_CA[0]])
    assert manager.issue_all() == []
    issued = manager.secrets[(NS, "plain")]
    assert issued.data["tls.key"].startswith("-----BEGIN RSA PRIVATE KEY-----")
    assert isinstance(issued.key, rsa.RSAPrivateKey) and issued.key.key_size == 2048
    assert issued.leaf.not_valid_after_utc - issued.leaf.not_valid_before_utc == datetime.timedelta(days=90)
    assert isinstance(issued.leaf.signature_hash_algorithm, hashes.SHA256)
    usage = issued.leaf.extensions.get_extension_for_class(x509.KeyUsage).value
    assert usage.digital_signature and usage.key_encipherment
    # Self-signed: the certificate is its own ca.crt.
    assert issued.data["ca.crt"] == issued.data["tls.crt"]
    big = manager.secrets[(NS, "pkcs8")]
    assert big.data["tls.key"].startswith("-----BEGIN PRIVATE KEY-----")
    assert isinstance(big.leaf.signature_hash_algorithm, hashes.SHA512)  # a 4096-bit signer signs with SHA-512


@pytest.mark.parametrize("policy", ["Always", "Never"])
def test_renewal_makes_a_new_key_unless_the_rotation_policy_keeps_it(policy: str) -> None:
    leaf = {**LEAF, "spec": {**LEAF["spec"], "privateKey": {"algorithm": "ECDSA", "rotationPolicy": policy}}}
    manager = CertManager([leaf, *SELF_SIGNED_CA])
    manager.issue_all()
    before = manager.secrets[(NS, "public-tls")]
    after = manager.renew(NS, "public-tls")
    assert after.leaf.serial_number != before.leaf.serial_number
    assert (after.data["tls.key"] == before.data["tls.key"]) is (policy == "Never")
    assert manager.secrets[(NS, "public-tls")] is after


@pytest.mark.parametrize("stack", STACKS)
def test_every_certificate_of_the_stacks_is_issued(stack: str) -> None:
    resources = [r.revealed for r in plan_of(stack).custom]
    manager = CertManager(resources)
    assert manager.issue_all() == []
    wanted = {(c["metadata"]["namespace"], c["spec"]["secretName"]) for c in manager.certificates}
    assert wanted and set(manager.secrets) == wanted
    public = manager.secrets[(NS, "public-tls")]
    assert sorted(public.annotations["cert-manager.io/alt-names"].split(",")) == sorted(
        next(c for c in manager.certificates if c["metadata"]["name"] == "public-tls")["spec"]["dnsNames"]
    )
    # staging and prod name the cluster's ClusterIssuers; dev's issuers are its own.
    assert bool(manager.stand_ins) is (stack != "dev")


def test_after_a_later_plan_only_new_and_changed_certificates_are_issued_in_their_issuers_order() -> None:
    """A `pulumi up` that adds a second root and moves the leaf to it (a CA rotation's phases): the new root is
    issued first (its CA Issuer needs its Secret), the leaf again from it; a Certificate left as it was keeps
    its Secret; one removed leaves its Secret, as cert-manager does."""
    manager = CertManager([LEAF, *SELF_SIGNED_CA])
    assert manager.issue_all() == []
    first_root = manager.secrets[(NS, "public-ca")]
    second_root = _object("Certificate", "public-ca-2", {**ROOT_SPEC, "commonName": "public-ca-2",
                                                         "secretName": "public-ca-2"})  # fmt: skip
    moved = _object("Certificate", "public-tls", {**LEAF["spec"], "issuerRef": _issuer("Issuer", "public-ca-2")})
    later = [
        moved,
        *SELF_SIGNED_CA,
        second_root,
        _object("Issuer", "public-ca-2", {"ca": {"secretName": "public-ca-2"}}),
    ]
    issued = manager.apply(later)
    assert [i.certificate for i in issued] == ["public-ca-2", "public-tls"]
    assert manager.secrets[(NS, "public-ca")] is first_root  # unchanged: not issued again
    leaf = manager.secrets[(NS, "public-tls")]
    assert leaf.annotations["cert-manager.io/issuer-name"] == "public-ca-2"
    assert leaf.leaf.issuer == manager.secrets[(NS, "public-ca-2")].leaf.subject
    assert manager.apply(later) == []  # nothing changed since
    assert manager.apply([moved, *SELF_SIGNED_CA[:1], second_root, later[-1]]) == []  # public-ca removed
    assert (NS, "public-ca") in manager.secrets
