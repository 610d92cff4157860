"""Copy the keys Rook wrote for the stack's Ceph clients, and ceph.conf, into the stack's namespace.

Reads, in Rook's namespace (by name, as its Role allows): each client's Secret
`rook-ceph-client-<name>` (key `userKey`, the bare cephx key), the ConfigMap
`rook-ceph-mon-endpoints` (key `data`: `a=10.0.0.1:6789,b=...`) and the CephCluster (its
status.ceph.fsid). Writes, in the pod's own namespace, into Secrets the program created: each
client's keyring file under `keyring`, and ceph.conf (fsid, mon_host) under `ceph.conf`, the
shape an external cluster's have. No key is printed. Safe to run again.

Environment: ROOK_NAMESPACE, ROOK_CLUSTER, CEPH_CLIENTS ('rook-secret=stack-secret=user ...'),
CEPH_CONF_TARGET (the Secret for ceph.conf); KUBE_API and KUBE_TOKEN_DIR only to point it elsewhere
than the pod's API server.
"""

from __future__ import annotations

import base64
import json
import os
import ssl
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

ACCOUNT = Path(os.environ.get("KUBE_TOKEN_DIR", "/var/run/secrets/kubernetes.io/serviceaccount"))
WAIT_SECONDS = 600


class Api:
    def __init__(self) -> None:
        if "KUBE_API" in os.environ:
            self.root, self.tls = os.environ["KUBE_API"].rstrip("/"), None
        else:
            host, port = os.environ["KUBERNETES_SERVICE_HOST"], os.environ["KUBERNETES_SERVICE_PORT"]
            self.root = f"https://[{host}]:{port}" if ":" in host else f"https://{host}:{port}"
            self.tls = ssl.create_default_context(cafile=str(ACCOUNT / "ca.crt"))
        self.namespace = (ACCOUNT / "namespace").read_text().strip()

    def call(self, method: str, path: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
        request = urllib.request.Request(
            self.root + path,
            data=json.dumps(body).encode() if body is not None else None,
            method=method,
            headers={
                "Authorization": f"Bearer {(ACCOUNT / 'token').read_text().strip()}",
                "Accept": "application/json",
                "Content-Type": "application/json",
            },
        )
        with urllib.request.urlopen(request, context=self.tls, timeout=30) as response:
            return json.load(response)

    def wait_for(self, path: str) -> dict[str, Any]:
        """Rook writes a client's Secret once the client exists: wait a while for it, not for ever."""
        deadline = time.monotonic() + WAIT_SECONDS
        while True:
            try:
                return self.call("GET", path)
            except urllib.error.HTTPError as error:
                if error.code != 404 or time.monotonic() > deadline:
                    # The API's status line only: the body of an error names no key, but keep logs short.
                    sys.exit(f"GET {path}: {error.code} {error.reason}")
            print(f"{path} not there yet; retrying", file=sys.stderr)
            time.sleep(5)

    def replace_secret(self, name: str, data: dict[str, str]) -> None:
        path = f"/api/v1/namespaces/{self.namespace}/secrets/{name}"
        secret = self.call("GET", path)
        encoded = {key: base64.b64encode(value.encode()).decode() for key, value in data.items()}
        if secret.get("data") == encoded:
            print(f"Secret {name} is up to date")
            return
        secret["data"] = encoded
        secret.pop("stringData", None)
        try:
            self.call("PUT", path, secret)  # with the resourceVersion read: a concurrent change fails it
        except urllib.error.HTTPError as error:
            sys.exit(f"PUT {path}: {error.code} {error.reason}")
        print(f"Secret {name} written")


def keyring(user: str, key: str) -> str:
    """The keyring file `ceph auth get client.<user>` prints, without caps (librados needs only the key)."""
    return f"[client.{user}]\n\tkey = {key}\n"


def mon_host(endpoints: str) -> str:
    """mon_host from Rook's 'a=10.0.0.1:6789,b=10.0.0.2:3300': the addresses, without the monitors' names."""
    hosts = [entry.split("=", 1)[1] for entry in endpoints.split(",") if "=" in entry and entry.split("=", 1)[1]]
    if not hosts:
        sys.exit(f"rook-ceph-mon-endpoints names no monitor: {endpoints!r}")
    return ",".join(hosts)


def ceph_conf(fsid: str, endpoints: str) -> str:
    return f"[global]\nfsid = {fsid}\nmon_host = {mon_host(endpoints)}\n"


def main() -> None:
    api = Api()
    rook, cluster = os.environ["ROOK_NAMESPACE"], os.environ["ROOK_CLUSTER"]
    for entry in os.environ["CEPH_CLIENTS"].split():
        source, target, user = entry.split("=")
        secret = api.wait_for(f"/api/v1/namespaces/{rook}/secrets/{source}")
        key = base64.b64decode(secret["data"]["userKey"]).decode().strip()
        api.replace_secret(target, {"keyring": keyring(user, key)})
    endpoints = api.wait_for(f"/api/v1/namespaces/{rook}/configmaps/rook-ceph-mon-endpoints")["data"]["data"]
    status = api.wait_for(f"/apis/ceph.rook.io/v1/namespaces/{rook}/cephclusters/{cluster}").get("status") or {}
    fsid = (status.get("ceph") or {}).get("fsid")
    if not fsid:
        sys.exit(f"CephCluster {rook}/{cluster} reports no fsid yet (status.ceph.fsid): is it running?")
    api.replace_secret(os.environ["CEPH_CONF_TARGET"], {"ceph.conf": ceph_conf(fsid, endpoints)})


if __name__ == "__main__":
    main()
