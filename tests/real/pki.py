"""A test CA, certificates it signs, and a Secret laid out as the kubelet mounts one, for tests/real.

cert-manager's part in the cluster: an ECDSA CA and leaf certificates of given DNS names, valid for a
day; `write_secret` is the kubelet's atomic writer (files in a new `..<version>` directory, then
`..data` swapped by a rename), so a renewal lands as it does in a pod.
"""

from __future__ import annotations

import datetime
import ipaddress
import os
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

CA = tuple[x509.Certificate, ec.EllipticCurvePrivateKey]


def _now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


def make_ca(name: str) -> CA:
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    now = _now()
    cert = (
        x509.CertificateBuilder().subject_name(subject).issuer_name(subject).public_key(key.public_key())
        .serial_number(x509.random_serial_number()).not_valid_before(now).not_valid_after(now + datetime.timedelta(1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True).sign(key, hashes.SHA256())
    )  # fmt: skip
    return cert, key


def pem(cert: x509.Certificate) -> bytes:
    return cert.public_bytes(serialization.Encoding.PEM)


def leaf(
    ca: CA,
    names: list[str],
    serial: int | None = None,
    *,
    ips: tuple[str, ...] = (),
    subject: x509.Name | None = None,
    usage: x509.ObjectIdentifier | None = None,
) -> dict[str, bytes]:
    """A certificate of `names` (and `ips`) signed by `ca`, as cert-manager writes it: tls.crt and tls.key.
    A server's by default; `subject` and `usage` make another, e.g. an API server's client."""
    key = ec.generate_private_key(ec.SECP256R1())
    now = _now()
    sans = [x509.DNSName(n) for n in names] + [x509.IPAddress(ipaddress.ip_address(ip)) for ip in ips]
    builder = (
        x509.CertificateBuilder().subject_name(subject or x509.Name([])).issuer_name(ca[0].subject)
        .public_key(key.public_key()).serial_number(serial or x509.random_serial_number())
        .not_valid_before(now).not_valid_after(now + datetime.timedelta(1))
    )  # fmt: skip
    if sans:
        builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=subject is None)
    if usage is not None:
        builder = builder.add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
    cert = builder.sign(ca[1], hashes.SHA256())
    pkcs8 = serialization.PrivateFormat.PKCS8
    return {
        "tls.crt": pem(cert),
        "tls.key": key.private_bytes(serialization.Encoding.PEM, pkcs8, serialization.NoEncryption()),
    }


def write_secret(mount: Path, files: dict[str, bytes], version: str) -> None:
    """As the kubelet's atomic writer: files in a new directory, then `..data` swapped by a rename."""
    mount.mkdir(exist_ok=True)
    directory = mount / f"..{version}"
    directory.mkdir()
    for name, data in files.items():
        (directory / name).write_bytes(data)
        if not (mount / name).is_symlink():
            (mount / name).symlink_to(f"..data/{name}")
    (mount / "..data_tmp").symlink_to(directory.name)
    os.replace(mount / "..data_tmp", mount / "..data")
