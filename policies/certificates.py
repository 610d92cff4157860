"""Certificates from the stack's CAs name only what their Secret serves (ca-certificates).

Every client in the cluster trusts the internal CA, every hypervisor libvirt's, the cloud's users
the public one: whoever mounts a certificate's Secret can be what it names. So a Certificate from
one of the stack's CAs (`caIssuers`) is of a kind the program asks for, in the stack's namespace:

- internal: `<service>-internal-tls`, naming its Service's cluster names (`<service>`,
  `<service>.<ns>`, `.<ns>.svc`, `.<ns>.svc.<domain>`) and its pods' under them; a data store's
  (`mariadb-internal-tls`...) also its operator's Services `<store>-*` and `localhost`; a data
  store's client certificate `<store>-client-tls`, naming `<store>-client`; or a CA's trust copy,
  which names nothing and is good for e-mail protection only (components/mechanism/internal_ca.py);
- libvirt: the console proxy's client certificate `nova-novncproxy-vencrypt` (CN nova-novncproxy);
  the nodes ask for theirs at run time, narrowed by a ValidatingAdmissionPolicy;
- public: `public-tls`, naming hosts outside the cluster.

None of them is a CA (`isCA`, `cert sign`) or names IP addresses, URIs, e-mail addresses, other
names or a literal subject. A Certificate written into a CA Issuer's Secret is that CA's root: it
comes from its own self-signed Issuer `<root>-selfsigned`, never from another CA (which would then
sign, through the root, everything the root signs).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from policies.k8s import K8sObject, get, items, mapping
from policies.messages import forbidden, missing, not_allowed
from policies.settings import PackSettings
from policies.tls_names import (
    CLIENT_SUFFIX,
    CONSOLE_CERTIFICATE,
    CONSOLE_NAME,
    GROUP,
    INTERNAL,
    LIBVIRT,
    PUBLIC_CERTIFICATE,
    SERVER_SUFFIX,
    SIGNER_SUFFIX,
    STORES,
    ca_of,
    ca_secrets,
    issuer_key,
)

OTHER_IDENTITIES = ("ipAddresses", "uris", "emailAddresses", "otherNames", "literalSubject")
TRUST_ONLY = ["email protection"]  # what a trust copy is good for: no TLS peer accepts it
LOCALHOST = "localhost"


def _qualified(labels: list[str], namespace: str) -> str | None:
    """The Service of `<service>.<ns>` or `<service>.<ns>.svc[.<domain>]`, a pod's name under it included."""
    for index in range(len(labels) - 1):
        if labels[index + 1] == namespace and (index + 2 == len(labels) or labels[index + 2] == "svc"):
            return labels[index]
    return None


def service_of(name: str, namespace: str) -> str | None:
    """The Service of `namespace` a name reaches: by its qualified names, or by the short ones the pods'
    DNS search path completes, `<service>` and `<pod>.<service>`. None: a name outside the namespace."""
    labels = name.split(".")
    return _qualified(labels, namespace) or (labels[-1] if len(labels) <= 2 else None)


def in_cluster(name: str, namespace: str) -> bool:
    """A name of the stack's namespace (qualified, or of one label), or localhost: never a public host."""
    labels = name.split(".")
    return name == LOCALHOST or len(labels) == 1 or _qualified(labels, namespace) is not None


def owners(name: str, namespace: str) -> tuple[str, ...]:
    """The Secrets of the internal CA's certificates that may name `name`."""
    if name == LOCALHOST:
        return tuple(store + SERVER_SUFFIX for store in STORES)
    service = service_of(name, namespace)
    if service is None:
        return ()
    found = [service + SERVER_SUFFIX]
    for store in STORES:
        if service.startswith(store + "-") and store + SERVER_SUFFIX not in found:
            found.append(store + SERVER_SUFFIX)
        if service == store + "-client":
            found.append(store + CLIENT_SUFFIX)
    return tuple(found)


def _names(spec: Any) -> Iterator[tuple[str, Any]]:
    if get(spec, "commonName") is not None:
        yield "spec.commonName", get(spec, "commonName")
    for index, name in enumerate(items(get(spec, "dnsNames"))):
        yield f"spec.dnsNames[{index}]", name


def _internal(obj: K8sObject, spec: Any, secret: str, settings: PackSettings) -> Iterator[str]:
    if items(get(spec, "usages")) == TRUST_ONLY and not items(get(spec, "dnsNames")):
        return  # a trust copy: its ca.crt is what the bundle is written from
    for field, name in _names(spec):
        allowed = owners(str(name), settings.namespace)
        if secret not in allowed:
            where = f"in {' or '.join(allowed)} only" if allowed else "in no certificate of the internal CA"
            why = f"every client in the cluster trusts the internal CA: whoever mounts Secret {secret} could be {name}"
            yield not_allowed(obj, "certificate", field, name, f"the name {where}", why)


def _libvirt(obj: K8sObject, spec: Any, secret: str) -> Iterator[str]:
    why = "a certificate of libvirt's CA opens every guest's console and migration stream on every hypervisor"
    if secret != CONSOLE_CERTIFICATE:
        yield not_allowed(obj, "certificate", "spec.secretName", secret,
                          f"{CONSOLE_CERTIFICATE}, the console proxy's (the nodes ask at run time)", why)  # fmt: skip
        return
    for field, name in _names(spec):
        if (field, name) != ("spec.commonName", CONSOLE_NAME):
            yield not_allowed(obj, "certificate", field, name, f"commonName {CONSOLE_NAME} only", why)


def _public(obj: K8sObject, spec: Any, secret: str, settings: PackSettings) -> Iterator[str]:
    if secret != PUBLIC_CERTIFICATE:
        why = "the public CA's certificates are the gateway's: the one it serves the public hosts with"
        yield not_allowed(obj, "certificate", "spec.secretName", secret, PUBLIC_CERTIFICATE, why)
        return
    for field, name in _names(spec):
        if in_cluster(str(name), settings.namespace):
            why = "a name inside the cluster is the internal CA's to certify"
            yield not_allowed(obj, "certificate", field, name, "the public hosts (names outside the cluster)", why)


def _not_a_ca(obj: K8sObject, spec: Any, ca: str) -> Iterator[str]:
    why = f"a CA under the {ca} CA signs whatever it likes, and every peer of the {ca} CA trusts it"
    if get(spec, "isCA") is True:
        yield not_allowed(obj, "certificate", "spec.isCA", True, "false or unset", why)
    if "cert sign" in items(get(spec, "usages")):
        yield not_allowed(obj, "certificate", "spec.usages", items(get(spec, "usages")), "no cert sign", why)
    for field in OTHER_IDENTITIES:
        if get(spec, field) is not None:
            yield forbidden(obj, "certificate", f"spec.{field}", "DNS names and a commonName",
                            "the program's certificates name hosts only")  # fmt: skip


def _root(obj: K8sObject, spec: Any, secret: str) -> Iterator[str]:
    """A Certificate written into a CA Issuer's Secret: the CA's root, from its own self-signed Issuer."""
    signer = f"Issuer/{secret}{SIGNER_SUFFIX}"
    if issuer_key(get(spec, "issuerRef")) != signer:
        why = f"Secret {secret} holds a CA's key: a root from another issuer hands that issuer the CA"
        yield not_allowed(obj, "certificate", "spec.issuerRef", dict(mapping(get(spec, "issuerRef"))),
                          f"{signer} (the root's self-signed Issuer)", why)  # fmt: skip


def _ca(obj: K8sObject, spec: Any, settings: PackSettings) -> str | None:
    """Which of the stack's CAs signs the Certificate: an Issuer of the stack's namespace, or a ClusterIssuer."""
    in_stack = obj.namespace in (None, settings.namespace)
    key = issuer_key(get(spec, "issuerRef"))
    return ca_of(get(spec, "issuerRef"), settings) if in_stack or not str(key).startswith("Issuer/") else None


def ca_certificates(obj: K8sObject, settings: PackSettings) -> list[str]:
    if (obj.group, obj.kind) != (GROUP, "Certificate"):
        return []
    spec = get(obj.props, "spec")
    secret = get(spec, "secretName")
    in_stack = obj.namespace in (None, settings.namespace)
    if isinstance(secret, str) and secret in ca_secrets(settings) and in_stack:
        return list(_root(obj, spec, secret))
    ca = _ca(obj, spec, settings)
    if ca is None:
        return []
    if not in_stack:
        why = f"its Secret would hold a certificate of the {ca} CA outside the stack's namespace"
        return [not_allowed(obj, "certificate", "metadata.namespace", obj.namespace, settings.namespace, why)]
    if not isinstance(secret, str):
        return [missing(obj, "certificate", "spec.secretName", "the Secret it is written to")]
    found = list(_not_a_ca(obj, spec, ca))
    if ca == INTERNAL:
        found += _internal(obj, spec, secret, settings)
    elif ca == LIBVIRT:
        found += _libvirt(obj, spec, secret)
    else:
        found += _public(obj, spec, secret, settings)
    return found
