"""What a browser and a console client do with the cloud's public names: HTTPS with verification, a websocket.

Standard library only: the laptop's checks (tests/lab/cloud/public_scenario.py) use it from the
OpenStack virtualenv, the tests of the gateway's proxy (tests/real/test_gateway_proxy.py) from the
program's. Every connection verifies the server's certificate against the given CA file and its
name; `address` connects somewhere else than the name resolves (a test's proxy on the loopback)
while the TLS name and the Host header stay the public name.
"""

from __future__ import annotations

import base64
import hashlib
import http.client
import os
import re
import socket
import ssl
from dataclasses import dataclass, field
from http.cookies import SimpleCookie
from typing import Any
from urllib.parse import urlencode

from tests.lab.cloud import rfb_client
from tests.lab.cloud.socket_read import read_exact

WEBSOCKET_GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"  # RFC 6455's
TIMEOUT = 60.0
DJANGO_COOKIES = {"sessionid", "csrftoken"}  # SESSION_COOKIE_NAME, CSRF_COOKIE_NAME


@dataclass(frozen=True)
class Answer:
    status: int
    headers: http.client.HTTPMessage
    body: bytes

    @property
    def text(self) -> str:
        return self.body.decode(errors="replace")


class _Connection(http.client.HTTPSConnection):
    """HTTPS to `address` (default: the name's), with the TLS name and Host of `host`."""

    def __init__(self, host: str, context: ssl.SSLContext, address: tuple[str, int] | None) -> None:
        super().__init__(host, 443, context=context, timeout=TIMEOUT)
        self._address = address

    def connect(self) -> None:
        raw = socket.create_connection(self._address or (self.host, self.port), self.timeout)
        self.sock = self._context.wrap_socket(raw, server_hostname=self.host)  # type: ignore[attr-defined]


@dataclass
class PublicClient:
    ca_file: str
    address: tuple[str, int] | None = None
    cookies: dict[str, str] = field(default_factory=dict)
    set_cookies: list[str] = field(default_factory=list)  # every Set-Cookie seen, as sent

    @property
    def context(self) -> ssl.SSLContext:
        return ssl.create_default_context(cafile=self.ca_file)  # this CA only, and the name checked

    def connect(self, host: str) -> ssl.SSLSocket:
        raw = socket.create_connection(self.address or (host, 443), TIMEOUT)
        return self.context.wrap_socket(raw, server_hostname=host)

    def request(
        self, host: str, method: str, path: str, body: str | bytes | None = None, headers: dict[str, str] | None = None
    ) -> Answer:
        connection = _Connection(host, self.context, self.address)
        sent = dict(headers or {})
        if self.cookies:
            sent["Cookie"] = "; ".join(f"{k}={v}" for k, v in self.cookies.items())
        try:
            connection.request(method, path, body=body, headers=sent)
            response = connection.getresponse()
            answer = Answer(response.status, response.headers, response.read())
        finally:
            connection.close()
        for header in answer.headers.get_all("Set-Cookie") or []:
            self.set_cookies.append(header)
            self.cookies.update({k: m.value for k, m in SimpleCookie(header).items()})
        return answer

    def websocket(self, host: str, path: str, origin: str | None = None, rfb: bool = False) -> dict[str, Any]:
        """Open a websocket as noVNC does (subprotocol binary, the page's origin) and read the first message;
        `rfb`: then go on as noVNC's VNC client does, to ServerInit (tests/lab/cloud/rfb_client.py)."""
        key = base64.b64encode(os.urandom(16)).decode()
        lines = [
            f"GET {path} HTTP/1.1", f"Host: {host}", "Upgrade: websocket", "Connection: Upgrade",
            f"Sec-WebSocket-Key: {key}", "Sec-WebSocket-Version: 13", "Sec-WebSocket-Protocol: binary",
        ]  # fmt: skip
        if origin:
            lines.append(f"Origin: {origin}")
        with self.connect(host) as tls:
            tls.sendall(("\r\n".join(lines) + "\r\n\r\n").encode())
            head = _read_until(tls, b"\r\n\r\n")
            status_line, *header_lines = head.decode(errors="replace").split("\r\n")
            headers = dict(h.split(": ", 1) for h in header_lines if ": " in h)
            status = int(status_line.split()[1])
            found: dict[str, Any] = {"status": status}
            if status != 101:
                return found
            expected = accept_key(key)
            found["accept_ok"] = {k.lower(): v for k, v in headers.items()}.get("sec-websocket-accept") == expected
            opcode, payload = read_frame(tls)
            found["first_message"] = {"opcode": opcode, "text": payload[:64].decode(errors="replace")}
            if rfb:
                try:
                    found["rfb"] = rfb_client.handshake(rfb_client.Stream(tls, read_frame, payload))
                except (OSError, ValueError, IndexError) as error:
                    found["rfb"] = {"error": repr(error)}
            return found


def accept_key(key: str) -> str:
    """Sec-WebSocket-Accept for a Sec-WebSocket-Key (RFC 6455: SHA-1 as a checksum, not for secrecy)."""
    return base64.b64encode(hashlib.sha1((key + WEBSOCKET_GUID).encode()).digest()).decode()


def _read_until(sock: ssl.SSLSocket, end: bytes) -> bytes:
    data = b""
    while end not in data:
        chunk = sock.recv(1)
        if not chunk:
            raise ConnectionError(f"closed after {data!r}")
        data += chunk
    return data[: data.index(end)]


def read_frame(sock: ssl.SSLSocket | socket.socket) -> tuple[int, bytes]:
    """One RFC 6455 frame (a server's: unmasked, or masked as a client sends): its opcode and payload."""
    first, second = read_exact(sock, 2)
    length = second & 0x7F
    if length == 126:
        length = int.from_bytes(read_exact(sock, 2), "big")
    elif length == 127:
        length = int.from_bytes(read_exact(sock, 8), "big")
    mask = read_exact(sock, 4) if second & 0x80 else b""
    payload = read_exact(sock, length)
    if mask:
        payload = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
    return first & 0x0F, payload


def frame(payload: bytes, opcode: int = 2) -> bytes:
    """An unmasked frame, as a server sends it."""
    size = len(payload)
    header = bytes([0x80 | opcode]) + (bytes([size]) if size < 126 else bytes([126]) + size.to_bytes(2, "big"))
    return header + payload


def system_trust_refuses(host: str, address: tuple[str, int] | None = None) -> bool:
    """Does a client with only the machine's CA store refuse the host's certificate? (Verification is on.)"""
    try:
        with socket.create_connection(address or (host, 443), TIMEOUT) as raw:
            ssl.create_default_context().wrap_socket(raw, server_hostname=host).close()
    except ssl.SSLCertVerificationError:
        return True
    return False


def absolute_links(document: Any) -> list[str]:
    """Every absolute `href` of a JSON document (version documents, `links`) that points into the API:
    `describedby` links point at the documentation, elsewhere by design."""
    if isinstance(document, dict):
        own = isinstance(document.get("href"), str) and document.get("rel") != "describedby"
        found = [document["href"]] if own else []
        return [h for h in found if h.startswith(("http://", "https://"))] + [
            link for value in document.values() for link in absolute_links(value)
        ]
    if isinstance(document, list):
        return [link for item in document for link in absolute_links(item)]
    return []


def horizon_login(client: PublicClient, host: str, username: str, password: str) -> dict[str, Any]:
    """Horizon's login form as a browser posts it, over HTTPS at its public name."""
    page = client.request(host, "GET", "/auth/login/")
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text)
    # One region: a hidden input holding Keystone's URL; several: a select.
    region = re.search(r'name="region"[^>]*value="([^"]+)"', page.text) or re.search(
        r'<select[^>]*name="region"[^>]*>\s*<option value="([^"]+)"', page.text
    )
    facts: dict[str, Any] = {"login_page": page.status}
    if page.status != 200 or token is None:
        return facts
    form = {"csrfmiddlewaretoken": token[1], "username": username, "password": password, "next": "/"}
    if region:
        form["region"] = region[1]
    origin = f"https://{host}"
    posted = client.request(
        host, "POST", "/auth/login/", urlencode(form),
        {"Content-Type": "application/x-www-form-urlencoded", "Origin": origin, "Referer": f"{origin}/auth/login/"},
    )  # fmt: skip
    facts.update(post=posted.status, redirect=posted.headers.get("Location"))
    if posted.status == 200:  # the form again: say what it said
        messages = re.findall(r'class="(?:alert[^"]*|errorlist[^"]*)"[^>]*>(.*?)</', posted.text, re.S)
        facts["messages"] = [re.sub(r"\s+", " ", m).strip() for m in messages][:5]
    project = client.request(host, "GET", "/project/")
    facts.update(project_page=project.status, logged_in=project.status == 200 and "Sign Out" in project.text)
    static = re.search(r'href="(/static/[^"]+\.css)"', project.text)
    if static:
        facts["static_css"] = client.request(host, "GET", static[1]).status
    # Horizon behind TLS sends its session and CSRF cookies (Django's names) for HTTPS only.
    guarded = [c for c in client.set_cookies if c.split("=", 1)[0].strip() in DJANGO_COOKIES]
    facts["secure_cookies"] = {c.split("=", 1)[0].strip() for c in guarded} == DJANGO_COOKIES and all(
        "secure" in [p.strip().lower() for p in c.split(";")] for c in guarded
    )
    return facts
