"""The lab's Gateway proxy for real: haproxy programmed from prod's routes, with the certificate the lab's
cert-manager issues for them, in front of small backends on the loopback.

What the lab's proof from outside relies on, checked here without the lab: TLS with the public
certificate (verified against its root, refused by the machine's CA store), routing by host name
to the route's backend, Envoy's edge headers (the Host unchanged, X-Forwarded-Proto https
whatever the client sent, X-Forwarded-For; no X-Forwarded-Host), HTTP/2 by ALPN, request bodies
passed whole, the console's websocket upgrade (101, then the backend's first message), 404 for a
host without a route, and the route's own request timeout in place of Envoy's 15 s (504 past it).
"""

from __future__ import annotations

import copy
import hashlib
import json
import shutil
import socket
import ssl
import subprocess
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import hashes

from components.mechanism.certificates import PUBLIC_TLS
from tests.conftest import plan_of
from tests.lab.cloud.certmanager import CertManager
from tests.lab.cloud.gateway import ADMIN_SOCKET, listener_file, swap_certificate, write_files
from tests.lab.cloud.gatewayapi import Programmed, owners_gateway, program
from tests.lab.cloud.publicclient import PublicClient, accept_key, frame, system_trust_refuses
from tests.lab.realenv.servers import free_port
from tests.real.haproxy import running_haproxy

SLOW_SECONDS = 17  # beyond Envoy's 15 s route timeout, within the plan's 60 s
SHORT_TIMEOUT = "3s"  # the console route's request timeout in this test: shorter than the slow answer
STACK = "prod"


class Backend(BaseHTTPRequestHandler):
    """Says who it is and what it was sent; upgrades websockets and greets as a VNC server does."""

    protocol_version = "HTTP/1.1"

    def _answer(self, body: bytes = b"") -> None:
        if self.path == "/slow":
            time.sleep(SLOW_SECONDS)
        if self.headers.get("Upgrade", "").lower() == "websocket":
            self.send_response(101)
            self.send_header("Upgrade", "websocket")
            self.send_header("Connection", "Upgrade")
            self.send_header("Sec-WebSocket-Accept", accept_key(self.headers["Sec-WebSocket-Key"]))
            self.send_header("Sec-WebSocket-Protocol", "binary")
            self.end_headers()
            self.wfile.write(frame(b"RFB 003.008\n"))
            self.wfile.flush()
            self.close_connection = True
            return
        seen = {"backend": self.server.name, "path": self.path, "received": len(body),  # type: ignore[attr-defined]
                "headers": {k.lower(): v for k, v in self.headers.items()}}  # fmt: skip
        answer = json.dumps(seen).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)

    def do_GET(self) -> None:
        self._answer()

    def do_POST(self) -> None:
        self._answer(self.rfile.read(int(self.headers.get("Content-Length", "0"))))

    def log_message(self, format: str, *args: object) -> None:
        pass


@dataclass
class Front:
    port: int
    ca: Path
    hosts: dict[str, str]  # host key → public name
    client: PublicClient
    haproxy: subprocess.Popen[bytes]
    state: Path
    programmed: Programmed
    certs: CertManager

    def curl(self, host: str, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["curl", "-sS", "--max-time", "30", "--resolve", f"{host}:{self.port}:127.0.0.1", "--cacert",
             str(self.ca), *args, f"https://{host}:{self.port}/v3"],
            capture_output=True, text=True,
        )  # fmt: skip


@pytest.fixture(scope="module")
def front(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Front]:
    for tool, package in (("haproxy", "haproxy"), ("curl", "curl")):
        if shutil.which(tool) is None:
            pytest.fail(f"{tool} is not installed: apt-get install {package}", pytrace=False)
    plan = plan_of(STACK)
    resources = [copy.deepcopy(r.revealed) for r in plan.custom]
    certs = CertManager(resources)
    assert certs.issue_all() == []
    servers = {}
    for name in ("keystone-api", "nova-novncproxy"):
        server = ThreadingHTTPServer(("127.0.0.1", 0), Backend)
        server.name = name  # type: ignore[attr-defined]
        servers[name] = server
        threading.Thread(target=server.serve_forever, daemon=True).start()
    routes = [r for r in resources if r.get("kind") == "HTTPRoute"]
    for route in routes:  # each route's Service stands on a port of the loopback
        for ref in route["spec"]["rules"][0]["backendRefs"]:
            if ref["name"] in servers:
                ref["port"] = servers[ref["name"]].server_address[1]
            if ref["name"] == "nova-novncproxy":
                route["spec"]["rules"][0]["timeouts"] = {"request": SHORT_TIMEOUT}
    existing = plan.settings.gateway.existing  # type: ignore[union-attr]
    assert existing is not None
    gateway = owners_gateway(existing.name, existing.namespace, existing.section_name or "https", ("openstack",
                             PUBLIC_TLS))  # fmt: skip
    programmed = program(gateway, routes, [r for r in resources if r.get("kind") == "ReferenceGrant"])
    assert programmed.problems == []
    port = free_port()
    state = tmp_path_factory.mktemp("gateway")
    secret = certs.secrets[("openstack", PUBLIC_TLS)]

    def address(backend: object) -> str | None:
        return "127.0.0.1" if getattr(backend, "service", "") in servers else None

    config = write_files(programmed, state, lambda ns, name: secret.data, address, "127.0.0.1", {443: port})
    ca = state / "root.pem"
    ca.write_text(secret.trust_anchor)
    hosts = {key: plan.settings.public_host(key) for key in ("keystone", "novncproxy", "nova")}
    try:
        with running_haproxy(config, port) as haproxy:
            yield Front(port, ca, hosts, PublicClient(str(ca), ("127.0.0.1", port)), haproxy, state, programmed, certs)
    finally:
        for server in servers.values():
            server.shutdown()


def test_curl_verifies_the_certificate_and_reaches_the_hosts_backend_over_http2(front: Front) -> None:
    done = front.curl(front.hosts["keystone"], "-w", "\n%{http_version}")
    assert done.returncode == 0, done.stderr
    body, version = done.stdout.rsplit("\n", 1)
    seen = json.loads(body)
    assert seen["backend"] == "keystone-api" and seen["path"] == "/v3"
    assert version == "2"  # ALPN h2, as Envoy offers it
    novnc = json.loads(front.curl(front.hosts["novncproxy"]).stdout)
    assert novnc["backend"] == "nova-novncproxy"


def test_a_client_without_the_public_ca_refuses_the_certificate(front: Front) -> None:
    assert system_trust_refuses(front.hosts["keystone"], ("127.0.0.1", front.port))
    assert front.curl(front.hosts["keystone"], "--cacert", "/etc/ssl/certs/ca-certificates.crt").returncode != 0


def test_the_backend_gets_the_host_and_envoys_forwarded_headers_whatever_the_client_sent(front: Front) -> None:
    host = front.hosts["keystone"]
    answer = front.client.request(host, "GET", "/v3", headers={"X-Forwarded-Proto": "http"})
    headers = json.loads(answer.body)["headers"]
    assert headers["host"] == host  # unchanged: services build their links from it
    assert headers["x-forwarded-proto"] == "https"  # the edge's scheme, the client's value replaced
    assert headers["x-forwarded-for"].split(",")[-1].strip() == "127.0.0.1"
    assert "x-forwarded-host" not in headers and "x-forwarded-port" not in headers


def test_request_bodies_pass_whole(front: Front) -> None:
    body = b"x" * (8 << 20)  # an image upload's size, roughly
    answer = front.client.request(front.hosts["keystone"], "POST", "/upload", body=body)
    assert answer.status == 200 and json.loads(answer.body)["received"] == len(body)


def test_the_console_websocket_is_upgraded_and_tunnelled(front: Front) -> None:
    host = front.hosts["novncproxy"]
    opened = front.client.websocket(host, "/?token=abc", origin=f"https://{host}")
    assert opened["status"] == 101 and opened["accept_ok"]
    assert opened["first_message"] == {"opcode": 2, "text": "RFB 003.008\n"}


def test_a_host_without_a_route_gets_404_and_a_route_without_a_live_service_500(front: Front) -> None:
    keystone = front.hosts["keystone"]
    assert front.client.request(keystone, "GET", "/", headers={"Host": "unrouted.cloud.example.com"}).status == 404
    assert front.client.request(front.hosts["nova"], "GET", "/").status == 500  # its Service has no address here


def test_an_api_answering_after_envoys_default_15_s_reaches_the_client_within_its_routes_timeout(
    front: Front,
) -> None:
    """The plan's routes carry kolla-ansible's 1 min (components/infrastructure/front_door.py): a slow answer is
    no 504, as it was with Envoy's default."""
    keystone = next(r for r in front.programmed.routes if front.hosts["keystone"] in r.hostnames)
    assert keystone.rules[0].request_timeout == "60s"
    started = time.monotonic()
    answer = front.client.request(front.hosts["keystone"], "GET", "/slow")
    assert answer.status == 200, answer
    assert SLOW_SECONDS <= time.monotonic() - started < SLOW_SECONDS + 5


def test_past_the_routes_request_timeout_the_gateway_answers_504(front: Front) -> None:
    started = time.monotonic()
    answer = front.client.request(front.hosts["novncproxy"], "GET", "/slow")
    assert answer.status == 504
    assert 3 <= time.monotonic() - started < 6


def _served(front: Front, host: str) -> str:
    """The SHA-256 fingerprint of the certificate a new handshake gets."""
    context = ssl.create_default_context(cafile=str(front.ca))
    with (
        socket.create_connection(("127.0.0.1", front.port), 10) as raw,
        context.wrap_socket(raw, server_hostname=host) as tls,
    ):
        return hashlib.sha256(tls.getpeercert(binary_form=True) or b"").hexdigest()


def test_a_renewed_certificate_is_served_without_a_restart_and_open_connections_keep_working(front: Front) -> None:
    # Last in the module: it changes the served certificate. Envoy takes a renewal over SDS; the lab's
    # haproxy through its runtime API: same process, the next handshake gets the new pair.
    host = front.hosts["keystone"]
    before = _served(front, host)
    context = ssl.create_default_context(cafile=str(front.ca))
    with (
        socket.create_connection(("127.0.0.1", front.port), 10) as raw,
        context.wrap_socket(raw, server_hostname=host) as kept,
    ):
        renewed = front.certs.renew("openstack", PUBLIC_TLS)
        listener = front.programmed.listeners[0]
        pem = renewed.data["tls.crt"] + renewed.data["tls.key"]
        swap_certificate(front.state / ADMIN_SOCKET, listener_file(front.state, listener), pem)
        kept.sendall(f"GET /v3 HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n".encode())
        assert kept.recv(64).startswith(b"HTTP/1.1 200")  # the connection opened before the swap
    after = _served(front, host)
    assert after != before
    assert after == renewed.chain[0].fingerprint(hashes.SHA256()).hex()
    assert front.haproxy.poll() is None  # no restart
    assert listener_file(front.state, listener).read_text() == pem  # a later start loads the renewal too
    with pytest.raises(RuntimeError, match="did not stage"):
        swap_certificate(front.state / ADMIN_SOCKET, front.state / "not-loaded.pem", pem)
