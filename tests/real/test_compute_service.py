"""compute_service.py, nova-compute's start and preStop helper, through openstacksdk of the targeted release.

The lab's apply of a changed stack (staging) rolled nova-compute while nova-api restarted: the new
pod's single `enable` met a refused connection and the node stayed disabled, so the scheduler placed
nothing there. Here the script runs in the release's venv as the pod runs it, against a test double
of Keystone and Nova (tests/maintenance: no real Nova can be restarted on cue here) that is not
listening when the script starts: `enable` must keep trying and re-enable the node once it answers.
"""

from __future__ import annotations

import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import ThreadingHTTPServer

import pytest

from tests.lab.realenv.openstack_venv import OpenStackVenv
from tests.lab.realenv.servers import free_port
from tests.maintenance.sdk_roundtrip import Discovering, keystone
from tools.runtime import REPO

SCRIPT = REPO / "components" / "scripts" / "compute_service.py"
REASON = "disabled by the nova-compute pod while it stopped"  # the script's own, as Nova stores it
HOST = socket.gethostname()  # the script asks Nova for the services of its host name, as the pod does


@contextmanager
def nova_double() -> Iterator[Discovering]:
    fake = Discovering()
    with fake.serve():
        yield fake


def variables(auth_port: int) -> dict[str, str]:
    # The pod's variables (components/services/compute.py _nova_credentials), its password a literal here.
    return {
        "OS_AUTH_URL": f"http://127.0.0.1:{auth_port}/v3",
        "OS_USERNAME": "nova",
        "OS_PASSWORD": "nova-password",
        "OS_PROJECT_NAME": "service",
        "OS_USER_DOMAIN_NAME": "Default",
        "OS_PROJECT_DOMAIN_NAME": "Default",
        "OS_REGION_NAME": "RegionOne",
        "OS_INTERFACE": "internal",
        "OS_COMPUTE_API_VERSION": "2.53",
    }


def start(venv: OpenStackVenv, auth_port: int, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [str(venv.python), str(SCRIPT), *args],
        env={**venv.env(), **variables(auth_port)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def keystone_on(port: int, fake: Discovering) -> ThreadingHTTPServer:
    """The Keystone double on a given port: the script was told that address before it listened."""
    server = keystone(fake)
    server.shutdown()
    server.server_close()
    # keystone() binds port 0; bind its handler class to the promised port instead.
    moved = ThreadingHTTPServer(("127.0.0.1", port), server.RequestHandlerClass)
    threading.Thread(target=moved.serve_forever, args=(0.05,), daemon=True).start()
    return moved


def test_enable_keeps_trying_while_nova_is_away_and_re_enables_the_node(openstack_venv: OpenStackVenv) -> None:
    with nova_double() as fake:
        host = fake.add_host(HOST, enabled=False, reason=REASON)
        port = free_port()
        script = start(openstack_venv, port, "enable")
        time.sleep(5)  # nothing listens yet: the first tries are refused
        assert script.poll() is None, f"gave up while Nova was away: {script.communicate()}"
        identity = keystone_on(port, fake)
        try:
            out, err = script.communicate(timeout=90)
        finally:
            identity.shutdown()
    assert script.returncode == 0, err
    assert "Nova unavailable, enable again" in err, err
    assert f"re-enabled nova-compute on {HOST}" in out, out
    assert (host.enabled, host.reason) == (True, None)


@pytest.mark.parametrize("reason", ["an operator's own", None])
def test_enable_leaves_a_service_it_did_not_disable(openstack_venv: OpenStackVenv, reason: str | None) -> None:
    with nova_double() as fake:
        host = fake.add_host(HOST, enabled=reason is None, reason=reason)
        port = free_port()
        identity = keystone_on(port, fake)
        try:
            done = start(openstack_venv, port, "enable")
            out, err = done.communicate(timeout=60)
        finally:
            identity.shutdown()
    assert done.returncode == 0, err
    assert out == "", out
    assert (host.enabled, host.reason) == (reason is None, reason)


def test_disable_tries_once_and_says_why_when_nova_is_away(openstack_venv: OpenStackVenv) -> None:
    """The preStop hook must not hold the pod's stop for long: one try, then a message naming the host."""
    began = time.monotonic()
    done = start(openstack_venv, free_port(), "disable")
    _, err = done.communicate(timeout=60)
    assert done.returncode != 0
    assert f"nova-compute on {HOST} not disabled: Nova is unavailable" in err, err
    assert time.monotonic() - began < 30
