"""cert-manager's part in the lab: each Certificate of the plan issued into its Secret as cert-manager writes it.

No cert-manager runs here, so the Certificates of the plan are issued by this module, with the
fields cert-manager (v1.21) puts in the Secret: type `kubernetes.io/tls`, `tls.crt` (the
certificate and the chain up to, not including, a self-signed root), `tls.key` (PKCS#1 / SEC 1
PEM unless `privateKey.encoding: PKCS8`; Ed25519 always PKCS#8), `ca.crt` when the issuer gives a
CA (the root of the chain: selfSigned and CA issuers; ACME gives none), the annotations
`cert-manager.io/{alt-names,ip-sans,uri-sans,common-name,certificate-name,issuer-name,issuer-kind,
issuer-group}` and the label `controller.cert-manager.io/fao`. The certificate is what cert-manager's
template makes of the Certificate (pkg/util/pki: CertificateTemplateFromCertificate and
SignCertificate): its dnsNames, ipAddresses, commonName, usages (default: digital signature and key
encipherment; `cert sign` for a CA), isCA, duration (default 90 days) from now, a key of
`privateKey.algorithm` and `size` (RSA 2048 by default), signed with SHA-256/384/512 by the signer's
key size, a random serial, a subject key id on CAs and the signer's as authority key id.

selfSigned and CA Issuers (and ClusterIssuers) of the plan are followed exactly: a self-signed
certificate is its own `ca.crt`; a CA issuer signs with the key pair of its Secret and gives the
top of that chain as `ca.crt`. An ACME issuer cannot be reached from here, and a ClusterIssuer the
plan only names is the cluster's (ACME on a real cluster: staging and prod name `letsencrypt` and
`letsencrypt-staging`): both are stood in by a lab CA, a root and an intermediate as an ACME CA's
chain is, which signs 90-day certificates whose `tls.crt` carries the leaf and the intermediate and
no `ca.crt`, as cert-manager writes what ACME returns. `stand_ins` says which, for the report.
"""

from __future__ import annotations

import base64
import datetime
import ipaddress
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from tests.lab.cloud.awaits import go_duration

Manifest = dict[str, Any]
PrivateKey = rsa.RSAPrivateKey | ec.EllipticCurvePrivateKey | ed25519.Ed25519PrivateKey
GROUP = "cert-manager.io"
# Where a ClusterIssuer's Secrets live: cert-manager's --cluster-resource-namespace (its own namespace).
CLUSTER_RESOURCE_NAMESPACE = "cert-manager"
DEFAULT_DURATION = "2160h"  # cert-manager's DefaultCertificateDuration, 90 days
ACME_DURATION = datetime.timedelta(days=90)  # an ACME CA decides; Let's Encrypt's is 90 days
DEFAULT_USAGES = ("digital signature", "key encipherment")  # cert-manager's DefaultKeyUsages
CERTIFICATE_FIELDS = {
    "secretName", "issuerRef", "commonName", "dnsNames", "ipAddresses", "uris", "duration", "renewBefore",
    "privateKey", "usages", "isCA", "secretTemplate",
}  # fmt: skip
# cert-manager's usage names (pkg/api/util/usages.go) → the KeyUsage flag or the extended usage.
KEY_USAGES = {
    "signing": "digital_signature", "digital signature": "digital_signature",
    "content commitment": "content_commitment", "key encipherment": "key_encipherment",
    "key agreement": "key_agreement", "data encipherment": "data_encipherment", "cert sign": "key_cert_sign",
    "crl sign": "crl_sign", "encipher only": "encipher_only", "decipher only": "decipher_only",
}  # fmt: skip
EXT_KEY_USAGES = {
    "any": ExtendedKeyUsageOID.ANY_EXTENDED_KEY_USAGE, "server auth": ExtendedKeyUsageOID.SERVER_AUTH,
    "client auth": ExtendedKeyUsageOID.CLIENT_AUTH, "code signing": ExtendedKeyUsageOID.CODE_SIGNING,
    "email protection": ExtendedKeyUsageOID.EMAIL_PROTECTION, "s/mime": ExtendedKeyUsageOID.EMAIL_PROTECTION,
    "timestamping": ExtendedKeyUsageOID.TIME_STAMPING, "ocsp signing": ExtendedKeyUsageOID.OCSP_SIGNING,
}  # fmt: skip
CURVES: dict[int, ec.EllipticCurve] = {256: ec.SECP256R1(), 384: ec.SECP384R1(), 521: ec.SECP521R1()}


class IssuingError(ValueError):
    """cert-manager would leave the Certificate not Ready (or the lab does not implement what it asks)."""


@dataclass(frozen=True)
class Signer:
    """What signs: the issuing CA's certificate and key, and the chain above it (the root last)."""

    certificate: x509.Certificate
    key: PrivateKey
    above: tuple[x509.Certificate, ...] = ()

    @property
    def root(self) -> x509.Certificate:
        return self.above[-1] if self.above else self.certificate


@dataclass
class Issued:
    """A Certificate's Secret, as cert-manager leaves it."""

    namespace: str
    name: str
    certificate: str  # the Certificate's name
    data: dict[str, str]  # tls.crt, tls.key, ca.crt (when the issuer gives a CA)
    annotations: dict[str, str]
    labels: dict[str, str]
    trust_anchor: str  # the root a client must trust to verify tls.crt (PEM)
    key: PrivateKey
    chain: tuple[x509.Certificate, ...]  # tls.crt's certificates, the leaf first

    @property
    def leaf(self) -> x509.Certificate:
        return self.chain[0]

    def manifest(self) -> Manifest:
        return {
            "apiVersion": "v1",
            "kind": "Secret",
            "type": "kubernetes.io/tls",
            "metadata": {
                "name": self.name,
                "namespace": self.namespace,
                "annotations": dict(self.annotations),
                "labels": dict(self.labels),
            },
            "data": {k: base64.b64encode(v.encode()).decode() for k, v in self.data.items()},
        }


def pem(certificate: x509.Certificate) -> str:
    return certificate.public_bytes(serialization.Encoding.PEM).decode()


def new_key(private_key: Mapping[str, Any]) -> PrivateKey:
    """A key as cert-manager generates it for `spec.privateKey` (pkg/util/pki/generate.go)."""
    algorithm = private_key.get("algorithm", "RSA")
    size = private_key.get("size")
    if algorithm == "RSA":
        if (size or 2048) not in (2048, 3072, 4096, 8192):
            raise IssuingError(f"privateKey.size {size} for RSA: cert-manager takes 2048 to 8192")
        return rsa.generate_private_key(public_exponent=65537, key_size=size or 2048)
    if algorithm == "ECDSA":
        if (size or 256) not in CURVES:
            raise IssuingError(f"privateKey.size {size} for ECDSA: cert-manager takes 256, 384 or 521")
        return ec.generate_private_key(CURVES[size or 256])
    if algorithm == "Ed25519":
        return ed25519.Ed25519PrivateKey.generate()
    raise IssuingError(f"privateKey.algorithm {algorithm}: cert-manager takes RSA, ECDSA or Ed25519")


def key_pem(key: PrivateKey, encoding: str = "PKCS1") -> str:
    """PKCS#1 (RSA PRIVATE KEY, EC PRIVATE KEY) by default, as cert-manager encodes; PKCS#8 on request or Ed25519."""
    traditional = encoding == "PKCS1" and not isinstance(key, ed25519.Ed25519PrivateKey)
    form = serialization.PrivateFormat.TraditionalOpenSSL if traditional else serialization.PrivateFormat.PKCS8
    return key.private_bytes(serialization.Encoding.PEM, form, serialization.NoEncryption()).decode()


def _hash_for(key: PrivateKey) -> hashes.HashAlgorithm | None:
    """The signature's hash by the signer's key, as cert-manager's signatureAlgorithmFromPublicKey picks it."""
    if isinstance(key, rsa.RSAPrivateKey):
        return hashes.SHA512() if key.key_size >= 4096 else hashes.SHA384() if key.key_size >= 3072 else hashes.SHA256()
    if isinstance(key, ec.EllipticCurvePrivateKey):
        return {521: hashes.SHA512(), 384: hashes.SHA384()}.get(key.curve.key_size, hashes.SHA256())
    return None  # Ed25519 hashes itself


def _usages(spec: Mapping[str, Any]) -> tuple[x509.KeyUsage, list[x509.ObjectIdentifier]]:
    flags = {name: False for name in set(KEY_USAGES.values())}
    extended: list[x509.ObjectIdentifier] = []
    if spec.get("isCA"):
        flags["key_cert_sign"] = True
    for usage in spec.get("usages") or DEFAULT_USAGES:
        if usage in KEY_USAGES:
            flags[KEY_USAGES[usage]] = True
        elif usage in EXT_KEY_USAGES:
            extended.append(EXT_KEY_USAGES[usage])
        else:
            raise IssuingError(f"usage {usage!r} is not one cert-manager knows")
    return x509.KeyUsage(**flags), extended


def sign(
    spec: Mapping[str, Any],
    key: PrivateKey,
    signer: Signer | None,
    now: datetime.datetime,
    duration: datetime.timedelta | None = None,
) -> x509.Certificate:
    """The certificate cert-manager makes of a Certificate's spec; `signer` None: self-signed by `key`."""
    unknown = set(spec) - CERTIFICATE_FIELDS
    if unknown:
        raise IssuingError(f"Certificate fields {sorted(unknown)} are not implemented by the lab's cert-manager")
    common_name = spec.get("commonName", "")
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)] if common_name else [])
    names: list[x509.GeneralName] = [x509.DNSName(n) for n in spec.get("dnsNames") or []]
    names += [x509.IPAddress(ipaddress.ip_address(a)) for a in spec.get("ipAddresses") or []]
    names += [x509.UniformResourceIdentifier(u) for u in spec.get("uris") or []]
    usage, extended = _usages(spec)
    lifetime = duration or datetime.timedelta(seconds=go_duration(spec.get("duration") or DEFAULT_DURATION))
    issuer_key = signer.key if signer else key
    builder = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(signer.certificate.subject if signer else subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now)
        .not_valid_after(now + lifetime)
        .add_extension(x509.BasicConstraints(ca=bool(spec.get("isCA")), path_length=None), critical=True)
        .add_extension(usage, critical=True)
    )
    if extended:
        builder = builder.add_extension(x509.ExtendedKeyUsage(extended), critical=False)
    if names:
        # RFC 5280 4.2.1.6: critical when the subject is empty (as Go's x509 marks it).
        builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=not common_name)
    if spec.get("isCA"):  # Go's CreateCertificate gives a CA a subject key id
        builder = builder.add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
    authority = signer.certificate if signer else None
    if authority is None and spec.get("isCA"):
        builder = builder.add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(key.public_key()), False)
    elif authority is not None:
        try:
            ski = authority.extensions.get_extension_for_class(x509.SubjectKeyIdentifier).value
            authority_id = x509.AuthorityKeyIdentifier.from_issuer_subject_key_identifier(ski)
            builder = builder.add_extension(authority_id, critical=False)
        except x509.ExtensionNotFound:
            pass
    return builder.sign(issuer_key, _hash_for(issuer_key))  # type: ignore[arg-type]


def secret_annotations(certificate: x509.Certificate, name: str, issuer_ref: Mapping[str, str]) -> dict[str, str]:
    """cert-manager's AnnotationsForCertificate and its certificate and issuer annotations."""
    try:
        alt = certificate.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        alt = x509.SubjectAlternativeName([])
    common = certificate.subject.get_attributes_for_oid(NameOID.COMMON_NAME)
    return {
        "cert-manager.io/common-name": str(common[0].value) if common else "",
        "cert-manager.io/alt-names": ",".join(alt.get_values_for_type(x509.DNSName)),
        "cert-manager.io/ip-sans": ",".join(str(a) for a in alt.get_values_for_type(x509.IPAddress)),
        "cert-manager.io/uri-sans": ",".join(alt.get_values_for_type(x509.UniformResourceIdentifier)),
        "cert-manager.io/certificate-name": name,
        "cert-manager.io/issuer-name": issuer_ref["name"],
        "cert-manager.io/issuer-kind": issuer_ref.get("kind", "Issuer"),
        "cert-manager.io/issuer-group": issuer_ref.get("group", GROUP),
    }


def bundle(certificates: Iterable[x509.Certificate]) -> tuple[str, str]:
    """tls.crt and ca.crt of a chain (leaf first): a self-signed top is ca.crt only, as cert-manager's
    ParseSingleCertificateChain leaves it; a lone self-signed certificate is both."""
    chain: list[x509.Certificate] = []
    for certificate in certificates:  # each once: a CA Secret's ca.crt repeats its self-signed tls.crt
        if certificate not in chain:
            chain.append(certificate)
    top = chain[-1]
    self_signed = top.issuer == top.subject
    shown = chain[:-1] if self_signed and len(chain) > 1 else chain
    return "".join(pem(c) for c in shown), pem(top)


def _read_chain(text: str) -> list[x509.Certificate]:
    return x509.load_pem_x509_certificates(text.encode())


@dataclass
class LabAcmeCa:
    """An ACME CA's place: a root and an intermediate that signs, as Let's Encrypt's chain is."""

    issuer: str
    root: x509.Certificate
    intermediate: Signer

    @classmethod
    def make(cls, issuer: str, now: datetime.datetime) -> LabAcmeCa:
        root_key = ec.generate_private_key(ec.SECP384R1())
        ten_years = datetime.timedelta(days=3650)
        root_spec = {"commonName": f"lab ACME root for {issuer}", "isCA": True, "usages": ["cert sign", "crl sign"]}
        root = sign(root_spec, root_key, None, now, ten_years)
        middle_key = ec.generate_private_key(ec.SECP384R1())
        middle_spec = {"commonName": f"lab ACME intermediate for {issuer}", "isCA": True,
                       "usages": ["digital signature", "cert sign", "crl sign"]}  # fmt: skip
        middle = sign(middle_spec, middle_key, Signer(root, root_key), now, ten_years)
        return cls(issuer, root, Signer(middle, middle_key, (root,)))


@dataclass
class CertManager:
    """Issues the plan's Certificates from its Issuers and ClusterIssuers; `secrets` is what it wrote."""

    resources: list[Manifest]  # the plan's objects (revealed), every kind
    now: datetime.datetime = field(default_factory=lambda: datetime.datetime.now(datetime.UTC))
    secrets: dict[tuple[str, str], Issued] = field(default_factory=dict)  # (namespace, name) → Secret
    stand_ins: dict[str, str] = field(default_factory=dict)  # "ClusterIssuer letsencrypt" → what plays it
    _acme: dict[str, LabAcmeCa] = field(default_factory=dict)

    def _of(self, kind: str) -> list[Manifest]:
        return [r for r in self.resources if r.get("kind") == kind and r.get("apiVersion", "").startswith(GROUP)]

    @property
    def certificates(self) -> list[Manifest]:
        return self._of("Certificate")

    def _issuer(self, namespace: str, ref: Mapping[str, str]) -> tuple[Manifest | None, str]:
        """The issuer a Certificate names, and the namespace its CA Secret lives in."""
        kind = ref.get("kind", "Issuer")
        if ref.get("group", GROUP) != GROUP or kind not in ("Issuer", "ClusterIssuer"):
            raise IssuingError(f"issuerRef {dict(ref)}: the lab's cert-manager has cert-manager.io's issuers only")
        for issuer in self._of(kind):
            meta = issuer["metadata"]
            if meta["name"] == ref["name"] and (kind == "ClusterIssuer" or meta.get("namespace") == namespace):
                return issuer, namespace if kind == "Issuer" else CLUSTER_RESOURCE_NAMESPACE
        return None, namespace

    def _acme_ca(self, name: str, why: str) -> LabAcmeCa:
        if name not in self._acme:
            self._acme[name] = LabAcmeCa.make(name, self.now)
            self.stand_ins[f"ClusterIssuer {name}"] = why
        return self._acme[name]

    def _signer(self, namespace: str, ref: Mapping[str, str]) -> Signer | LabAcmeCa | None:
        """Who signs for this issuer: None is selfSigned; raises IssuingError while it cannot sign yet."""
        issuer, where = self._issuer(namespace, ref)
        kind, name = ref.get("kind", "Issuer"), ref["name"]
        if issuer is None:
            if kind == "Issuer":
                raise IssuingError(f"Issuer {name} does not exist in {namespace}: cert-manager leaves it pending")
            why = (
                f"the cluster's ClusterIssuer {name} (not in the plan; ACME on a real cluster) is played by a lab "
                "CA, a root and an intermediate as an ACME CA's chain is; clients of the lab trust its root"
            )
            return self._acme_ca(name, why)
        spec = issuer.get("spec") or {}
        if "selfSigned" in spec:
            return None
        if "ca" in spec:
            secret = self.secrets.get((where, spec["ca"]["secretName"]))
            if secret is None:
                raise IssuingError(f"{kind} {name}: its CA Secret {spec['ca']['secretName']} is not issued yet")
            certificates = [*secret.chain, *_read_chain(secret.data.get("ca.crt", ""))]
            return Signer(certificates[0], secret.key, tuple(certificates[1:]))
        if "acme" in spec:
            server = spec["acme"].get("server", "")
            why = f"{kind} {name}: ACME ({server}) cannot be reached from the lab; a lab CA signs in its place"
            return self._acme_ca(name, why)
        raise IssuingError(f"{kind} {name}: {sorted(spec)} issuers are not implemented by the lab's cert-manager")

    def issue(self, certificate: Manifest, previous: Issued | None = None) -> Issued:
        """Issue (or renew) one Certificate: its Secret, as cert-manager writes it."""
        meta, spec = certificate["metadata"], certificate["spec"]
        namespace, ref = meta["namespace"], spec["issuerRef"]
        signer = self._signer(namespace, ref)
        private_key = spec.get("privateKey") or {}
        # rotationPolicy Always (cert-manager's default since 1.18) makes a new key at every issuance.
        keep = previous is not None and private_key.get("rotationPolicy") == "Never"
        key = previous.key if keep and previous is not None else new_key(private_key)
        chain: tuple[x509.Certificate, ...]
        if isinstance(signer, LabAcmeCa):
            leaf_spec = {**spec, "usages": ["digital signature", "server auth"]}  # what an ACME CA puts in
            leaf = sign(leaf_spec, key, signer.intermediate, self.now, ACME_DURATION)
            chain, ca = (leaf, signer.intermediate.certificate), ""  # ACME returns the chain, no CA
            anchor = pem(signer.root)
        else:
            leaf = sign(spec, key, signer, self.now)
            full = [leaf, signer.certificate, *signer.above] if signer else [leaf]
            tls_crt, ca = bundle(full)
            chain = tuple(_read_chain(tls_crt))
            anchor = ca
        encoding = private_key.get("encoding", "PKCS1")
        data = {"tls.crt": "".join(pem(c) for c in chain), "tls.key": key_pem(key, encoding)}
        if ca:
            data["ca.crt"] = ca
        template = spec.get("secretTemplate") or {}
        issued = Issued(
            namespace,
            spec["secretName"],
            meta["name"],
            data,
            {**template.get("annotations", {}), **secret_annotations(leaf, meta["name"], ref)},
            {**template.get("labels", {}), "controller.cert-manager.io/fao": "true"},
            anchor,
            key,
            chain,
        )
        self.secrets[(namespace, issued.name)] = issued
        return issued

    def issue_all(self) -> list[str]:
        """Every Certificate, as cert-manager reconciles them (a CA issuer waits for its CA's Secret);
        returns what stays unissued and why."""
        pending = list(self.certificates)
        while pending:
            waiting = []
            for certificate in pending:
                try:
                    self.issue(certificate)
                except IssuingError:
                    waiting.append(certificate)
            if len(waiting) == len(pending):
                break
            pending = waiting
        problems = []
        for certificate in pending:
            try:
                self.issue(certificate)
            except IssuingError as error:
                problems.append(f"Certificate {certificate['metadata']['name']}: {error}")
        return problems

    def apply(self, resources: list[Manifest]) -> list[Issued]:
        """What cert-manager does after a `pulumi up` changed the plan's objects: each Certificate that is new
        or whose spec changed (its issuerRef among it: cert-manager's trigger sees the Secret no longer
        matches) is issued again, in the order its issuer allows; a removed one leaves its Secret."""
        before = {(c["metadata"]["namespace"], c["metadata"]["name"]): c["spec"] for c in self.certificates}
        self.resources = resources
        pending = [c for c in self.certificates if before.get((c["metadata"]["namespace"], c["metadata"]["name"]))
                   != c["spec"]]  # fmt: skip
        issued: list[Issued] = []
        while pending:
            waiting, why = [], ""
            for certificate in pending:
                namespace, secret = certificate["metadata"]["namespace"], certificate["spec"]["secretName"]
                try:
                    issued.append(self.issue(certificate, self.secrets.get((namespace, secret))))
                except IssuingError as error:
                    waiting.append(certificate)
                    why = str(error)
            if len(waiting) == len(pending):
                raise IssuingError(f"Certificates {[c['metadata']['name'] for c in waiting]} stay unissued: {why}")
            pending = waiting
        return issued

    def renew(self, namespace: str, certificate_name: str) -> Issued:
        """What cert-manager does when the Certificate is due (or `cmctl renew`): issue it again."""
        certificate = next(
            c for c in self.certificates
            if c["metadata"]["name"] == certificate_name and c["metadata"]["namespace"] == namespace
        )  # fmt: skip
        return self.issue(certificate, self.secrets.get((namespace, certificate["spec"]["secretName"])))
