"""The tools end quietly when their reader goes (`python -m tools.plan --graph | head`)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("view", [["--graph"], ["--explain", "Deployment/keystone-api"]])
def test_a_reader_that_closes_the_pipe_ends_the_tool_without_a_traceback(view: list[str]) -> None:
    """The pipe is closed before the plan is built (about two seconds), so the tool's first write meets it
    closed, as with `| head -1` on output longer than the pipe's buffer."""
    tool = subprocess.Popen(
        [sys.executable, "-m", "tools.plan", "--stack", "dev", *view],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert tool.stdout is not None and tool.stderr is not None
    tool.stdout.close()
    errors = tool.stderr.read().decode()
    assert tool.wait() == 141, errors  # a shell's status for SIGPIPE: pipefail sees the output was cut
    assert errors == ""
