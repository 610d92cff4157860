"""Glance's uWSGI server takes the chunked uploads Nova and glanceclient send.

Nova uploads a snapshot as a chunked body; Glance reads it part by part through
`uwsgi.chunked_read` (glance.common.wsgi.Request.body_file). Under uWSGI's defaults a part
larger than 1 MiB, or a pause longer than 4 s between parts, ends the upload with
"unable to receive chunked part" and a 500: Tempest's server snapshot and shelve tests
failed so in the lab. Here the plan's own glance-api-uwsgi.ini serves Glance's request
class (from the pinned release) and a client pauses and sends a large part.
"""

from __future__ import annotations

import http.client
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from components.mechanism.inifile import parse_ini, render_ini
from tests.conftest import plan_of
from tests.lab.realenv.openstack_venv import OpenStackVenv
from tests.lab.realenv.servers import free_port

APP = """\
from glance.common import wsgi


def application(environ, start_response):
    body = wsgi.Request(environ).body_file
    received = 0
    while True:
        part = body.read(65536)
        if not part:
            break
        received += len(part)
    start_response("200 OK", [("Content-Type", "text/plain")])
    return [str(received).encode()]
"""
LARGE_PART = 3 * 1024 * 1024
PAUSE_SECONDS = 6


def glance_uwsgi_ini() -> dict[str, dict[str, str]]:
    for resource in plan_of("prod").custom:
        files = resource.revealed.get("stringData", {}) if resource.kind == "Secret" else {}
        if "glance-api-uwsgi.ini" in files:
            parsed = parse_ini(files["glance-api-uwsgi.ini"])
            return {name: dict(parsed[name]) for name in parsed.sections()}
    raise AssertionError("prod's plan has no glance-api-uwsgi.ini")


@pytest.fixture
def glance_server(openstack_venv: OpenStackVenv, tmp_path: Path) -> Iterator[int]:
    ini = glance_uwsgi_ini()
    port = free_port()
    # The plan's server, listening here on a free port and serving the test's application.
    ini["uwsgi"] |= {"http-socket": f"127.0.0.1:{port}", "module": "app:application", "chdir": str(tmp_path)}
    (tmp_path / "app.py").write_text(APP)
    (tmp_path / "uwsgi.ini").write_text(render_ini(ini))
    log = (tmp_path / "uwsgi.log").open("w")
    server = subprocess.Popen(
        [openstack_venv.bin("uwsgi"), "--ini", str(tmp_path / "uwsgi.ini")],
        stdout=log,
        stderr=subprocess.STDOUT,
        env=openstack_venv.env(),
    )
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                http.client.HTTPConnection("127.0.0.1", port, timeout=1).connect()
                break
            except OSError:
                time.sleep(0.2)
        else:
            pytest.fail("uWSGI did not listen within 30 s: " + (tmp_path / "uwsgi.log").read_text()[-2000:])
        yield port
    finally:
        server.terminate()
        server.wait(15)
        log.close()


def upload(port: int, parts: Iterator[bytes]) -> tuple[int, str]:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    connection.request("PUT", "/v2/images/x/file", body=parts, encode_chunked=True)
    response = connection.getresponse()
    return response.status, response.read().decode()


def test_a_slow_chunked_upload_with_a_large_part_arrives_whole(glance_server: int) -> None:
    def parts() -> Iterator[bytes]:
        yield b"a" * 65536
        time.sleep(PAUSE_SECONDS)
        yield b"b" * LARGE_PART
        yield b"c" * 65536

    assert upload(glance_server, parts()) == (200, str(2 * 65536 + LARGE_PART))
