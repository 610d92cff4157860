"""The lab's cert-manager signs the CertificateRequests pods make, as cert-manager does, through the lab's API.

A request created by a ServiceAccount the plan's RBAC allows is answered by the controller's
stand-in after the create: approved, its CSR signed by the plan's CA Issuer with the CSR's names
and the request's usages and duration, the CA given; a request of an issuer that cannot sign
stays pending; an unreadable CSR fails; RBAC refuses another account.
"""

from __future__ import annotations

import base64
import datetime
import ipaddress
import time
from pathlib import Path
from typing import Any

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from tests.conftest import plan_of
from tests.lab.cloud import certificate_requests
from tests.lab.cloud.apiserver import LabApiServer
from tests.lab.cloud.certmanager import CertManager
from tests.lab.test_apiserver import World

PATH = "/apis/cert-manager.io/v1/namespaces/openstack/certificaterequests"
RBAC_KINDS = {"Role", "RoleBinding", "ClusterRole", "ClusterRoleBinding"}


def _csr(name: str, address: str) -> str:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    alt = x509.SubjectAlternativeName([x509.DNSName(name), x509.IPAddress(ipaddress.ip_address(address))])
    builder = x509.CertificateSigningRequestBuilder().subject_name(
        x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    )
    return (
        builder.add_extension(alt, critical=False)
        .sign(key, hashes.SHA256())
        .public_bytes(serialization.Encoding.PEM)
        .decode()
    )


def _request(name: str, csr: str, issuer: str = "libvirt-ca") -> dict[str, Any]:
    return {
        "apiVersion": "cert-manager.io/v1",
        "kind": "CertificateRequest",
        "metadata": {"name": name},
        "spec": {
            "request": base64.b64encode(csr.encode()).decode(),
            "issuerRef": {"group": "cert-manager.io", "kind": "Issuer", "name": issuer},
            "usages": ["digital signature", "key encipherment", "server auth", "client auth"],
            "duration": "2160h",
        },
    }


def _served(tmp_path: Path) -> tuple[LabApiServer, CertManager, str]:
    plan = plan_of("prod")
    api = LabApiServer(World(), [r.revealed for r in plan.custom if r.kind in RBAC_KINDS], tmp_path, ("10.96.0.1",))
    tmp_path.joinpath("apiserver.crt").write_text("CA")
    certs = CertManager([r.revealed for r in plan.custom])
    certs.issue_all()
    certificate_requests.serve(api, certs)
    return api, certs, "Bearer " + api.issue("openstack", "libvirt-tls")["token"]


def _answered(api: LabApiServer, name: str, who: str) -> dict[str, Any]:
    for _ in range(100):
        code, found = api.handle("GET", f"{PATH}/{name}", None, who, None)
        assert code == 200
        if found.get("status"):
            return found
        time.sleep(0.05)
    raise AssertionError(f"{name}: no status")


def test_a_nodes_request_is_signed_by_the_libvirt_ca_with_its_names(tmp_path: Path) -> None:
    api, certs, who = _served(tmp_path)
    code, created = api.handle("POST", PATH, _request("libvirt-tls-c1", _csr("c1", "192.168.200.13")), who, None)
    assert code == 201 and "status" not in created
    status = _answered(api, "libvirt-tls-c1", who)["status"]
    conditions = {c["type"]: c for c in status["conditions"]}
    assert conditions["Approved"]["status"] == "True" and conditions["Ready"]["reason"] == "Issued"
    leaf, *above = x509.load_pem_x509_certificates(base64.b64decode(status["certificate"]))
    ca = x509.load_pem_x509_certificate(base64.b64decode(status["ca"]))
    assert above == []  # the CA is self-signed: it is ca, not chain
    assert ca == certs.secrets[("openstack", "libvirt-ca")].leaf
    leaf.verify_directly_issued_by(ca)
    alt = leaf.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert alt.get_values_for_type(x509.DNSName) == ["c1"]
    assert alt.get_values_for_type(x509.IPAddress) == [ipaddress.ip_address("192.168.200.13")]
    usages = leaf.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert set(usages) == {ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH}
    assert leaf.extensions.get_extension_for_class(x509.KeyUsage).value.key_encipherment
    lifetime = leaf.not_valid_after_utc - leaf.not_valid_before_utc
    assert lifetime == datetime.timedelta(hours=2160)
    # A request is never changed: the next renewal deletes it and creates it anew.
    assert api.handle("POST", PATH, _request("libvirt-tls-c1", _csr("c1", "192.168.200.13")), who, None)[0] == 409
    assert api.handle("DELETE", f"{PATH}/libvirt-tls-c1", None, who, None)[0] == 200
    assert api.handle("GET", f"{PATH}/libvirt-tls-c1", None, who, None)[0] == 404


def test_an_issuer_that_cannot_sign_leaves_the_request_pending_and_a_bad_csr_fails(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    api, _, who = _served(tmp_path)
    monkeypatch.setattr(certificate_requests, "WAIT_SECONDS", 0)  # no retrying here
    api.handle("POST", PATH, _request("libvirt-tls-c1", _csr("c1", "10.0.0.1"), issuer="no-such-issuer"), who, None)
    ready = {c["type"]: c for c in _answered(api, "libvirt-tls-c1", who)["status"]["conditions"]}["Ready"]
    assert (ready["status"], ready["reason"]) == ("False", "Pending")
    broken = _request("libvirt-tls-c2", "not a CSR")
    api.handle("POST", PATH, broken, who, None)
    ready = {c["type"]: c for c in _answered(api, "libvirt-tls-c2", who)["status"]["conditions"]}["Ready"]
    assert (ready["status"], ready["reason"]) == ("False", "Failed")


def test_another_account_may_not_ask(tmp_path: Path) -> None:
    api, _, _ = _served(tmp_path)
    other = "Bearer " + api.issue("openstack", "nova-compute-maintenance")["token"]
    assert api.handle("POST", PATH, _request("libvirt-tls-c1", _csr("c1", "10.0.0.1")), other, None)[0] == 403
