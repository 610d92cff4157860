"""Readiness of memcached on internal TLS, which also puts a renewed certificate into service.

memcached loads its certificate and key when it starts, and again only when a client sends it
`refresh_certs` (memcached 1.6: doc/tls.txt, tls.c `refresh_certs`); new connections then get the
new pair, open ones keep theirs. The kubelet swaps a renewed Secret's files in place, so without
that command memcached would serve the old certificate until it expires. Run in memcached's
container as its readiness probe: `memcached_tls_probe.py <port> <certificate file>` connects over
TLS to the pod's loopback; where memcached serves another certificate than the mounted one, it
sends `refresh_certs` and connects again. Ready (exit 0): memcached answers `version` over TLS
with the certificate mounted now. Not ready (exit 1): why, on stderr.

It checks the certificate against the mounted file, not against the CA: it talks to its own pod,
sends no data of anyone's, and must work when the certificate memcached serves has expired (the
case it exists for), which a verifying client would refuse before it could send the command.
Standard library only: it runs with the image's own python3.
"""

from __future__ import annotations

import socket
import ssl
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

HOST = "127.0.0.1"
TIMEOUT = 2  # seconds per connection (it may open two); the kubelet gives the probe 5
PEM_END = "-----END CERTIFICATE-----"


class NotReadyError(Exception):
    pass


def mounted(path: Path) -> bytes:
    """The first certificate of the mounted PEM file (the leaf; a chain may follow), as DER."""
    text = path.read_text()
    start = text.find("-----BEGIN CERTIFICATE-----")
    end = text.find(PEM_END, start)
    if start < 0 or end < 0:
        raise NotReadyError(f"{path} holds no PEM certificate")
    return ssl.PEM_cert_to_DER_cert(text[start : end + len(PEM_END)])


def _context() -> ssl.SSLContext:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname = False  # the loopback is no name of the certificate's; see the docstring
    context.verify_mode = ssl.CERT_NONE
    return context


@contextmanager
def _session(port: int) -> Iterator[ssl.SSLSocket]:
    try:
        with socket.create_connection((HOST, port), timeout=TIMEOUT) as raw, _context().wrap_socket(raw) as tls:
            yield tls
    except OSError as error:  # ssl.SSLError is one
        raise NotReadyError(f"no TLS session with memcached on {HOST}:{port}: {error}") from error


def _ask(tls: ssl.SSLSocket, command: bytes) -> bytes:
    """memcached's one-line answer to a text command."""
    tls.sendall(command + b"\r\n")
    answer = b""
    while not answer.endswith(b"\r\n"):
        chunk = tls.recv(256)
        if not chunk:
            raise NotReadyError(f"memcached closed the connection after {command.decode()!r}")
        answer += chunk
    return answer.strip()


def _answers(tls: ssl.SSLSocket) -> None:
    version = _ask(tls, b"version")
    if not version.startswith(b"VERSION "):
        raise NotReadyError(f"memcached answered version with {version[:64]!r}")


def probe(port: int, certificate: Path) -> str:
    """What memcached did; raises NotReadyError with why it is not ready."""
    wanted = mounted(certificate)
    with _session(port) as tls:
        if tls.getpeercert(binary_form=True) == wanted:
            _answers(tls)
            return "ready"
        answer = _ask(tls, b"refresh_certs")
        if answer != b"OK":
            raise NotReadyError(f"refresh_certs: {answer[:200].decode(errors='replace')}")
    with _session(port) as tls:  # refresh_certs applies to new connections
        if tls.getpeercert(binary_form=True) != wanted:
            raise NotReadyError("memcached still serves another certificate after refresh_certs")
        _answers(tls)
        return "ready: loaded the mounted certificate (refresh_certs)"


def main(argv: list[str]) -> int:
    port, certificate = int(argv[1]), Path(argv[2])
    try:
        print(probe(port, certificate))
    except NotReadyError as error:
        print(f"not ready: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
