"""Tempest against the running cloud: configure it, run the API tests of every deployed service, class
the results into build/cloud/<stack>/tempest.json.

The lab hands over what it knows and a way to run a command as a user inside the cluster
(`InCluster`: today tests/lab/cloud/userpod.py's `UserPod.run`, a pod's network and the cluster's DNS);
nothing else of the lab is used. Steps, each logged:
1. ask the cloud what tempest.conf needs (tests/lab/cloud/tempest_discover.py, OpenStack venv);
2. write tempest.conf (tests/lab/cloud/tempest_conf.py) into a workspace under the lab's state
   directory, beside the other secrets of the run (it holds the admin password); a copy with the
   password masked goes to build/cloud/<stack>/tempest.conf;
3. list the selection, leave out what this machine cannot run (tests/lab/cloud/tempest_limits.py);
4. `tempest run --concurrency N` inside the cluster (N workers, 1 unless asked), its output in tempest-run.log;
5. stestr's subunit record of the run into JSON lines, and those into tempest.json.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from tests.lab.cloud.tempest_conf import narrowed, selection, tempest_conf, volume_backend_runs
from tests.lab.cloud.tempest_limits import excluded, summarize, volume_backend_tests
from tests.lab.realenv.tempest_venv import TEMPEST_VERSION, TempestVenv, ensure_tempest_venv
from tools.plan import Plan
from tools.runtime import REPO

SELECTIONS = ("smoke", "full")
MAX_WORKERS = 4  # the lab's pods and guests share the machine's cores with the workers
TIMEOUTS = {"smoke": 2400, "full": 4 * 3600}  # seconds for `tempest run`; the full set takes about an hour
DISCOVER_TIMEOUT = 300


class InCluster(Protocol):
    """Runs argv as a user inside the cluster would (the cluster's network and names); keyword
    arguments as subprocess.run takes them, in text mode."""

    def __call__(self, argv: list[str], **kwargs: Any) -> subprocess.CompletedProcess[str]: ...


class TempestError(RuntimeError):
    pass


@dataclass(frozen=True)
class TempestRequest:
    """What to run: the selection, narrowed to the ids matching `only` if given, with `workers`
    test workers (stestr's concurrency; Tempest's tests each make their own projects, so they run
    side by side as they do in OpenStack's gate)."""

    selection: str
    only: str | None = None
    workers: int = 1

    def __post_init__(self) -> None:
        if self.selection not in SELECTIONS:
            raise ValueError(f"tempest selection {self.selection!r}: one of {', '.join(SELECTIONS)}")
        if not 1 <= self.workers <= MAX_WORKERS:
            raise ValueError(f"tempest workers {self.workers}: from 1 to {MAX_WORKERS}")


def _discover(in_cluster: InCluster, python: Path, admin: Mapping[str, str], work: Path) -> dict[str, Any]:
    env = {"PATH": f"{python.parent}:/usr/sbin:/usr/bin:/sbin:/bin", "PYTHONPATH": str(REPO), "HOME": str(work)}
    log = work / "discover.log"
    with log.open("w") as errors:
        command = [str(python), "-m", "tests.lab.cloud.tempest_discover"]
        env |= dict(admin)
        done = in_cluster(command, env=env, stdout=subprocess.PIPE, stderr=errors, timeout=DISCOVER_TIMEOUT, cwd=REPO)
    if done.returncode != 0:
        raise TempestError(f"asking the cloud for tempest.conf failed: {log.read_text()[-2000:]}")
    facts: dict[str, Any] = json.loads(done.stdout)
    return facts


def _tempest_env(venv: TempestVenv, work: Path) -> dict[str, str]:
    return {"PATH": f"{venv.path / 'bin'}:/usr/sbin:/usr/bin:/sbin:/bin", "HOME": str(work), "LANG": "C.UTF-8"}


def _list(venv: TempestVenv, work: Path, regex: str) -> list[str]:
    """The test ids of the selection (Tempest imports its tests; nothing reaches the cloud)."""
    command = [str(venv.tempest), "run", "--config-file", "etc/tempest.conf", "--list-tests", "--regex", regex]
    done = subprocess.run(command, cwd=work, env=_tempest_env(venv, work), capture_output=True, text=True)
    if done.returncode != 0:
        raise TempestError(f"tempest run --list-tests failed: {done.stderr[-2000:]}")
    return [line.strip() for line in done.stdout.splitlines() if line.startswith("tempest.")]


def _records(venv: TempestVenv, work: Path) -> list[dict[str, Any]]:
    stestr = [str(venv.path / "bin" / "stestr"), "last", "--subunit"]
    stream = subprocess.run(stestr, cwd=work, env=_tempest_env(venv, work), capture_output=True, check=False)
    reader = [str(venv.path / "bin" / "python"), "-m", "tests.lab.cloud.tempest_subunit"]
    env = _tempest_env(venv, work) | {"PYTHONPATH": str(REPO)}
    done = subprocess.run(reader, input=stream.stdout, cwd=REPO, env=env, capture_output=True, check=True)
    return [json.loads(line) for line in done.stdout.decode().splitlines() if line.strip()]


def _masked(text: str, secret: str) -> str:
    return text.replace(secret, "*****") if secret else text


def run_tempest(
    plan: Plan,
    request: TempestRequest,
    state: Path,
    out: Path,
    admin: Mapping[str, str],
    openstack_python: Path,
    cannot_run: Mapping[str, str],
    in_cluster: InCluster,
    log: Callable[[str], None],
) -> dict[str, Any]:
    """Run the request and write out/tempest.json; returns what it wrote."""
    which, only = request.selection, request.only
    started = time.monotonic()
    venv = ensure_tempest_venv()
    work = state / "tempest"
    shutil.rmtree(work, ignore_errors=True)
    (work / "etc").mkdir(parents=True)
    (work / "logs").mkdir()
    os.chmod(work, 0o700)
    facts = _discover(in_cluster, openstack_python, admin, work)
    conf = tempest_conf(plan, admin, facts, cannot_run, work)
    (work / "etc" / "tempest.conf").write_text(conf.text)
    (out / "tempest.conf").write_text(_masked(conf.text, admin.get("OS_PASSWORD", "")))
    subprocess.run([str(venv.path / "bin" / "stestr"), "init"], cwd=work, env=_tempest_env(venv, work), check=True)
    regex = narrowed(selection(plan, smoke=which == "smoke"), only)
    tests = _list(venv, work, regex)
    why = volume_backend_runs(cannot_run, plan.settings)
    left_out = excluded(tests, volume_backend_tests(), f"cinder-volume does not run here: {why}") if why else {}
    (work / "exclude.txt").write_text("".join(f"^{re.escape(t)}$\n" for t in left_out))
    log(
        f"tempest {TEMPEST_VERSION} {which}: {len(tests)} tests, {len(left_out)} left out, "
        f"{request.workers} worker(s) ({out / 'tempest-run.log'})"
    )
    # In a PID namespace of its own: when the run is stopped (Ctrl-C, a timeout), stestr's workers go with it.
    command = [
        "unshare", "--pid", "--fork", "--kill-child", "--",
        str(venv.tempest), "run", "--config-file", "etc/tempest.conf", "--concurrency", str(request.workers),
        "--regex", regex, "--exclude-list", "exclude.txt",
    ]  # fmt: skip
    with (out / "tempest-run.log").open("w") as output:
        env, timeout = _tempest_env(venv, work), TIMEOUTS[which]
        try:
            ran = in_cluster(command, env=env, stdout=output, stderr=subprocess.STDOUT, timeout=timeout, cwd=work)
            exit_status: int | str = ran.returncode
        except subprocess.TimeoutExpired:  # what finished is still counted; the rest did not run
            exit_status = f"stopped after {timeout}s"
    result = summarize(_records(venv, work), left_out)
    result = {
        "tempest": TEMPEST_VERSION,
        "selection": which,
        "filter": only,
        "workers": request.workers,
        "regex": regex,
        "listed": len(tests),
        **result,
        "exit_status": exit_status,
        "prepared": facts.get("prepared", []),
        "features_off": conf.features_off,
        "seconds": round(time.monotonic() - started, 1),
        "logs": {"run": str(out / "tempest-run.log"), "tempest": str(work / "logs" / "tempest.log")},
    }
    (out / "tempest.json").write_text(json.dumps(result, indent=2) + "\n")
    return result
