"""A client that calls the cloud's APIs once a second until it is stopped; each call's outcome a JSON line.

    python -m tests.lab.cloud.api_loop SERVER_ID > calls.jsonl      (SIGTERM ends it after the round)

Run by tests/lab/cloud/rotation.py while it renews the certificates: from the laptop through the
gateway (the public certificate, then each API's internal one behind it) and from the user's pod
to the internal endpoints. Credentials, endpoint interface, region and CA come from OS_* as for
the `openstack` CLI. Each round is a new keystoneauth Session, so new TLS connections: a pooled
connection keeps the certificate of its first handshake and would hide a renewal that breaks the
next handshake. The calls cover what a renewal may interrupt: Keystone (a token, its database),
each API's listener and its database, keystonemiddleware's token check through memcached, and,
through the console call, Nova's RPC to the compute node over RabbitMQ.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from collections.abc import Callable
from typing import Any

from keystoneauth1 import exceptions, session
from keystoneauth1.identity import v3

ROUND_SECONDS = 1.0
# A call that takes longer counts as failed: the gateway's route timeout (components/infrastructure/front_door.py).
TIMEOUT = 60.0
# (name, service type, method, path, body, microversion header)
CALLS: tuple[tuple[str, str, str, str, dict[str, Any] | None, dict[str, str]], ...] = (
    ("image list", "image", "GET", "/v2/images?limit=1", None, {}),
    ("server list", "compute", "GET", "/servers?limit=1", None, {}),
    # Nova asks the compute node for a console over RabbitMQ (an RPC call, not the database alone).
    ("console url", "compute", "POST", "/servers/{server}/remote-consoles",
     {"remote_console": {"protocol": "vnc", "type": "novnc"}}, {"OpenStack-API-Version": "compute 2.6"}),
    ("network list", "network", "GET", "/v2.0/networks?limit=1", None, {}),
    ("volume list", "volumev3", "GET", "/volumes?limit=1", None, {}),
    ("resource providers", "placement", "GET", "/resource_providers", None, {}),
)  # fmt: skip


def _session() -> session.Session:
    auth = v3.Password(
        auth_url=os.environ["OS_AUTH_URL"],
        username=os.environ["OS_USERNAME"],
        password=os.environ["OS_PASSWORD"],
        project_name=os.environ["OS_PROJECT_NAME"],
        user_domain_name=os.environ.get("OS_USER_DOMAIN_NAME", "Default"),
        project_domain_name=os.environ.get("OS_PROJECT_DOMAIN_NAME", "Default"),
    )
    return session.Session(auth=auth, verify=os.environ.get("OS_CACERT") or True, timeout=TIMEOUT)


def _outcome(name: str, call: Callable[[], int]) -> dict[str, Any]:
    started = time.time()
    status: int | None = None
    try:
        status = call()
        ok, error = status < 400, "" if status < 400 else f"HTTP {status}"
    except exceptions.ClientException as failure:  # connection, TLS, timeouts, HTTP errors
        ok, error = False, f"{type(failure).__name__}: {failure}"
    return {"t": started, "call": name, "ok": ok, "status": status, "error": error[:300],
            "seconds": round(time.time() - started, 3)}  # fmt: skip


def one_round(server: str) -> list[dict[str, Any]]:
    sess = _session()
    try:
        return _calls(sess, server)
    finally:
        sess.session.close()  # the round's connections end with it: the next round's handshakes are new


def _calls(sess: session.Session, server: str) -> list[dict[str, Any]]:
    where = {"interface": os.environ.get("OS_INTERFACE", "public"), "region_name": os.environ.get("OS_REGION_NAME")}
    results = [_outcome("token", lambda: 200 if sess.get_token() else 401)]
    if not results[0]["ok"]:
        return results  # nothing else can be asked without a token
    for name, service, method, path, body, headers in CALLS:

        def call(service: str = service, method: str = method, path: str = path,
                 body: dict[str, Any] | None = body, headers: dict[str, str] = headers) -> int:  # fmt: skip
            answer = sess.request(path.format(server=server), method, json=body, headers=headers,
                                  endpoint_filter={"service_type": service, **where}, raise_exc=False)  # fmt: skip
            return int(answer.status_code)

        results.append(_outcome(name, call))
    return results


def main() -> None:
    server = sys.argv[1]
    stopping = False

    def stop(signum: int, frame: object) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGTERM, stop)
    while not stopping:
        started = time.monotonic()
        for outcome in one_round(server):
            print(json.dumps(outcome), flush=True)
        time.sleep(max(0.0, ROUND_SECONDS - (time.monotonic() - started)))


if __name__ == "__main__":
    main()
