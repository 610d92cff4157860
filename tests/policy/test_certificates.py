"""The stack's CAs (ca-certificates, ca-keys): a Certificate from one of them names only what its
Secret serves, no Issuer but the CA's own signs with its key, and no Secret of the program takes the
place of one cert-manager writes; the program's own certificates and issuers pass (test_real_stacks.py
runs every one of them)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from components.cloud.stack_config import parse_settings
from components.infrastructure import mariadb_tls
from components.mechanism import certificates, internal_tls
from components.nodes import libvirt_tls
from components.settings.gateway import CA_BUNDLE, INTERNAL_CA, LIBVIRT_CA, PUBLIC_CA, LibvirtTls
from components.settings.model import Settings
from policies import tls_names
from policies.certificates import owners, service_of
from policies.report import load_config
from tools.policy_config import policy_config

from .builders import run_policy

STAGING, PROD, DEV = load_config("staging"), load_config("prod"), load_config("dev")
MARIADB_NAMES = ["mariadb", "mariadb.openstack", "mariadb.openstack.svc", "mariadb.openstack.svc.cluster.local"]


def certificate(name: str, issuer: str = "internal-ca", kind: str = "Issuer", **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "cert-manager.io/v1",
        "kind": "Certificate",
        "metadata": {"name": name, "namespace": "openstack"},
        "spec": {"secretName": name, "issuerRef": {"group": "cert-manager.io", "kind": kind, "name": issuer}, **spec},
    }


def issuer(name: str, kind: str = "Issuer", **spec: Any) -> dict[str, Any]:
    metadata = {"name": name, "namespace": "openstack"} if kind == "Issuer" else {"name": name}
    return {"apiVersion": "cert-manager.io/v1", "kind": kind, "metadata": metadata, "spec": spec}


def secret(name: str, **data: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name, "namespace": "openstack"}, **data}


SERVER_KEY = "mariadb-internal-tls"


def test_the_packs_names_are_the_programs() -> None:
    """tls_names keeps its own copy of the program's names (the pack imports no program code)."""
    assert internal_tls.secret_name("keystone-api") == "keystone-api" + tls_names.SERVER_SUFFIX
    assert mariadb_tls.CLIENT_SECRET == "mariadb" + tls_names.CLIENT_SUFFIX
    assert mariadb_tls.CLIENT_NAME == "mariadb-client"
    assert certificates.PUBLIC_TLS == tls_names.PUBLIC_CERTIFICATE
    assert libvirt_tls.PROXY_CERT == tls_names.CONSOLE_CERTIFICATE
    assert libvirt_tls.proxy_certificate(LibvirtTls(self_signed=True))["commonName"] == tls_names.CONSOLE_NAME
    assert CA_BUNDLE == tls_names.CA_BUNDLE
    for root in (INTERNAL_CA, LIBVIRT_CA, PUBLIC_CA, f"{INTERNAL_CA}-2"):
        assert tls_names.TRUST_COPY.fullmatch(f"{root}-trust")
    assert tls_names.TRUST_COPY.fullmatch(f"{INTERNAL_CA}-trust-vault-2026")


def test_the_stacks_cas_are_their_settings() -> None:
    assert STAGING["ca-certificates"]["caIssuers"] == {
        "Issuer/internal-ca": "internal", "ClusterIssuer/letsencrypt-staging": "public"}  # fmt: skip
    assert PROD["ca-certificates"]["caIssuers"] == {
        "Issuer/libvirt-ca": "libvirt", "ClusterIssuer/letsencrypt": "public"}  # fmt: skip
    assert DEV["ca-certificates"]["caIssuers"] == {"Issuer/public-ca": "public"}


@pytest.mark.parametrize(
    ("name", "service"),
    [
        ("keystone-api", "keystone-api"),
        ("keystone-api.openstack.svc.cluster.local", "keystone-api"),
        ("memcached-0.memcached.openstack.svc", "memcached"),
        ("*.mariadb-internal", "mariadb-internal"),
        ("mariadb.openstack", "mariadb"),
        ("keystone.openstack.staging.example.com", None),
        ("mariadb.kube-system.svc", None),
    ],
)
def test_a_name_reaches_the_service_it_names(name: str, service: str | None) -> None:
    assert service_of(name, "openstack") == service


def test_a_stores_operator_services_and_client_belong_to_the_store() -> None:
    primary = owners("mariadb-primary.openstack.svc", "openstack")
    assert primary == ("mariadb-primary-internal-tls", "mariadb-internal-tls")
    assert "mariadb-client-tls" in owners("mariadb-client", "openstack")
    assert owners("nova-metadata", "openstack") == ("nova-metadata-internal-tls",)


REFUSED: list[tuple[str, dict[str, Any], str]] = [
    ("mariadb-names-elsewhere", certificate("sidecar-internal-tls", dnsNames=MARIADB_NAMES),
     'spec.dnsNames[0]="mariadb" is not allowed; allowed: the name in mariadb-internal-tls only'),
    ("added-to-an-api", certificate("keystone-api-internal-tls", dnsNames=["keystone-api", *MARIADB_NAMES]),
     'spec.dnsNames[1]="mariadb"'),
    ("a-prefix-of-another-service", certificate("nova-internal-tls", dnsNames=["nova-metadata.openstack.svc"]),
     "in nova-metadata-internal-tls only"),
    ("a-store-name-as-common-name", certificate("x-internal-tls", commonName="rabbitmq.openstack.svc"),
     'spec.commonName="rabbitmq.openstack.svc"'),
    ("the-api-server", certificate("x-internal-tls", dnsNames=["kubernetes.default.svc"]),
     "in no certificate of the internal CA"),
    ("localhost-for-an-api", certificate("keystone-api-internal-tls", dnsNames=["localhost"]),
     'spec.dnsNames[0]="localhost"'),
    ("an-intermediate-ca", certificate("keystone-api-internal-tls", isCA=True), 'spec.isCA=true is not allowed'),
    ("cert-sign", certificate("keystone-api-internal-tls", usages=["cert sign"]), "spec.usages=[\"cert sign\"]"),
    ("an-ip", certificate("keystone-api-internal-tls", ipAddresses=["10.0.0.1"]), "spec.ipAddresses is not allowed"),
    ("a-uri", certificate("keystone-api-internal-tls", uris=["spiffe://x"]), "spec.uris is not allowed"),
    ("a-trust-copy-that-serves", certificate("internal-ca-trust", usages=["email protection"], dnsNames=["mariadb"]),
     'spec.dnsNames[0]="mariadb"'),
    ("a-root-from-another-ca", certificate("internal-ca", "evil", isCA=True),
     'spec.issuerRef={"group": "cert-manager.io", "kind": "Issuer", "name": "evil"} is not allowed; '
     "allowed: Issuer/internal-ca-selfsigned"),
    ("a-root-from-itself", certificate("internal-ca", "internal-ca", isCA=True), "Issuer/internal-ca-selfsigned"),
    ("issuer-kind-defaulted", {**certificate("x"), "spec": {"secretName": "x", "issuerRef": {"name": "internal-ca"},
                                                            "dnsNames": ["mariadb"]}},
     'spec.dnsNames[0]="mariadb"'),
]  # fmt: skip


@pytest.mark.parametrize(("manifest", "found"), [c[1:] for c in REFUSED], ids=[c[0] for c in REFUSED])
def test_an_internal_ca_certificate_for_names_it_does_not_own_is_refused(manifest: dict[str, Any], found: str) -> None:
    messages = run_policy("ca-certificates", manifest, STAGING)
    assert any(found in m for m in messages), messages
    assert messages[0].startswith(f"Certificate openstack/{manifest['metadata']['name']}: certificate: ")


def test_a_cluster_issuers_certificate_stays_in_the_stacks_namespace() -> None:
    vault = policy_config(parse_settings({"tls": {"internal": {"issuer": {"kind": "ClusterIssuer", "name": "vault"}}}}))
    assert vault["ca-certificates"]["caIssuers"] == {"ClusterIssuer/vault": "internal"}
    manifest = certificate("mariadb-internal-tls", "vault", "ClusterIssuer", dnsNames=MARIADB_NAMES)
    assert run_policy("ca-certificates", manifest, vault) == []
    manifest["metadata"]["namespace"] = "tenant"
    [message] = run_policy("ca-certificates", manifest, vault)
    assert 'metadata.namespace="tenant" is not allowed; allowed: openstack' in message


def test_the_libvirt_ca_signs_the_console_proxy_only() -> None:
    node = certificate("evil-vencrypt", "libvirt-ca", commonName="nova-novncproxy")
    [message] = run_policy("ca-certificates", node, PROD)
    assert 'spec.secretName="evil-vencrypt" is not allowed; allowed: nova-novncproxy-vencrypt' in message
    renamed = certificate("nova-novncproxy-vencrypt", "libvirt-ca", commonName="compute-1")
    assert "commonName nova-novncproxy only" in run_policy("ca-certificates", renamed, PROD)[0]
    own = certificate("nova-novncproxy-vencrypt", "libvirt-ca", commonName="nova-novncproxy")
    assert run_policy("ca-certificates", own, PROD) == []


def test_the_public_ca_signs_the_public_hosts_only() -> None:
    inside = certificate("public-tls", "letsencrypt", "ClusterIssuer", dnsNames=["keystone.cloud.example.com",
                                                                                 "mariadb.openstack.svc"])  # fmt: skip
    [message] = run_policy("ca-certificates", inside, PROD)
    assert 'spec.dnsNames[1]="mariadb.openstack.svc" is not allowed' in message
    other = certificate("other-tls", "letsencrypt", "ClusterIssuer", dnsNames=["keystone.cloud.example.com"])
    assert "allowed: public-tls" in run_policy("ca-certificates", other, PROD)[0]
    assert run_policy("ca-certificates", certificate("public-tls", "public-ca", dnsNames=["mariadb"]), DEV)


PASSING: list[tuple[str, dict[str, Any], dict[str, Any]]] = [
    ("api", certificate("keystone-api-internal-tls", dnsNames=internal_tls.dns_names(Settings(), "keystone-api")),
     STAGING),
    ("store", certificate("mariadb-internal-tls", dnsNames=[*MARIADB_NAMES, "*.mariadb-internal.openstack.svc",
                                                            "mariadb-primary", "localhost"]), STAGING),
    ("store-client", certificate("mariadb-client-tls", commonName="mariadb-client", dnsNames=["mariadb-client"]),
     STAGING),
    ("trust-copy", certificate("internal-ca-trust", commonName="internal-ca-trust", usages=["email protection"]),
     STAGING),
    ("root", certificate("internal-ca", "internal-ca-selfsigned", isCA=True, commonName="internal-ca"), STAGING),
    # Not a CA of the stack: a self-signed certificate nobody trusts, an issuer of another namespace.
    ("self-signed", certificate("mariadb-internal-tls", "internal-ca-selfsigned", dnsNames=["x"]), STAGING),
    ("other-namespace", {**certificate("x", dnsNames=["mariadb"]), "metadata": {"name": "x", "namespace": "tenant"}},
     STAGING),
    ("not-staging-ca", certificate("x", "libvirt-ca", dnsNames=["mariadb"]), STAGING),
]  # fmt: skip


@pytest.mark.parametrize(("manifest", "config"), [c[1:] for c in PASSING], ids=[c[0] for c in PASSING])
def test_certificates_of_the_programs_kinds_pass(manifest: dict[str, Any], config: dict[str, Any]) -> None:
    assert run_policy("ca-certificates", manifest, config) == []


KEY_REFUSED: list[tuple[str, dict[str, Any], str]] = [
    ("an-issuer-on-the-ca-secret", issuer("sneaky", ca={"secretName": "internal-ca"}),
     'issuer: spec.ca.secretName="internal-ca" is not allowed; allowed: a Secret of its own'),
    ("an-issuer-on-a-server-key", issuer("sneaky", vault={"auth": {"tokenSecretRef": {"name": SERVER_KEY}}}),
     "spec.vault.auth.tokenSecretRef.name=\"mariadb-internal-tls\""),
    ("the-ca-issuer-on-another-key", issuer("internal-ca", ca={"secretName": "attacker-ca"}),
     'spec.ca={"secretName": "attacker-ca"} is not allowed; allowed: ca.secretName internal-ca only'),
    ("the-ca-issuer-self-signed", issuer("internal-ca", selfSigned={}), "spec.selfSigned is not allowed"),
    ("the-roots-signer-signs-with-a-key", issuer("internal-ca-selfsigned", ca={"secretName": "attacker-ca"}),
     "spec.ca is not allowed; allowed: selfSigned only"),
    ("a-cluster-issuer", issuer("internal-ca", "ClusterIssuer", ca={"secretName": "internal-ca"}),
     "issuer: ClusterIssuer is not allowed"),
    ("the-ca-secret", secret("internal-ca", data={"tls.key": "eA=="}), "the internal CA's key"),
    ("the-bundle", secret("internal-ca-bundle", stringData={"ca.crt": "x"}), "its ca.crt, a CA that is trusted"),
    ("a-trust-copy", secret("internal-ca-trust"), "ca.crt"),
    ("a-trust-copy-for-the-gateway", {**secret("internal-ca-trust", data={"ca.crt": "x"}), "kind": "ConfigMap"},
     "ConfigMap openstack/internal-ca-trust: configmap: metadata.name is not allowed"),
]  # fmt: skip


@pytest.mark.parametrize(("manifest", "found"), [c[1:] for c in KEY_REFUSED], ids=[c[0] for c in KEY_REFUSED])
def test_signing_with_or_replacing_a_key_is_refused(manifest: dict[str, Any], found: str) -> None:
    messages = run_policy("ca-keys", manifest, STAGING)
    assert any(found in m for m in messages), messages


def test_the_programs_issuers_and_secrets_pass() -> None:
    for manifest in (issuer("internal-ca", ca={"secretName": "internal-ca"}), issuer("internal-ca-selfsigned",
                     selfSigned={}), issuer("envoy-gateway-ca", ca={"secretName": "envoy-gateway-ca"}),
                     issuer("own-ca", ca={"secretName": "own-ca"}),
                     secret("keystone-fernet-keys"), {**secret("keystone-etc"), "kind": "ConfigMap"}):  # fmt: skip
        assert run_policy("ca-keys", manifest, STAGING) == [], manifest
    # An Issuer of another namespace names that namespace's Secrets.
    elsewhere = copy.deepcopy(issuer("sneaky", ca={"secretName": "internal-ca"}))
    elsewhere["metadata"]["namespace"] = "tenant"
    assert run_policy("ca-keys", elsewhere, STAGING) == []
