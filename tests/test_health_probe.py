"""The readiness probe of RPC daemons counts only its own container's connections.

Run for real: a process connects to a local TCP server, and the probe is asked with and
without that process in view. In a hostNetwork pod every connection of the node is in
/proc/net/tcp; what the probe can see of the processes decides.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from components.scripts import health_probe
from tools.runtime import REPO

PROBE = REPO / "components" / "scripts" / "health_probe.py"
CLIENT = (
    "import socket, sys, time\n"
    "c = socket.create_connection(('127.0.0.1', int(sys.argv[1])))\n"
    "print('up', flush=True)\n"
    "time.sleep(120)\n"
)


@pytest.fixture
def connection() -> Iterator[tuple[int, subprocess.Popen[str]]]:
    """(server port, a client process connected to it)."""
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        port = server.getsockname()[1]
        client = subprocess.Popen([sys.executable, "-c", CLIENT, str(port)], stdout=subprocess.PIPE, text=True)
        try:
            assert client.stdout is not None and client.stdout.readline().strip() == "up"
            accepted, _ = server.accept()
            with accepted:
                yield port, client
        finally:
            client.kill()
            client.wait()


def _remote_ports_of_every_row() -> set[int]:
    """What the namespace's table holds, whoever holds the socket."""
    rows = Path("/proc/net/tcp").read_text().splitlines()[1:]
    return {int(f[2].rsplit(":", 1)[1], 16) for f in map(str.split, rows) if f[3] == health_probe.ESTABLISHED}


def test_only_the_connected_process_makes_the_port_count(connection: tuple[int, subprocess.Popen[str]]) -> None:
    port, client = connection
    assert port in _remote_ports_of_every_row()
    assert port in health_probe.connected_ports([client.pid])
    # This process holds the server's end (remote port: the client's), not a connection to the port.
    assert port not in health_probe.connected_ports([os.getpid()])
    assert port not in health_probe.connected_ports([])


def test_the_probe_passes_with_the_process_in_view_and_fails_without(
    connection: tuple[int, subprocess.Popen[str]],
) -> None:
    port, _ = connection
    in_view = subprocess.run([sys.executable, str(PROBE), str(port)], capture_output=True, text=True)
    assert in_view.returncode == 0, in_view.stderr
    unshare = shutil.which("unshare")
    isolated = [unshare, "--pid", "--fork", "--mount-proc"] if unshare else []
    if not unshare or subprocess.run([*isolated, "true"], capture_output=True).returncode != 0:
        pytest.skip("needs unshare with PID namespaces (root)")
    # A PID namespace of its own in the same network namespace: a hostNetwork pod's view.
    elsewhere = subprocess.run([*isolated, sys.executable, str(PROBE), str(port)], capture_output=True, text=True)
    assert elsewhere.returncode == 1
    assert f"no established connection to port(s) {port}" in elsewhere.stderr
