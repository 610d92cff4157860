"""The lab's packet capture (tests/lab/cloud/capture.py) on real traffic: Debian's tcpdump on this machine's
own namespace, real RabbitMQ and memcached in clear, and a TLS server of Python's ssl module.

What the lab's `tls.encrypted` relies on: a connection whose client starts TLS is classed `tls`, and so
is one opened before the capture began (first seen with TLS application data); one that speaks AMQP or
memcached's protocol in clear is `plain` with what it sent, each connection counts once, and a port
nobody used is not called encrypted. MariaDB's SSL request is checked with
a real TLS MariaDB in tests/real/test_mariadb_tls.py.
"""

from __future__ import annotations

import socket
import ssl
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.lab.cloud.capture import Capture, connections, summarize
from tests.lab.realenv.servers import RabbitMQ, Server
from tests.real.pki import leaf, make_ca, pem

pytestmark = pytest.mark.real

AMQP_HEADER = b"AMQP\x00\x00\x09\x01"


@pytest.fixture
def tls_echo(tmp_path: Path) -> Iterator[tuple[int, Path]]:
    """A TLS server on the loopback that answers each line with itself; its port and its CA's certificate."""
    ca = make_ca("capture test CA")
    pair = leaf(ca, ["localhost"])
    cert, key = tmp_path / "ca.crt", tmp_path / "tls.key"
    (tmp_path / "tls.crt").write_bytes(pair["tls.crt"])
    key.write_bytes(pair["tls.key"])
    cert.write_bytes(pem(ca[0]))
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(tmp_path / "tls.crt", key)
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(0.5)
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                raw, _ = listener.accept()
            except TimeoutError:
                continue
            with raw, context.wrap_socket(raw, server_side=True) as conn:
                conn.sendall(conn.recv(1024))

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield listener.getsockname()[1], cert
    stop.set()
    thread.join()
    listener.close()


def _say(port: int, data: bytes) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=10) as conn:
        conn.sendall(data)
        return conn.recv(64)


def test_tls_and_clear_text_connections_are_told_apart(
    tmp_path: Path, tls_echo: tuple[int, Path], rabbitmq: RabbitMQ, memcached: Server
) -> None:
    tls_port, cert = tls_echo
    unused = 1  # tcpmux: nothing listens, nobody connects
    # Opened before the capture begins, as the services' pooled connections are: seen from the middle.
    pooled_raw = socket.create_connection(("127.0.0.1", tls_port), timeout=10)
    pooled = ssl.create_default_context(cafile=cert).wrap_socket(pooled_raw, server_hostname="localhost")
    pooled_plain = socket.create_connection(("127.0.0.1", memcached.port), timeout=10)
    with Capture(tmp_path / "pcap", [None], [tls_port, rabbitmq.port, memcached.port, unused]) as capture:
        pooled.sendall(b"pooled secret\n")
        assert pooled.recv(64) == b"pooled secret\n"
        pooled_plain.sendall(b"version\r\n")
        assert pooled_plain.recv(64).startswith(b"VERSION")
        for _ in range(2):
            client = ssl.create_default_context(cafile=cert)
            raw = socket.create_connection(("127.0.0.1", tls_port), timeout=10)
            with raw, client.wrap_socket(raw, server_hostname="localhost") as conn:
                conn.sendall(b"secret over tls\n")
                assert conn.recv(64) == b"secret over tls\n"
        assert b"capabilities" in _say(rabbitmq.port, AMQP_HEADER)  # the broker's connection.start
        assert _say(memcached.port, b"version\r\n").startswith(b"VERSION")
    found = connections(capture.pcaps, capture.ports)
    names = {"tls-echo": [tls_port], "rabbitmq": [rabbitmq.port], "memcached": [memcached.port], "unused": [unused]}
    summary = summarize(found, names)

    pooled.close()
    pooled_plain.close()
    assert summary["tls-echo"] == {
        "ports": [tls_port], "connections": 3, "opened": 2, "tls": 3, "plain": 0, "plain_starts": [], "encrypted": True,
    }  # fmt: skip
    assert summary["rabbitmq"]["plain"] == 1 and not summary["rabbitmq"]["encrypted"]
    assert summary["rabbitmq"]["plain_starts"] == ["AMQP...."]
    assert summary["memcached"]["plain_starts"] == ["version.."] * 2, summary
    assert not summary["memcached"]["encrypted"]
    assert summary["memcached"]["opened"] == 1  # the pooled one was seen from its middle
    assert summary["unused"] == {
        "ports": [unused], "connections": 0, "opened": 0, "tls": 0, "plain": 0, "plain_starts": [], "encrypted": False,
    }  # fmt: skip
    # Nothing the TLS client sent is readable in the capture.
    assert all(b"secret" not in b"".join(c.sent) for c in found if c.server_port == tls_port)
