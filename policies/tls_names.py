"""The stack's CAs and the Secrets that hold their keys, as the certificate rules need them.

The CAs come from the config: `caIssuers`, '<Kind>/<name>' of each issuer of the stack's CAs
(tools/policy_config.py writes it from tls.internal, tls.libvirt and tls.public) → which CA it is.
An Issuer among them lives in the stack's namespace; when the program makes it, it signs with the
Secret of its own name, which holds the CA's key, and a self-signed Issuer `<name>-selfsigned` signs
that root (components/mechanism/certificates.py `self_signed_ca`).

The names of the certificates' Secrets follow the program's conventions. The pack imports no
program code, so it keeps its own copy; tests/policy/test_certificates.py holds it to components/.
"""

from __future__ import annotations

import re
from typing import Any

from policies.datastores import DATA_STORES
from policies.k8s import mapping
from policies.settings import PackSettings

GROUP = "cert-manager.io"
INTERNAL, LIBVIRT, PUBLIC = "internal", "libvirt", "public"
# components/mechanism/internal_tls.py secret_name: the certificate an API, Horizon, the console proxy
# or a data store serves inside the cluster.
SERVER_SUFFIX = "-internal-tls"
# components/infrastructure/mariadb_tls.py CLIENT_SECRET: a data store's client certificate, `<store>-client-tls`,
# naming `<store>-client` (the operator's own client certificate's name).
CLIENT_SUFFIX = "-client-tls"
STORES = tuple(store.name for store in DATA_STORES)
PUBLIC_CERTIFICATE = "public-tls"  # components/mechanism/certificates.py PUBLIC_TLS
# components/nodes/libvirt_tls.py PROXY_CERT and its commonName: the console proxy's VeNCrypt client certificate.
CONSOLE_CERTIFICATE, CONSOLE_NAME = "nova-novncproxy-vencrypt", "nova-novncproxy"
SIGNER_SUFFIX = "-selfsigned"  # the self-signed Issuer of a root the program makes
# What every client trusts (components/settings/gateway.py CA_BUNDLE), and the Certificates whose ca.crt the
# Job that writes it reads (components/mechanism/internal_ca.py: `<root>-trust`, `internal-ca-trust-<issuer>`).
CA_BUNDLE = "internal-ca-bundle"
TRUST_COPY = re.compile(r".+-trust(-.+)?")
# Rook's Secrets of the Ceph cluster's admin key (the monitors' secret and the admin keyring).
ROOK_ADMIN_SECRETS = ("rook-ceph-mon", "rook-ceph-admin-keyring")


def issuer_key(ref: Any) -> str | None:
    """'<Kind>/<name>' of a cert-manager issuerRef (kind Issuer and group cert-manager.io unless given);
    None for another group's issuer (an external issuer is no CA of the stack's)."""
    ref = mapping(ref)
    if ref.get("group") not in (None, "", GROUP) or not isinstance(ref.get("name"), str):
        return None
    return f"{ref.get('kind') or 'Issuer'}/{ref['name']}"


def ca_of(ref: Any, settings: PackSettings) -> str | None:
    """Which of the stack's CAs an issuerRef names (internal, libvirt, public), if one."""
    key = issuer_key(ref)
    return settings.ca_issuers.get(key) if key else None


def ca_secrets(settings: PackSettings) -> dict[str, str]:
    """The Secrets of the stack's CA Issuers (of its namespace), by name → which CA's key."""
    return {key.split("/", 1)[1]: ca for key, ca in settings.ca_issuers.items() if key.split("/", 1)[0] == "Issuer"}


def key_secret(name: str, settings: PackSettings) -> str | None:
    """What private key a Secret of this name holds, if it is one of a CA's or a certificate's; None otherwise."""
    cas = ca_secrets(settings)
    if name in cas:
        return f"the {cas[name]} CA's key"
    if name.endswith(SERVER_SUFFIX):
        return "a server certificate's key"
    if name.endswith(CLIENT_SUFFIX) or name == CONSOLE_CERTIFICATE:
        return "a client certificate's key"
    if name == PUBLIC_CERTIFICATE:
        return "the public hosts' certificate's key"
    if name in ROOK_ADMIN_SECRETS:
        return "the Ceph cluster's admin key"
    return None


def written_for_trust(name: str) -> bool:
    """A Secret whose ca.crt the clients trust: the bundle, or a CA's trust copy it is written from."""
    return name == CA_BUNDLE or TRUST_COPY.fullmatch(name) is not None
