"""The cloud from outside: a user on a laptop, the catalog's public URLs only, every certificate verified.

    python -m tests.lab.cloud.public_scenario DISK > facts.json

Run by tests/lab/cloud/run.py with the OpenStack virtualenv's interpreter from the laptop's network
namespace (tests/lab/cloud/laptop.py): it resolves the public names to the Gateway's address from its
hosts file and trusts the public CA only (PUBLIC_CA, OS_CACERT). OS_AUTH_URL is Keystone's public
URL and OS_INTERFACE `public`, so every call goes to the catalog's public endpoints, through the
gateway. Checks: a token; the catalog's public URLs are https at the routed names; every routed API
answers at its root with links at its public https URL (built from the forwarded headers); the
guest uploaded to Glance; a server created from it (NETWORK, FLAVOR: the user scenario's) and
ACTIVE; its console URL opened (noVNC's page, then the websocket: 101, the RFB greeting, and on to
the desktop's ServerInit past the proxy's security negotiation with the guest's VNC server);
Horizon's login form; a client with only the machine's CA store refuses the certificate (so
verification is on); a host the gateway does not route gets 404. Prints one JSON object; each
check's failure is recorded, not raised. The server and the image are deleted at the end.
"""

from __future__ import annotations

import json
import os
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import openstack

from tests.lab.cloud.publicclient import PublicClient, absolute_links, horizon_login, system_trust_refuses

SERVER_TIMEOUT = 600


def _hosts() -> dict[str, str]:
    return dict(json.loads(os.environ["PUBLIC_HOSTS"]))


def token(conn: openstack.connection.Connection, found: dict[str, Any]) -> None:
    found["auth_url"] = os.environ["OS_AUTH_URL"]
    found["ok"] = bool(conn.authorize())


def catalog(conn: openstack.connection.Connection, found: dict[str, Any]) -> None:
    """Every public endpoint is https at a name the gateway routes."""
    access = conn.session.auth.get_access(conn.session)
    urls = {
        service["type"]: endpoint["url"]
        for service in access.service_catalog.catalog
        for endpoint in service.get("endpoints", [])
        if endpoint.get("interface") == "public"
    }
    routed = set(_hosts().values())
    found["public_urls"] = urls
    found["ok"] = bool(urls) and all(
        urlsplit(u).scheme == "https" and urlsplit(u).hostname in routed for u in urls.values()
    )


def links(client: PublicClient, found: dict[str, Any]) -> None:
    """Each API's root through the gateway: it answers, and its absolute links are its https public URL."""
    hosts = {key: host for key, host in _hosts().items() if key not in ("horizon", "novncproxy")}
    ok, seen = True, 0
    for key, host in sorted(hosts.items()):
        answer = client.request(host, "GET", "/", headers={"Accept": "application/json"})
        try:
            hrefs = absolute_links(json.loads(answer.body or b"null"))
        except ValueError:
            hrefs = []
        wrong = [h for h in hrefs if not h.startswith(f"https://{host}/")]
        found[key] = {"status": answer.status, "links": hrefs[:3], "not_public_https": wrong}
        ok = ok and answer.status < 500 and not wrong
        seen += len(hrefs)
    found["ok"] = ok and seen > 0


def image_upload(conn: openstack.connection.Connection, disk: Path, found: dict[str, Any], made: dict) -> None:
    image = conn.image.create_image(
        name="public-guest", filename=str(disk), disk_format="raw", container_format="bare", wait=True, timeout=300
    )
    made["image"] = image
    image = conn.image.get_image(image.id)
    found.update(status=image.status, size=image.size, bytes=disk.stat().st_size)
    found["ok"] = image.status == "active" and image.size == disk.stat().st_size


def server_create(conn: openstack.connection.Connection, found: dict[str, Any], made: dict) -> None:
    flavor = conn.compute.find_flavor(os.environ["FLAVOR"], ignore_missing=False)
    network = conn.network.find_network(os.environ["NETWORK"], ignore_missing=False)
    server = conn.compute.create_server(
        name="public-vm", image_id=made["image"].id, flavor_id=flavor.id, networks=[{"uuid": network.id}]
    )
    made["server"] = server
    server = conn.compute.wait_for_server(server, status="ACTIVE", failures=["ERROR"], wait=SERVER_TIMEOUT)
    found.update(status=server.status, host=server.compute_host, ok=server.status == "ACTIVE")


def console(conn: openstack.connection.Connection, client: PublicClient, found: dict[str, Any], made: dict) -> None:
    """The console URL Nova hands out, opened as a browser opens it: noVNC's page, then its websocket."""
    url = conn.compute.create_console(made["server"], console_type="novnc")["url"]
    parts = urlsplit(url)
    host = parts.hostname or ""
    found["url_host"], found["url_scheme"] = host, parts.scheme
    found["page"] = client.request(host, "GET", f"{parts.path}?{parts.query}").status
    # noVNC opens wss://<host>/<path>, path from the page's query (`?token=...`); older URLs carry the token.
    query = parse_qs(parts.query)
    path = "/" + (query["path"][0].lstrip("/") if "path" in query else f"?token={query.get('token', [''])[0]}")
    opened = client.websocket(host, path, origin=f"{parts.scheme}://{host}", rfb=True)
    found.update(status=opened["status"], accept_ok=opened.get("accept_ok"))
    message = opened.get("first_message") or {}
    found["rfb"] = message.get("text", "")
    # Past the proxy's security negotiation with the guest's VNC server (VeNCrypt under tls.libvirt):
    # the desktop's ServerInit, as noVNC reads it.
    found["handshake"] = opened.get("rfb") or {}
    found["ok"] = (
        parts.scheme == "https" and host == _hosts()["novncproxy"] and found["page"] == 200
        and opened["status"] == 101 and bool(opened.get("accept_ok")) and found["rfb"].startswith("RFB ")
        and found["handshake"].get("reached") == "ServerInit"
    )  # fmt: skip


def horizon(client: PublicClient, found: dict[str, Any]) -> None:
    found.update(horizon_login(client, _hosts()["horizon"], os.environ["OS_USERNAME"], os.environ["OS_PASSWORD"]))
    found["ok"] = bool(found.get("logged_in")) and found.get("static_css") == 200 and bool(found["secure_cookies"])


def verification(found: dict[str, Any]) -> None:
    found["ok"] = system_trust_refuses(_hosts()["keystone"])


def unrouted(client: PublicClient, found: dict[str, Any]) -> None:
    """A name the gateway has no route for (sent on a connection whose certificate is valid): 404."""
    keystone = _hosts()["keystone"]
    answer = client.request(keystone, "GET", "/", headers={"Host": "unrouted." + keystone.split(".", 1)[1]})
    found.update(status=answer.status, ok=answer.status == 404)


def _cleanup(conn: openstack.connection.Connection, made: dict[str, Any]) -> None:
    if "server" in made:
        conn.compute.delete_server(made["server"])
        conn.compute.wait_for_delete(made["server"], wait=120)
    if "image" in made:
        conn.image.delete_image(made["image"])


def main() -> None:
    disk = Path(sys.argv[1])
    conn = openstack.connect()
    client = PublicClient(os.environ["PUBLIC_CA"])
    checks: dict[str, dict[str, Any]] = {}
    made: dict[str, Any] = {}
    steps: list[tuple[str, Callable[[dict[str, Any]], None]]] = [
        ("token", lambda f: token(conn, f)),
        ("catalog", lambda f: catalog(conn, f)),
        ("links", lambda f: links(client, f)),
        ("image_upload", lambda f: image_upload(conn, disk, f, made)),
        ("server_create", lambda f: server_create(conn, f, made)),
        ("console", lambda f: console(conn, client, f, made)),
        ("horizon_login", lambda f: horizon(PublicClient(os.environ["PUBLIC_CA"]), f)),
        ("verification", verification),
        ("unrouted_host", lambda f: unrouted(client, f)),
    ]
    for name, step in steps:
        found: dict[str, Any] = {"ok": False}
        started = time.monotonic()
        try:
            step(found)
        except Exception as error:  # each check's failure is a finding of the report
            found["error"] = f"{type(error).__name__}: {error}\n{traceback.format_exc()[-1200:]}"
        found["seconds"] = round(time.monotonic() - started, 1)
        checks[name] = found
    try:
        _cleanup(conn, made)
    except Exception as error:  # the report says so; the run goes on
        checks["cleanup"] = {"ok": False, "error": f"{type(error).__name__}: {error}"}
    print(json.dumps({"checks": checks}))


if __name__ == "__main__":
    main()
