"""cert-manager objects: the public hosts' certificate, and the self-signed CAs the program makes.

The Certificate `public-tls` names exactly the catalog's public hosts (components/infrastructure/public_routes.py)
and is issued by the stack's Issuer or ClusterIssuer (`tls.public.issuer`: ACME on a real cluster)
or, with `tls.public.selfSigned`, by the CA Issuer `public-ca`, whose root `public-ca` a
self-signed Issuer signs. cert-manager writes `tls.crt`, `tls.key` and `ca.crt` into the Secret of
the same name and renews it before it expires; the gateway reads the Secret again when it changes.

openstack-helm's test deployment issues one wildcard certificate (`*.<domain>`) in the gateway's
namespace from a ClusterIssuer it makes in cert-manager's namespace. Here the certificate names
each host (`endpoints.hosts` may put one outside the domain, and ACME's HTTP-01 issues no
wildcard) and lives in the stack's namespace, with its issuer when the program makes one: the
stack owns what it uses, and deleting the stack takes it along.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from components.mechanism.meta import metadata
from components.settings.gateway import PUBLIC_CA, PublicTls

PUBLIC_TLS = "public-tls"  # the Certificate and the Secret the gateway's listener serves
CA = PUBLIC_CA  # the self-signed root (Certificate and Secret) and the CA Issuer it backs
# cert-manager's own defaults, written out so a plan shows them: 90 days, renewed with a third left,
# and a new private key at every renewal (cert-manager's default since 1.18, not before).
DURATION, RENEW_BEFORE = "2160h", "720h"
CA_DURATION = "87600h"  # ten years: a root the program makes outlives every certificate it signs
PRIVATE_KEY = {"algorithm": "ECDSA", "size": 256, "rotationPolicy": "Always"}
# A root keeps its key when cert-manager renews it (rotationPolicy Never: a key is made only when the
# Secret has none). With Always, the default since cert-manager 1.18, the renewed root would have a new key,
# and no certificate it signed before would verify against it: every client that reads the new root would
# refuse every server at once. Replacing a root's key is a rotation, in phases (tls.internal.rotation).
ROOT_KEY = {**PRIVATE_KEY, "rotationPolicy": "Never"}
WAIT_READY = {"pulumi.com/waitFor": "condition=Ready"}


def issuer(kind: str, name: str) -> dict[str, str]:
    return {"group": "cert-manager.io", "kind": kind, "name": name}


def public_issuer(public: PublicTls) -> dict[str, str]:
    """The public certificate's issuer: the stack's, or the program's CA Issuer."""
    if public.issuer is not None:
        return issuer(public.issuer.kind, public.issuer.name)
    return issuer("Issuer", CA)


def cert_manager(
    kind: str,
    name: str,
    namespace: str,
    spec: dict[str, Any],
    parent: pulumi.Resource,
    *,
    wait: bool = False,
    depends_on: Sequence[pulumi.Resource] = (),
    owner: str = "gateway",
) -> pulumi.Resource:
    """An Issuer or Certificate. `wait`: `pulumi up` waits until cert-manager reports it Ready
    (custom resources are not awaited otherwise), for what must not start without its Secret."""
    return k8s.apiextensions.CustomResource(
        name,
        api_version="cert-manager.io/v1",
        kind=kind,
        metadata=metadata(name, namespace, owner, kind.lower(), **(WAIT_READY if wait else {})),
        spec=spec,
        opts=pulumi.ResourceOptions(parent=parent, depends_on=list(depends_on)),
    )


def self_signed_ca(
    name: str,
    namespace: str,
    parent: pulumi.Resource,
    depends_on: Sequence[pulumi.Resource] = (),
    owner: str = "gateway",
) -> dict[str, str]:
    """A self-signed root `name` (Certificate and Secret) and the CA Issuer `name` that signs with it;
    returns that Issuer's reference. The Issuer `<name>-selfsigned` signs the root only."""
    signer = f"{name}-selfsigned"
    cert_manager("Issuer", signer, namespace, {"selfSigned": {}}, parent, depends_on=depends_on, owner=owner)
    root = {
        "isCA": True,
        "commonName": name,
        "secretName": name,
        "duration": CA_DURATION,
        "privateKey": ROOT_KEY,
        "issuerRef": issuer("Issuer", signer),
    }
    cert_manager("Certificate", name, namespace, root, parent, depends_on=depends_on, owner=owner)
    cert_manager("Issuer", name, namespace, {"ca": {"secretName": name}}, parent, depends_on=depends_on, owner=owner)
    return issuer("Issuer", name)


def public_certificate(
    namespace: str, public: PublicTls, hostnames: Sequence[str], parent: pulumi.Resource
) -> pulumi.Resource:
    """The certificate of every public host, in the Secret `public-tls`."""
    if public.self_signed:
        self_signed_ca(CA, namespace, parent)
    spec = {
        "secretName": PUBLIC_TLS,
        "dnsNames": list(hostnames),
        "duration": DURATION,
        "renewBefore": RENEW_BEFORE,
        "privateKey": PRIVATE_KEY,
        # An ECDSA key signs the handshake; key encipherment is RSA's (cert-manager's default adds it).
        "usages": ["server auth", "digital signature"],
        "issuerRef": public_issuer(public),
    }
    return cert_manager("Certificate", PUBLIC_TLS, namespace, spec, parent)
