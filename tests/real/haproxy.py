"""The lab's gateway proxy (Debian's haproxy) started for a test, from a config tests/lab/cloud/gateway.py wrote."""

from __future__ import annotations

import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

START_SECONDS = 20


@contextmanager
def running_haproxy(config: Path, port: int) -> Iterator[subprocess.Popen[bytes]]:
    """haproxy in the foreground with `config`, once it accepts on 127.0.0.1:`port`; stopped after."""
    haproxy = subprocess.Popen(["haproxy", "-db", "-f", str(config)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + START_SECONDS
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), 1).close()
                break
            except OSError:
                if haproxy.poll() is not None or time.monotonic() > deadline:
                    said = haproxy.stderr.read().decode() if haproxy.stderr else ""
                    pytest.fail(f"haproxy did not start: {said}")
                time.sleep(0.2)
        yield haproxy
    finally:
        haproxy.terminate()
        haproxy.wait(timeout=10)
