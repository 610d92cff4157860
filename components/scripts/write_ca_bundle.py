"""Write the internal CA bundle: the certificate of each trusted CA, as `ca.crt` of one Secret, and
each trusted CA alone as `ca.crt` of a ConfigMap named as its trust Secret.

    python3 write_ca_bundle.py

The Job internal-ca-bundle runs it (components/ca_rotation.py), with
- BUNDLE_NAME: the Secret it writes (internal-ca-bundle), which every pod mounts;
- TRUSTED_CAS: `<trust Secret>=<issuer kind>/<issuer name>` per trusted CA, the one being replaced first;
- CA_BUNDLE_LABELS: the bundle's labels (JSON), mariadb-operator's watch label among them.

Each trust Secret is a cert-manager Certificate's whose `ca.crt` is its issuer's CA. It waits until
cert-manager has issued each one from the issuer named (the `cert-manager.io/issuer-kind` and
`-name` annotations cert-manager writes with every issuance) with a `ca.crt`: the phase that adds
a CA runs this while cert-manager issues the new root and its trust Certificate. Then it writes
the certificates, each once, in that order. It creates the Secret (Opaque) where there is none;
otherwise it replaces `ca.crt` and keeps the other keys: a stack from before this Job has the
Secret as cert-manager wrote it, of type kubernetes.io/tls, which must keep tls.crt and tls.key.
That Secret becomes the Job's: cert-manager's annotations and its owner reference go (with
cert-manager's --enable-certificate-owner-ref, deleting the Certificate that wrote it would delete
it too). Nothing is written when the Secret already holds this bundle, so its users (MariaDB's
operator restarts its pods on a change) see no change.

The ConfigMaps are for the gateway (BackendTLSPolicy's caCertificateRefs, components/infrastructure/front_door.py):
the Gateway API guarantees every implementation reads a ConfigMap's `ca.crt` holding one certificate; a
Secret, or several certificates in one object, is implementation-specific. So during a rotation the policy
lists one ConfigMap per trusted CA. When a trust Secret's `ca.crt` is a chain (an intermediate issuer), its
ConfigMap holds the chain's last certificate, the root, which the servers' chains (cert-manager writes the
intermediates into tls.crt) lead to. A CA is not secret: a ConfigMap may hold it.

Standard library only: the kolla-toolbox image has no Kubernetes client (kube_api.py).
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import re
import ssl
import sys
import time
from typing import Any

from kube_api import KubeApi, KubeError

PEM_BLOCK = re.compile(r"-----BEGIN CERTIFICATE-----\s.*?-----END CERTIFICATE-----", re.S)
WAIT_SECONDS = 20 * 60  # within the Job's deadline (components/kube.py), which ends a run that waits longer
POLL_SECONDS = 5
CERT_MANAGER = "cert-manager.io/"
OWNED_BY_CERT_MANAGER = "controller.cert-manager.io/fao"


def certificates(text: str) -> list[bytes]:
    """The DER of each certificate of a PEM text; a block that is no certificate is an error."""
    return [ssl.PEM_cert_to_DER_cert(block) for block in PEM_BLOCK.findall(text)]


def trusted_cas(spec: str) -> list[tuple[str, str, str]]:
    """TRUSTED_CAS as (Secret, issuer kind, issuer name)."""
    found = []
    for item in spec.split():
        secret, _, issuer = item.partition("=")
        kind, _, name = issuer.partition("/")
        if not (secret and kind and name):
            sys.exit(f"TRUSTED_CAS: {item!r} is not <Secret>=<issuer kind>/<issuer name>")
        found.append((secret, kind, name))
    if not found:
        sys.exit("TRUSTED_CAS names no CA")
    return found


def issued_ca(api: KubeApi, secret: str, kind: str, name: str) -> tuple[list[bytes] | None, str]:
    """The CA certificates of a trust Secret once issued by the issuer expected; else None and why not yet."""
    try:
        found = api.get(api.secret_path(secret))
    except KubeError as error:
        if error.status == 404:
            return None, f"Secret {secret} does not exist yet (cert-manager issues it)"
        raise
    annotations = (found.get("metadata") or {}).get("annotations") or {}
    by = (annotations.get(f"{CERT_MANAGER}issuer-kind"), annotations.get(f"{CERT_MANAGER}issuer-name"))
    if by != (kind, name):
        return None, f"Secret {secret} is issued by {by[0]} {by[1]}, not yet by {kind} {name}"
    text = base64.b64decode((found.get("data") or {}).get("ca.crt", "")).decode()
    try:
        ders = certificates(text)
    except ValueError as error:
        sys.exit(f"Secret {secret}: ca.crt holds a block that is no certificate: {error}")
    if not ders:
        return None, (f"Secret {secret} has no ca.crt: its issuer {kind} {name} gives no CA (an ACME issuer "
                      "writes none; tls.internal.issuer must be a CA or Vault issuer)")  # fmt: skip
    return ders, ""


def wait_for_cas(api: KubeApi, trusted: list[tuple[str, str, str]]) -> dict[str, list[bytes]]:
    """Each trust Secret's CA certificates, in TRUSTED_CAS' order, once every one is issued."""
    deadline, told = time.monotonic() + WAIT_SECONDS, ""
    while True:
        found: dict[str, list[bytes]] = {}
        waiting = []
        for trust, kind, name in trusted:
            ders, why = issued_ca(api, trust, kind, name)
            if ders is None:
                waiting.append(why)
                continue
            found[trust] = ders
        if not waiting:
            return found
        if "; ".join(waiting) != told:
            told = "; ".join(waiting)
            print(f"waiting: {told}", flush=True)
        if time.monotonic() > deadline:
            sys.exit(f"gave up after {WAIT_SECONDS}s: {told}")
        time.sleep(POLL_SECONDS)


def pem(bundle: list[bytes]) -> str:
    return "".join(ssl.DER_cert_to_PEM_cert(der) for der in bundle)


def updated(current: dict[str, Any], encoded: str, wanted_labels: dict[str, str]) -> dict[str, Any] | None:
    """The Secret as this Job writes it over `current`; None if that is what it already is."""
    metadata = dict(current.get("metadata") or {})
    labels = {k: v for k, v in (metadata.get("labels") or {}).items() if k != OWNED_BY_CERT_MANAGER}
    annotations = {k: v for k, v in (metadata.get("annotations") or {}).items() if not k.startswith(CERT_MANAGER)}
    owners = [o for o in metadata.get("ownerReferences") or [] if not o.get("apiVersion", "").startswith(CERT_MANAGER)]
    changed = {
        "labels": {**labels, **wanted_labels},
        "annotations": annotations,
        "ownerReferences": owners,
    }
    data = {**(current.get("data") or {}), "ca.crt": encoded}
    unchanged = data == (current.get("data") or {}) and all(
        changed[key] == (metadata.get(key) or ({} if key != "ownerReferences" else [])) for key in changed
    )
    if unchanged:
        return None
    return {**current, "metadata": {**metadata, **changed}, "data": data}


def read_or_create(api: KubeApi, path: str, created: dict[str, Any]) -> dict[str, Any] | None:
    """The object at `path` as it is; where there is none, `created` is created and None returned."""
    kind, name = created["kind"], created["metadata"]["name"]
    try:
        return dict(api.get(path))
    except KubeError as error:
        if error.status != 404:
            sys.exit(f"GET {kind} {api.namespace}/{name}: {error}")
    try:
        api.create(path.rsplit("/", 1)[0], created)  # the collection the object is named in
    except KubeError as failed:
        sys.exit(f"create {kind} {api.namespace}/{name}: {failed}")
    return None


def write_config_map(api: KubeApi, name: str, root: bytes, wanted_labels: dict[str, str]) -> None:
    """The ConfigMap `name` with `ca.crt` the one certificate `root`, created or replaced; untouched if it is."""
    data = {"ca.crt": pem([root])}
    path = f"/api/v1/namespaces/{api.namespace}/configmaps/{name}"
    metadata = {"name": name, "namespace": api.namespace, "labels": wanted_labels}
    created = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": metadata, "data": data}
    current = read_or_create(api, path, created)
    if current is None:
        print(f"created ConfigMap {name}: SHA-256 {hashlib.sha256(root).hexdigest()[:16]}")
        return
    metadata = current.get("metadata") or {}
    labels = {**(metadata.get("labels") or {}), **wanted_labels}
    if current.get("data") == data and labels == (metadata.get("labels") or {}):
        return
    try:
        api.replace(path, {**current, "metadata": {**metadata, "labels": labels}, "data": data})
    except KubeError as error:
        sys.exit(f"update ConfigMap {api.namespace}/{name}: {error}")
    print(f"wrote ConfigMap {name}: SHA-256 {hashlib.sha256(root).hexdigest()[:16]}")


def main(api: KubeApi | None = None) -> None:
    api = api or KubeApi.in_cluster()
    name = os.environ["BUNDLE_NAME"]
    wanted_labels = dict(json.loads(os.environ.get("CA_BUNDLE_LABELS") or "{}"))
    per_ca = wait_for_cas(api, trusted_cas(os.environ["TRUSTED_CAS"]))
    # First: the gateway may then verify with either CA before any server presents the new one.
    for trust, ders in per_ca.items():
        write_config_map(api, trust, ders[-1], wanted_labels)
    bundle: list[bytes] = []
    for ders in per_ca.values():
        bundle += [der for der in ders if der not in bundle]
    fingerprints = ", ".join(hashlib.sha256(der).hexdigest()[:16] for der in bundle)
    encoded = base64.b64encode(pem(bundle).encode()).decode()
    path = api.secret_path(name)
    created = {"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
               "metadata": {"name": name, "namespace": api.namespace, "labels": wanted_labels},
               "data": {"ca.crt": encoded}}  # fmt: skip
    current = read_or_create(api, path, created)
    if current is None:
        print(f"created Secret {name}: {len(bundle)} CA(s), SHA-256 {fingerprints}")
        return
    replacement = updated(current, encoded, wanted_labels)
    if replacement is None:
        print(f"Secret {name} already holds these {len(bundle)} CA(s) (SHA-256 {fingerprints}): unchanged")
        return
    try:
        api.replace(path, replacement)  # with the resourceVersion read: a concurrent change fails this run
    except KubeError as error:
        sys.exit(f"update Secret {api.namespace}/{name}: {error}")
    print(f"wrote Secret {name}: {len(bundle)} CA(s), SHA-256 {fingerprints}")


if __name__ == "__main__":
    main()
