"""cert-manager's part for CertificateRequests in the lab: a request a pod creates, signed as cert-manager signs it.

The compute nodes' pods `libvirt-tls` (components/nodes/libvirt_tls.py) ask for their certificates with
CertificateRequests of their own, at run time, through the lab's API server. cert-manager (v1.21)
approves each one (its internal approver approves every request of its own issuers' group unless
an approver such as approver-policy is installed: condition `Approved`), then the issuer signs the
request's CSR as it stands: its subject and names, with `spec.duration`, `spec.usages` (default:
digital signature and key encipherment) and `spec.isCA` (pkg/util/pki CertificateTemplateFromCertificateRequest),
and writes `status.certificate` (the certificate and the chain up to, not including, a
self-signed root: base64 PEM), `status.ca` (the root, where the issuer gives one: CA issuers yes,
ACME no) and the condition `Ready` (reason `Issued`). A request whose issuer does not exist or
cannot sign yet stays `Ready: False`, reason `Pending`, as cert-manager leaves it until it can;
a request whose CSR cannot be read fails (reason `Failed`).

The issuers are the lab cert-manager's (tests/lab/cloud/certmanager.py): the plan's selfSigned and CA
issuers exactly, a lab CA in the place of an ACME one; it signs the certificates of the plan's
Certificates and of these requests alike.
"""

from __future__ import annotations

import base64
import datetime
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, cast

from cryptography import x509
from cryptography.x509.oid import NameOID

from tests.lab.cloud.certmanager import GROUP, CertManager, IssuingError, LabAcmeCa, PrivateKey, bundle, pem, sign

if TYPE_CHECKING:
    from tests.lab.cloud.apiserver import LabApiServer

Manifest = dict[str, Any]
RESOURCE = "certificaterequests"
STAND_IN = {"what": "cert-manager's CertificateRequest controller and approver",
            "why": "a stand-in approves and signs each CertificateRequest a pod creates as cert-manager v1.21 does "
                   "(tests/lab/cloud/certificate_requests.py), with the lab cert-manager's issuers"}  # fmt: skip
APPROVED = {"type": "Approved", "status": "True", "reason": "cert-manager.io",
            "message": "Certificate request has been approved by cert-manager.io"}  # fmt: skip
WAIT_SECONDS = 120  # how long the stand-in retries a request whose issuer cannot sign yet, as cert-manager would


class _RequestKey:
    """What `sign` needs of a key it does not sign with: the public key of the request's CSR."""

    def __init__(self, csr: x509.CertificateSigningRequest):
        self._csr = csr

    def public_key(self) -> Any:
        return self._csr.public_key()


def _condition(kind: str, status: str, reason: str, message: str, now: datetime.datetime) -> Manifest:
    stamp = now.strftime("%Y-%m-%dT%H:%M:%SZ")
    return {"type": kind, "status": status, "reason": reason, "message": message, "lastTransitionTime": stamp}


def template(request: Manifest, csr: x509.CertificateSigningRequest) -> Manifest:
    """The Certificate spec cert-manager signs a request's CSR by: the CSR's names, the request's terms."""
    spec = request["spec"]
    try:
        alt = csr.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        alt = x509.SubjectAlternativeName([])
    common = csr.subject.get_attributes_for_oid(NameOID.COMMON_NAME)
    found: Manifest = {
        "commonName": str(common[0].value) if common else "",
        "dnsNames": alt.get_values_for_type(x509.DNSName),
        "ipAddresses": [str(a) for a in alt.get_values_for_type(x509.IPAddress)],
        "uris": alt.get_values_for_type(x509.UniformResourceIdentifier),
    }
    for key in ("duration", "usages", "isCA"):
        if key in spec:
            found[key] = spec[key]
    return {k: v for k, v in found.items() if v not in ("", [])}


def answer(certs: CertManager, request: Manifest) -> Manifest:
    """The request as cert-manager leaves it: approved, then issued, pending or failed."""
    now = certs.now if certs.now.tzinfo else certs.now.replace(tzinfo=datetime.UTC)
    now = max(now, datetime.datetime.now(datetime.UTC))
    done = dict(request)
    namespace, spec = request["metadata"]["namespace"], request["spec"]
    conditions = [_condition(APPROVED["type"], "True", APPROVED["reason"], APPROVED["message"], now)]
    try:
        csr = x509.load_pem_x509_csr(base64.b64decode(spec["request"]))
        if not csr.is_signature_valid:
            raise ValueError("the CSR's signature does not verify")
    except (KeyError, ValueError) as error:
        conditions.append(_condition("Ready", "False", "Failed", f"Failed to decode CSR in spec.request: {error}", now))
        done["status"] = {"conditions": conditions}
        return done
    try:
        # The issuer as the plan's Certificates find it (the lab cert-manager's own lookup).
        signer = certs._signer(namespace, spec["issuerRef"])
    except IssuingError as error:
        conditions.append(_condition("Ready", "False", "Pending", str(error), now))
        done["status"] = {"conditions": conditions}
        return done
    if signer is None:  # cert-manager's selfSigned issuer needs the key's Secret named on the request
        why = "a selfSigned issuer signs a CertificateRequest only with its key (not reproduced by the lab)"
        conditions.append(_condition("Ready", "False", "Failed", why, now))
        done["status"] = {"conditions": conditions}
        return done
    key = cast(PrivateKey, _RequestKey(csr))
    if isinstance(signer, LabAcmeCa):  # what an ACME CA puts in, no CA certificate
        leaf = sign({**template(request, csr), "usages": ["digital signature", "server auth"]}, key,
                    signer.intermediate, now, datetime.timedelta(days=90))  # fmt: skip
        chain, ca = pem(leaf) + pem(signer.intermediate.certificate), ""
    else:
        leaf = sign(template(request, csr), key, signer, now)
        chain, ca = bundle([leaf, signer.certificate, *signer.above])
    status: Manifest = {"certificate": base64.b64encode(chain.encode()).decode()}
    if ca:
        status["ca"] = base64.b64encode(ca.encode()).decode()
    conditions.append(_condition("Ready", "True", "Issued", "Certificate fetched from issuer successfully", now))
    done["status"] = {**status, "conditions": conditions}
    return done


def controller(certs: CertManager, pause: float = 2.0) -> Callable[[Manifest], Manifest]:
    """The lab API server's controller for CertificateRequests: answers each, retrying a pending one
    (an issuer whose CA is not issued yet) for WAIT_SECONDS as cert-manager's queue would."""

    def control(request: Manifest) -> Manifest:
        deadline = time.monotonic() + WAIT_SECONDS
        while True:
            done = answer(certs, request)
            ready = next(c for c in done["status"]["conditions"] if c["type"] == "Ready")
            if ready["reason"] != "Pending" or time.monotonic() > deadline:
                return done
            time.sleep(pause)

    return control


def serve(api: LabApiServer, certs: CertManager) -> None:
    """CertificateRequests in the lab's API server (cert-manager's CRD), answered by `certs`' issuers."""
    api.install_crd(GROUP, RESOURCE)
    api.controllers[(GROUP, RESOURCE)] = controller(certs)
