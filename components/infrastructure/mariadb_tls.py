"""MariaDB on internal TLS: the MariaDB resource's spec.tls, its certificates, and what clients verify.

With `tls.internal` naming a CA, mariadb-operator (26.6.0) is given Secrets of that CA instead of
making a CA of its own (without `spec.tls` it enables TLS with a self-signed CA nobody here
trusts, and admits plain connections):
- `mariadb-internal-tls`, the server's certificate: exactly the names the operator itself puts in
  the certificate it issues (api/v1alpha1 `TLSServerDNSNames`), so every Service clients use
  (`mariadb`, and under Galera `mariadb-primary`) and each Galera pod through the headless
  `mariadb-internal` Service is named;
- `mariadb-client-tls`, the client certificate the operator, its agents and its Backup Jobs
  present (the operator always connects with one: `IsTLSMutual`), CN `mariadb-client` as its own;
- `internal-ca-bundle` as both CAs (`serverCASecretRef`, `clientCASecretRef`): holding `ca.crt`
  but no `ca.key`, it is trusted and issues nothing. The operator bundles them into
  `mariadb-ca-bundle`, the server's `ssl_ca` and Galera's `socket.ssl_ca`.

`required` makes the operator write `require_secure_transport = true` (a plain TCP connection is
refused); Galera's replication then runs on TLS only (`socket.dynamic = false`), and
`galeraSSTEnabled` puts the state transfers (mariabackup streamed between nodes) on TLS too.

Every Secret carries the label `k8s.mariadb.com/watch`: the operator watches only labelled
Secrets (api/v1alpha1/mariadb_indexes.go), and a renewed certificate changes the hash it puts on
its pods, so it rolls them (README, "What each consumer does when its certificate renews").
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pulumi

from components.mechanism import certificates, internal_tls
from components.mechanism.oslo import MARIADB
from components.mechanism.workload import Manifest
from components.settings.model import Settings

SERVER_SECRET = f"{MARIADB}-internal-tls"
CLIENT_SECRET = f"{MARIADB}-client-tls"
CLIENT_NAME = f"{MARIADB}-client"  # the operator's own client certificate's name (TLSClientNames)
WATCH = internal_tls.MARIADB_OPERATOR_WATCH


def server_dns_names(settings: Settings, name: str = MARIADB) -> list[str]:
    """The operator's TLSServerDNSNames for a MariaDB `name`: each Service's four names, every pod
    of the headless `<name>-internal` Service (a wildcard), and localhost (its probes and agent)."""
    ns, domain = settings.namespace, settings.endpoints.cluster_domain

    def variants(host: str) -> list[str]:
        return [f"{host}.{ns}.svc.{domain}", f"{host}.{ns}.svc", f"{host}.{ns}", host]

    return [
        *variants(name),
        *variants(f"*.{name}-internal"),
        *variants(f"{name}-primary"),
        *variants(f"{name}-secondary"),
        "localhost",
    ]


def _usages(settings: Settings, purpose: str) -> list[str]:
    """Under Galera a node presents its server certificate to its peers as a client too (gcomm's
    socket.ssl), and the client certificate serves as both ends of a state transfer: the operator
    then issues them without extended usages ("Galera not compatible with key usages",
    internal/controller/mariadb_controller_tls.go), and so does this."""
    return ["digital signature"] if settings.ha else [purpose, "digital signature"]


def server_certificate(settings: Settings) -> Manifest:
    internal = settings.tls.internal
    assert internal is not None
    spec = internal_tls.server_certificate(SERVER_SECRET, server_dns_names(settings), internal)
    return {**spec, "usages": _usages(settings, "server auth"), "secretTemplate": {"labels": WATCH}}


def client_certificate(settings: Settings) -> Manifest:
    internal = settings.tls.internal
    assert internal is not None
    return {
        "secretName": CLIENT_SECRET,
        "commonName": CLIENT_NAME,
        "dnsNames": [CLIENT_NAME],
        "duration": certificates.DURATION,
        "renewBefore": certificates.RENEW_BEFORE,
        "privateKey": certificates.PRIVATE_KEY,
        "usages": _usages(settings, "client auth"),
        "issuerRef": internal_tls.issuer(internal),
        "secretTemplate": {"labels": WATCH},
    }


def tls_spec(settings: Settings) -> dict[str, Any]:
    """spec.tls where tls.internal names a CA; nothing otherwise (the operator's default stays)."""
    if not settings.tls.internal_enabled:
        return {}
    ca = {"name": internal_tls.CA_BUNDLE}
    tls: dict[str, Any] = {
        "enabled": True,
        "required": True,
        "serverCASecretRef": ca,
        "serverCertSecretRef": {"name": SERVER_SECRET},
        "clientCASecretRef": ca,
        "clientCertSecretRef": {"name": CLIENT_SECRET},
    }
    if settings.ha:
        tls["galeraSSTEnabled"] = True
    return {"tls": tls}


# The refs of spec.tls whose Secrets mariadb-operator hashes onto its pods (k8s.mariadb.com/server-cert,
# .../ca: internal/controller/mariadb_controller_tls.go, 26.6.0): a change of any of them rolls the pods.
SECRET_REFS = ("serverCertSecretRef", "clientCertSecretRef", "serverCASecretRef", "clientCASecretRef")


def secrets_named(spec: Mapping[str, Any]) -> set[str]:
    """The Secrets a MariaDB resource's spec.tls names (what, when it changes, makes the operator roll)."""
    tls = spec.get("tls") or {}
    return {str(tls[ref]["name"]) for ref in SECRET_REFS if (tls.get(ref) or {}).get("name")}


def certificates_for(settings: Settings, parent: pulumi.Resource) -> None:
    """The Certificates spec.tls names; the MariaDB pods wait in ContainerCreating for their Secrets."""
    if not settings.tls.internal_enabled:
        return
    ns, owner = settings.namespace, internal_tls.OWNER
    certificates.cert_manager("Certificate", SERVER_SECRET, ns, server_certificate(settings), parent, owner=owner)
    certificates.cert_manager("Certificate", CLIENT_SECRET, ns, client_certificate(settings), parent, owner=owner)
