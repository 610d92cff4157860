"""What a client inside the cluster sees at a TLS endpoint: three attempts, their raw facts, no verdict.

    python -m tests.lab.cloud.tls_probe CA_FILE ENDPOINTS_JSON > facts.json

Run from the user's pod (tests/lab/cloud/userpod.py: the cluster's network and names) by
tests/lab/cloud/endpoint_tls.py, which judges the facts. Standard library only. For each endpoint
`{"name", "host", "port", "protocol"}` (protocol `https`, `amqps`, `mysql` or `memcached`; `address`, where
given, is connected to instead of what `host` resolves to, as a test's servers on the loopback):
- `verified`: a TLS handshake trusting CA_FILE only and checking `host` (the Service's cluster
  name): the protocol version, cipher, the certificate's subject, DNS names, notAfter and SHA-256
  fingerprint (which certificate is served: a renewal changes it);
- `system_trust`: the same handshake trusting only the machine's CA store (a client that verifies
  with no internal CA), and the error it ends with;
- `plain`: the protocol spoken without TLS to the same port, and what comes back: for https a plain
  HTTP request (an `HTTP/` status line is an answer); for amqps AMQP 0-9-1's protocol header (a
  method frame or the server's own header is an answer); for mysql a plain-text login with the
  credentials of MYSQL_USER and MYSQL_PASSWORD (environment), whose answer is OK or an error code;
  for memcached its text command `version` (a `VERSION` line is an answer).
MySQL's protocol has no TLS on connect: the server greets in plain text and the client asks for
TLS (an SSLRequest packet) before it logs in; the handshake follows on the same connection. A
login as a user the server does not know says nothing: MariaDB checks the credentials before
`require_secure_transport` (it answers 1045, access denied, either way), hence a real login.
"""

from __future__ import annotations

import hashlib
import json
import os
import socket
import ssl
import struct
import sys
from collections.abc import Callable
from typing import Any

from tests.lab.cloud.socket_read import read_exact

TIMEOUT = 10.0
HTTP_REQUEST = "GET / HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n"
MEMCACHED_VERSION = b"version\r\n"
AMQP_HEADER = b"AMQP\x00\x00\x09\x01"
# MySQL client capabilities (include/mysql_com.h): the 4.1 protocol and its authentication, TLS.
CLIENT_LONG_PASSWORD, CLIENT_PROTOCOL_41, CLIENT_SSL = 0x1, 0x200, 0x800
CLIENT_SECURE_CONNECTION, CLIENT_PLUGIN_AUTH = 0x8000, 0x80000
MYSQL_CLIENT = CLIENT_LONG_PASSWORD | CLIENT_PROTOCOL_41 | CLIENT_SECURE_CONNECTION | CLIENT_PLUGIN_AUTH
MAX_PACKET, UTF8MB4 = 1 << 24, 45
NATIVE_PASSWORD = b"mysql_native_password"
Address = tuple[str, int, str]  # the name (SNI, verified), the port, where to connect


class MysqlError(RuntimeError):
    pass


def mysql_packet(sock: socket.socket) -> tuple[int, bytes]:
    """One packet: (sequence id, payload)."""
    header = read_exact(sock, 4)
    return header[3], read_exact(sock, int.from_bytes(header[:3], "little"))


def mysql_send(sock: socket.socket, sequence: int, payload: bytes) -> None:
    sock.sendall(len(payload).to_bytes(3, "little") + bytes([sequence]) + payload)


def mysql_error(payload: bytes) -> tuple[int, str]:
    """An ERR packet's code and message (0xff, code, '#' and the SQL state, the message)."""
    code = struct.unpack_from("<H", payload, 1)[0]
    text = payload[3:].decode(errors="replace")
    return code, text[6:] if text.startswith("#") else text


def mysql_greeting(sock: socket.socket) -> tuple[int, bytes]:
    """The server's handshake (v10): its capability flags and its scramble (the nonce a password answers)."""
    _, payload = mysql_packet(sock)
    if payload[:1] == b"\xff":
        code, message = mysql_error(payload)
        raise MysqlError(f"server error {code}: {message}")
    if payload[:1] != b"\x0a":
        raise MysqlError(f"not a MySQL handshake v10 (first byte {payload[:1]!r})")
    at = payload.index(b"\x00", 1) + 1 + 4  # the version string, the connection id
    scramble = payload[at : at + 8]
    at += 8 + 1  # the scramble's first part, a filler
    lower = struct.unpack_from("<H", payload, at)[0]
    upper = struct.unpack_from("<H", payload, at + 5)[0] if len(payload) > at + 6 else 0
    # Then the charset, status flags, upper flags, the scramble's length, 10 reserved bytes, its second part.
    length = payload[at + 7] if len(payload) > at + 7 else 0
    scramble += payload[at + 18 : at + 18 + max(13, length - 8)].split(b"\x00", 1)[0]
    return lower | upper << 16, scramble


def native_password(password: str, scramble: bytes) -> bytes:
    """mysql_native_password's answer: SHA1(password) XOR SHA1(scramble + SHA1(SHA1(password)))."""
    if not password:
        return b""
    once = hashlib.sha1(password.encode()).digest()
    mixed = hashlib.sha1(scramble + hashlib.sha1(once).digest()).digest()
    return bytes(a ^ b for a, b in zip(once, mixed, strict=True))


def _client_header(capabilities: int) -> bytes:
    return struct.pack("<IIB", capabilities, MAX_PACKET, UTF8MB4) + bytes(23)


def _credentials() -> tuple[str, str]:
    return os.environ.get("MYSQL_USER", ""), os.environ.get("MYSQL_PASSWORD", "")


def mysql_login(sock: socket.socket, scramble: bytes, capabilities: int, sequence: int) -> dict[str, Any]:
    """HandshakeResponse41 with MYSQL_USER's password: the server's answer (OK, an error code, an auth switch)."""
    user, password = _credentials()
    answer = native_password(password, scramble)
    payload = _client_header(capabilities) + user.encode() + b"\x00" + bytes([len(answer)]) + answer
    mysql_send(sock, sequence, payload + NATIVE_PASSWORD + b"\x00")
    _, reply = mysql_packet(sock)
    if reply[:1] == b"\xff":
        code, message = mysql_error(reply)
        return {"answer": "error", "code": code, "message": message}
    return {"answer": {0x00: "ok", 0xFE: "auth switch"}.get(reply[0], f"packet 0x{reply[0]:02x}")}


def mysql_plain_login(sock: socket.socket) -> dict[str, Any]:
    """A login without TLS (no SSLRequest)."""
    _, scramble = mysql_greeting(sock)
    return mysql_login(sock, scramble, MYSQL_CLIENT, 1)


def handshake(address: Address, protocol: str, context: ssl.SSLContext) -> dict[str, Any]:
    """A TLS handshake with `context`, the Service's name as SNI and the name checked; for mysql
    after the greeting and an SSLRequest, then a login over TLS (the credentials that plain text
    must not get through with)."""
    host, port, connect_to = address
    with socket.create_connection((connect_to, port), TIMEOUT) as raw:
        scramble = b""
        if protocol == "mysql":
            capabilities, scramble = mysql_greeting(raw)
            if not capabilities & CLIENT_SSL:
                raise MysqlError("the server does not offer TLS (no CLIENT_SSL in its greeting)")
            mysql_send(raw, 1, _client_header(MYSQL_CLIENT | CLIENT_SSL))
        with context.wrap_socket(raw, server_hostname=host) as tls:
            certificate: dict[str, Any] = dict(tls.getpeercert() or {})
            der = tls.getpeercert(binary_form=True) or b""
            subject = ", ".join(f"{k}={v}" for rdn in certificate.get("subject", ()) for k, v in rdn)
            found: dict[str, Any] = {
                "version": tls.version(),
                "cipher": (tls.cipher() or ("",))[0],
                "subject": subject,
                "dns_names": [v for k, v in certificate.get("subjectAltName", ()) if k == "DNS"],
                "not_after": certificate.get("notAfter"),
                "fingerprint": hashlib.sha256(der).hexdigest(),
            }
            if protocol == "mysql":
                found["login"] = mysql_login(tls, scramble, MYSQL_CLIENT | CLIENT_SSL, 2)
            return found


def verified(address: Address, protocol: str, ca_file: str) -> dict[str, Any]:
    try:
        return {"ok": True, **handshake(address, protocol, ssl.create_default_context(cafile=ca_file))}
    except (OSError, MysqlError, ValueError, IndexError, struct.error) as error:
        return {"ok": False, "error": f"{type(error).__name__}: {error}"}


def system_trust(address: Address, protocol: str) -> dict[str, Any]:
    """Refused only if the certificate is what fails: another error proves nothing."""
    try:
        handshake(address, protocol, ssl.create_default_context())
    except ssl.SSLCertVerificationError as error:
        return {"refused": True, "error": error.verify_message or str(error)}
    except (OSError, MysqlError, ValueError, IndexError, struct.error) as error:
        return {"refused": False, "error": f"{type(error).__name__}: {error}"}
    return {"refused": False, "error": ""}


def _first_bytes(sock: socket.socket, request: bytes) -> bytes:
    sock.sendall(request)
    try:
        return sock.recv(64)
    except (TimeoutError, ConnectionResetError):
        return b""


def plain(address: Address, protocol: str) -> dict[str, Any]:
    """The protocol without TLS on the TLS port: what the server says back (`answered`)."""
    host, port, connect_to = address
    try:
        with socket.create_connection((connect_to, port), TIMEOUT) as sock:
            if protocol == "mysql":
                return mysql_plain_login(sock)
            if protocol == "https":
                first = _first_bytes(sock, HTTP_REQUEST.format(host=host).encode())
                return {"answered": first.startswith(b"HTTP/"), "first_bytes": first[:32].hex()}
            if protocol == "memcached":
                first = _first_bytes(sock, MEMCACHED_VERSION)
                return {"answered": first.startswith(b"VERSION"), "first_bytes": first[:32].hex()}
            first = _first_bytes(sock, AMQP_HEADER)
            return {"answered": first[:1] == b"\x01" or first.startswith(b"AMQP"), "first_bytes": first[:32].hex()}
    except (OSError, MysqlError, ValueError, IndexError, struct.error) as error:
        return {"answered": False, "error": f"{type(error).__name__}: {error}"}


def probe(endpoint: dict[str, Any], ca_file: str) -> dict[str, Any]:
    address = (endpoint["host"], int(endpoint["port"]), endpoint.get("address") or endpoint["host"])
    protocol = endpoint["protocol"]
    attempts: dict[str, Callable[[], dict[str, Any]]] = {
        "verified": lambda: verified(address, protocol, ca_file),
        "system_trust": lambda: system_trust(address, protocol),
        "plain": lambda: plain(address, protocol),
    }
    return {**endpoint, **{name: attempt() for name, attempt in attempts.items()}}


def main() -> None:
    ca_file, endpoints = sys.argv[1], json.loads(sys.argv[2])
    print(json.dumps({e["name"]: probe(e, ca_file) for e in endpoints}))


if __name__ == "__main__":
    main()
