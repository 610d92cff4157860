"""Copy the keys Rook wrote for the stack's Ceph clients, and ceph.conf, into the stack's namespace.

Reads, in Rook's namespace (by name, as its Role allows): each client's Secret
`rook-ceph-client-<name>` (key `userKey`, the bare cephx key), the ConfigMap
`rook-ceph-mon-endpoints` (key `data`: `a=10.0.0.1:6789,b=...`) and the CephCluster (its
status.ceph.fsid). Writes, in the pod's own namespace, into Secrets the program created: each
client's keyring file under `keyring`, and ceph.conf (fsid, mon_host) under `ceph.conf`, the
shape an external cluster's have. No key is printed. Safe to run again.

Environment: ROOK_NAMESPACE, ROOK_CLUSTER, CEPH_CLIENTS ('rook-secret=stack-secret=user ...'),
CEPH_CONF_TARGET (the Secret for ceph.conf). The API is the pod's (kube_api.py, mounted beside it).
"""

from __future__ import annotations

import base64
import os
import sys
import time
from typing import Any

from kube_api import KubeApi, KubeError

WAIT_SECONDS = 600


def wait_for(api: KubeApi, path: str) -> dict[str, Any]:
    """Rook writes a client's Secret once the client exists: wait a while for it, not for ever."""
    deadline = time.monotonic() + WAIT_SECONDS
    while True:
        try:
            return dict(api.get(path))
        except KubeError as error:
            if error.status != 404 or time.monotonic() > deadline:
                sys.exit(f"GET {path}: {error}")  # the API's Status message: it names no key
        print(f"{path} not there yet; retrying", file=sys.stderr)
        time.sleep(5)


def replace_secret(api: KubeApi, name: str, data: dict[str, str]) -> None:
    """Write `data` into the Secret `name` of the pod's namespace, which the program created."""
    path = api.secret_path(name)
    try:
        secret = api.get(path)
        encoded = {key: base64.b64encode(value.encode()).decode() for key, value in data.items()}
        if secret.get("data") == encoded:
            print(f"Secret {name} is up to date")
            return
        secret["data"] = encoded
        secret.pop("stringData", None)
        api.replace(path, secret)  # with the resourceVersion read: a concurrent change fails it
    except KubeError as error:
        sys.exit(f"Secret {name}: {error}")
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


def main(api: KubeApi | None = None) -> None:
    api = api or KubeApi.in_cluster()
    rook, cluster = os.environ["ROOK_NAMESPACE"], os.environ["ROOK_CLUSTER"]
    for entry in os.environ["CEPH_CLIENTS"].split():
        source, target, user = entry.split("=")
        secret = wait_for(api, api.secret_path(source, rook))
        key = base64.b64decode(secret["data"]["userKey"]).decode().strip()
        replace_secret(api, target, {"keyring": keyring(user, key)})
    endpoints = wait_for(api, f"/api/v1/namespaces/{rook}/configmaps/rook-ceph-mon-endpoints")["data"]["data"]
    status = wait_for(api, f"/apis/ceph.rook.io/v1/namespaces/{rook}/cephclusters/{cluster}").get("status") or {}
    fsid = (status.get("ceph") or {}).get("fsid")
    if not fsid:
        sys.exit(f"CephCluster {rook}/{cluster} reports no fsid yet (status.ceph.fsid): is it running?")
    replace_secret(api, os.environ["CEPH_CONF_TARGET"], {"ceph.conf": ceph_conf(fsid, endpoints)})


if __name__ == "__main__":
    main()
