"""Tempest's venv, and a real subunit stream read into tempest.json's counts (tests/lab/cloud/tempest_subunit.py).

The stream comes from python-subunit's own runner over a small unittest module, as stestr
records Tempest's tests; the cloud test reads Tempest's runs the same way.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from tests.lab.cloud.tempest_limits import LabLimit, summarize
from tests.lab.realenv.tempest_venv import TEMPEST_VERSION, ensure_tempest_venv
from tools.runtime import REPO

CASES = """
import unittest

class Cases(unittest.TestCase):
    def test_passes(self):
        self.assertTrue(True)

    def test_fails(self):
        raise AssertionError("the metadefs list is empty")

    def test_skips(self):
        self.skipTest("Resize is not available.")

    def test_far_away(self):
        raise TimeoutError("no route to download.cirros-cloud.net")
"""


def test_tempest_venv_holds_the_pinned_tempest() -> None:
    venv = ensure_tempest_venv()
    done = subprocess.run([venv.tempest, "--version"], capture_output=True, text=True, check=True)
    assert done.stdout.split() == ["tempest", TEMPEST_VERSION]
    assert (venv.path / "bin" / "stestr").exists()


def test_a_subunit_stream_becomes_records_and_counts(tmp_path: Path) -> None:
    venv = ensure_tempest_venv()
    (tmp_path / "cases.py").write_text(CASES)
    python = str(venv.path / "bin" / "python")
    stream = subprocess.run([python, "-m", "subunit.run", "cases"], cwd=tmp_path, capture_output=True, check=False)
    done = subprocess.run(
        [python, "-m", "tests.lab.cloud.tempest_subunit"],
        input=stream.stdout,
        cwd=REPO,
        env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        check=True,
    )
    records = [json.loads(line) for line in done.stdout.decode().splitlines()]
    statuses = {r["id"].rsplit(".", 1)[1]: r["status"] for r in records}
    assert statuses == {"test_passes": "success", "test_fails": "fail", "test_skips": "skip", "test_far_away": "fail"}
    far_away = (LabLimit(r"\.test_far_away$", r"^TimeoutError: no route", "no Internet here"),)
    found = summarize(records, {}, far_away)
    assert (found["passed"], found["failed"], found["skipped"]) == (1, 2, 1)
    assert found["skips"] == {"Resize is not available.": 1}
    by_test = {f["test"].rsplit(".", 1)[1]: f for f in found["failures"]}
    assert by_test["test_fails"]["reason"] == "AssertionError: the metadefs list is empty"
    assert by_test["test_fails"]["class"] == "cloud"
    assert by_test["test_far_away"]["class"] == "lab"
    assert by_test["test_far_away"]["error"] == "TimeoutError: no route to download.cirros-cloud.net"
