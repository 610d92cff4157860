"""An API's uWSGI serves internal TLS and picks up a renewed certificate without failing a request.

The plan's own keystone-uwsgi.ini (with tls.internal) runs under the pinned release's uWSGI,
serving a trivial application from a directory laid out as the kubelet lays out a mounted
Secret (`tls.crt -> ..data/tls.crt`, `..data -> ..<timestamp>`). The test then renews the
certificate as the kubelet does (a new timestamped directory, `..data` swapped atomically)
while a client calls in a loop, verifying with the CA: every call must succeed, and the
server must end up serving the new certificate (`touch-reload`).
"""

from __future__ import annotations

import socket
import ssl
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import serialization

from components.mechanism.inifile import parse_ini, render_ini
from tests.conftest import plan_of
from tests.lab.cloud import endpoint_tls, tls_probe
from tests.lab.realenv.openstack_venv import OpenStackVenv
from tests.lab.realenv.servers import free_port
from tests.real.pki import leaf, make_ca, write_secret

pytestmark = pytest.mark.real

APP = 'def application(environ, start_response):\n    start_response("200 OK", [])\n    return [b"ok"]\n'


def _served_serial(port: int, context: ssl.SSLContext) -> int:
    raw = socket.create_connection(("127.0.0.1", port), timeout=5)
    with context.wrap_socket(raw, server_hostname="localhost") as tls:
        der = tls.getpeercert(binary_form=True)
        assert der is not None
        return x509.load_der_x509_certificate(der).serial_number


def _call(port: int, context: ssl.SSLContext) -> bool:
    try:
        raw = socket.create_connection(("127.0.0.1", port), timeout=5)
        with context.wrap_socket(raw, server_hostname="localhost") as tls:
            tls.sendall(b"GET / HTTP/1.0\r\nHost: localhost\r\n\r\n")
            status = tls.recv(64).split(b"\r\n", 1)[0]
            return status.split(b" ")[1:2] == [b"200"]
    except OSError:
        return False


@pytest.fixture
def server(openstack_venv: OpenStackVenv, tmp_path: Path) -> Iterator[tuple[int, Path, ssl.SSLContext, tuple]]:
    plan = plan_of("prod", tls={"public": {"selfSigned": True}, "internal": {"selfSigned": True}})
    parsed = parse_ini(plan.by_name("keystone-etc", "Secret").revealed["stringData"]["keystone-uwsgi.ini"])
    ini = {name: dict(parsed[name]) for name in parsed.sections()}
    socket_spec = ini["uwsgi"].pop("https-socket")
    _, cert, key = socket_spec.split(",")
    mount = tmp_path / "secret"
    mount.mkdir()
    ca = make_ca("test internal CA")
    write_secret(mount, leaf(ca, ["localhost"], serial=1), "v1")
    port = free_port()
    # The plan's server and its paths, moved under the test's directory.
    moved = {p: str(mount / Path(p).name) for p in (cert, key)}
    ini["uwsgi"] |= {
        "https-socket": f"127.0.0.1:{port},{moved[cert]},{moved[key]}",
        "module": "app:application",
        "chdir": str(tmp_path),
    }
    if "touch-reload" in ini["uwsgi"]:
        ini["uwsgi"]["touch-reload"] = moved[ini["uwsgi"]["touch-reload"]]
    (tmp_path / "app.py").write_text(APP)
    (tmp_path / "uwsgi.ini").write_text(render_ini(ini))
    context = ssl.create_default_context(cadata=ca[0].public_bytes(serialization.Encoding.PEM).decode())
    log = (tmp_path / "uwsgi.log").open("w")
    process = subprocess.Popen(
        [openstack_venv.bin("uwsgi"), "--ini", str(tmp_path / "uwsgi.ini")],
        stdout=log, stderr=subprocess.STDOUT, env=openstack_venv.env(),
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 30
        while not _call(port, context):
            if time.monotonic() > deadline:
                pytest.fail("uWSGI did not serve TLS within 30 s: " + (tmp_path / "uwsgi.log").read_text()[-2000:])
            time.sleep(0.2)
        yield port, mount, context, ca
    finally:
        process.terminate()
        process.wait(15)
        log.close()


def test_a_renewed_certificate_is_served_without_a_failed_call(server: tuple) -> None:
    port, mount, context, ca = server
    assert _served_serial(port, context) == 1
    time.sleep(1.1)  # uWSGI compares modification times in seconds
    write_secret(mount, leaf(ca, ["localhost"], serial=2), "v2")
    failed, deadline = 0, time.monotonic() + 20
    calls = 0
    while time.monotonic() < deadline:
        calls += 1
        failed += not _call(port, context)
        if calls > 20 and _served_serial(port, context) == 2:
            break
        time.sleep(0.05)
    assert _served_serial(port, context) == 2, "uWSGI still serves the old certificate"
    assert failed == 0, f"{failed} of {calls} calls failed during the reload"


def test_the_lab_probe_finds_the_plans_uwsgi_on_tls_only_and_still_serving(server: tuple, tmp_path: Path) -> None:
    """What report.json's tls.encrypted asks of every API (tests/lab/cloud/tls_probe.py, judged by endpoint_tls.py):
    a verified handshake, the machine's CA store refused, no HTTP answer to plain text; and uWSGI goes on
    serving after the plain-text attempt (a worker is not left waiting on it)."""
    port, _, context, ca = server
    ca_file = tmp_path / "internal-ca.crt"
    ca_file.write_bytes(ca[0].public_bytes(serialization.Encoding.PEM))
    endpoint = {"name": "keystone-api:5000", "host": "localhost", "port": port, "protocol": "https",
                "address": "127.0.0.1"}  # fmt: skip
    started = time.monotonic()
    facts = tls_probe.probe(endpoint, str(ca_file))
    judged = endpoint_tls.classify(facts)
    assert judged["ok"], judged
    assert facts["plain"]["answered"] is False and time.monotonic() - started < tls_probe.TIMEOUT
    assert _call(port, context)
