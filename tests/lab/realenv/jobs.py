"""Runs a stack's bootstrap Jobs on this machine, as the cluster would run them.

From the offline plan (secrets revealed) it takes every `batch/v1` Job in deploy order
(the plan's waves; the Jobs of one wave run side by side, as in the cluster) and runs each
container's command with the same script text, the same rendered files at the paths the
pod mounts them, the files its image ships under /etc/<project> (tests/lab/cloud/images.py), and
the same environment; only what `mapping.LocalMapping` rewrites differs. The one Deployment
the Jobs talk to, `keystone-api`, is served from its own mounts with uWSGI when its wave comes,
and stays up until `close()`.
"""

from __future__ import annotations

import base64
import os
import shutil
import subprocess
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from tests.lab.cloud.images import kolla_image, project_files
from tests.lab.realenv.mapping import LocalMapping
from tests.lab.realenv.openstack_venv import OpenStackVenv
from tests.lab.realenv.servers import MariaDB, _process, _wait
from tools.plan import Plan
from tools.runtime import Registration

# The workloads the Jobs talk to that run here: the infrastructure as real servers, and
# keystone-api from the plan's own Deployment. Other workloads do not run here.
STOOD_IN = {"mariadb", "rabbitmq", "memcached"}
SERVED_DEPLOYMENTS = {"keystone-api"}
WORKLOAD_KINDS = {"Deployment", "DaemonSet", "StatefulSet"}
JOB_TIMEOUT = 900  # seconds; the cluster allows 30 minutes (components/mechanism/kube.py)
TAIL_LINES = 60


class JobFailedError(AssertionError):
    pass


@dataclass(frozen=True)
class JobRun:
    name: str
    round: int
    returncode: int
    seconds: float
    tail: str

    @property
    def ok(self) -> bool:
        return self.returncode == 0

    def describe(self) -> str:
        return f"Job {self.name} (round {self.round}) exited {self.returncode} after {self.seconds:.1f}s:\n{self.tail}"


@dataclass
class Pod:
    """A pod's container made runnable here: its files written, its command and env resolved."""

    name: str
    root: Path
    command: list[str]
    env: dict[str, str]
    probe: dict[str, Any] | None = None


def _name(workload: Registration) -> str:
    return workload.k8s_name or workload.name


def _tail(path: Path, lines: int = TAIL_LINES) -> str:
    text = path.read_text(errors="replace") if path.exists() else ""
    return "".join(text.splitlines(keepends=True)[-lines:])


@dataclass
class BootstrapChain:
    plan: Plan
    venv: OpenStackVenv
    mapping: LocalMapping  # its root is the directory under which every pod gets its own
    workers: int | None = None  # Jobs at once; None: a whole wave, as the cluster starts them
    runs: list[JobRun] = field(default_factory=list)
    ready_after: dict[str, float] = field(default_factory=dict)  # served Deployment → seconds to ready
    _served: ExitStack = field(default_factory=ExitStack, repr=False)

    # -- what runs, in which order ---------------------------------------------------------

    def waves(self) -> list[list[Registration]]:
        """The plan's waves, reduced to the Jobs and the Deployments served here.

        A Job that waits for a workload this chain does not run (cinder-volume-type calls
        cinder-api; nova-cell-setup waits for the compute hosts) is left out: it runs with the
        whole cloud in tests/cloud.
        """
        reduced = []
        for wave in self.plan.waves():
            runnable = [
                r
                for r in wave
                if (r.kind == "Job" and not self.needs_the_cloud(r))
                or (r.kind == "Deployment" and r.k8s_name in SERVED_DEPLOYMENTS)
            ]
            if runnable:
                reduced.append(runnable)
        return reduced

    def needs_the_cloud(self, job: Registration) -> list[str]:
        """The workloads a Job waits for directly that this chain does not run."""
        by_urn = {r.urn: r for r in self.plan.custom}
        direct = [by_urn[u] for u in self.plan.dependencies.get(job.urn, ()) if u in by_urn]
        served = STOOD_IN | SERVED_DEPLOYMENTS
        return sorted(_name(w) for w in direct if w.kind in WORKLOAD_KINDS and w.k8s_name not in served)

    def left_to_the_cloud(self) -> dict[str, list[str]]:
        """Jobs not run here, and the workloads they wait for (tests/cloud runs them)."""
        return {_name(r): need for r in self.plan.custom if r.kind == "Job" and (need := self.needs_the_cloud(r))}

    def jobs(self) -> list[str]:
        return [_name(r) for wave in self.waves() for r in wave if r.kind == "Job"]

    def not_run(self) -> dict[str, list[str]]:
        """Per Job run here, the workloads it waits for in the cluster (as ancestors) that do not run here."""
        by_urn = {r.urn: r for r in self.plan.custom}
        missing: dict[str, list[str]] = {}
        for r in self.plan.custom:
            if r.kind != "Job" or self.needs_the_cloud(r):
                continue
            waits = [by_urn[u] for u in self.plan.ancestors(r.urn) if u in by_urn]
            absent = sorted(
                _name(w) for w in waits if w.kind in WORKLOAD_KINDS and w.k8s_name not in STOOD_IN | SERVED_DEPLOYMENTS
            )
            if absent:
                missing[_name(r)] = absent
        return missing

    # -- a pod, made local -------------------------------------------------------------------

    def object_data(self, kind: str, name: str) -> dict[str, str]:
        """A Secret's or ConfigMap's content as the pod sees it (operator-made Secrets from here)."""
        if kind == "Secret" and name in self.mapping.operator_secrets:
            return dict(self.mapping.operator_secrets[name])
        found = self.plan.by_name(name, kind).revealed
        if kind == "Secret" and "data" in found:
            return {k: base64.b64decode(v).decode() for k, v in found["data"].items()}
        return dict(found.get("stringData" if kind == "Secret" else "data") or {})

    def _volume(self, volume: dict[str, Any]) -> tuple[dict[str, str], int]:
        if "emptyDir" in volume:
            return {}, 0o777  # a directory of its own, empty, writable: made by pod()
        if "secret" in volume:
            source = volume["secret"]
            return self.object_data("Secret", source["secretName"]), source.get("defaultMode", 0o644)
        if "configMap" in volume:
            source = volume["configMap"]
            return self.object_data("ConfigMap", source["name"]), source.get("defaultMode", 0o644)
        raise ValueError(f"volume {volume['name']}: only Secret and ConfigMap volumes are reproduced here")

    @staticmethod
    def _template(workload: Registration) -> dict[str, Any]:
        """The pod template; a CronJob's is that of the Job it starts on schedule."""
        spec = workload.revealed["spec"]
        return spec["jobTemplate"]["spec"]["template"] if workload.kind == "CronJob" else spec["template"]

    @classmethod
    def _container(cls, workload: Registration) -> dict[str, Any]:
        (container,) = cls._template(workload)["spec"]["containers"]  # one per Job and API pod
        return container

    def env(self, workload: Registration, root: Path | None = None) -> dict[str, str]:
        """The container's environment here: the image's basics, then its `env` entries."""
        root = root or self.mapping.root / "env" / _name(workload)
        local = self.mapping.for_pod(root)
        env = {
            "PATH": f"{self.venv.path / 'bin'}{os.pathsep}/usr/local/bin:/usr/bin:/bin",
            "VIRTUAL_ENV": str(self.venv.path),
            "HOME": str(root),
            "LANG": "C.UTF-8",
            **local.implicit_env(_name(workload)),
        }
        for entry in self._container(workload).get("env", []):
            if "value" in entry:
                env[entry["name"]] = local.text(str(entry["value"]))
                continue
            ref = entry["valueFrom"].get("secretKeyRef")
            if ref is None:
                raise ValueError(f"env {entry['name']}: only literal values and secretKeyRef are reproduced here")
            # Credentials are used as they are: they hold no address or path.
            env[entry["name"]] = self.object_data("Secret", ref["name"])[ref["key"]]
        return env

    def pod(self, workload: Registration, run: str) -> Pod:
        """Write the pod's mounted files under a fresh root and resolve its command and env."""
        container = self._container(workload)
        root = self.mapping.root / run / _name(workload)
        if root.exists():
            shutil.rmtree(root)  # a new pod starts from its image, not from the last pod's files
        root.mkdir(parents=True)
        local = self.mapping.for_pod(root)
        project = kolla_image(container["image"]).project
        if project:  # e.g. glance-metadefs-load reads the image's /etc/glance/metadefs
            project_files(project, self.venv.path, local.path(f"/etc/{project}"))
        volumes = {v["name"]: v for v in self._template(workload)["spec"].get("volumes", [])}
        written = []
        for mount in container.get("volumeMounts", []):
            data, mode = self._volume(volumes[mount["name"]])
            target = local.path(mount["mountPath"])
            if "emptyDir" in volumes[mount["name"]]:
                target.mkdir(parents=True, exist_ok=True)
                target.chmod(mode)
            # A subPath mounts one key as a file; without one the volume is a directory of keys.
            files = {mount["subPath"]: target} if "subPath" in mount else {key: target / key for key in data}
            for key, path in files.items():
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(local.text(data[key]))
                path.chmod(mode)
                written.append(data[key])
        for directory in local.image_dirs("\n".join(written)):
            directory.mkdir(parents=True, exist_ok=True)
        if project and local.path(f"/etc/{project}").is_dir():
            # A command without --config-file (the `*-status` tools) finds /etc/<project>/<project>.conf by
            # oslo.config's default search, which starts at ~/.<project>/: HOME is the pod's root here.
            (root / f".{project}").symlink_to(local.path(f"/etc/{project}"))
        env = self.env(workload, root)
        # Without `command` the image's entrypoint runs the args: Kolla's dumb-init, which only reaps
        # children and forwards signals, so the args are run as they are here.
        command = [local.text(arg) for arg in [*container.get("command", []), *container.get("args", [])]]
        executable = shutil.which(command[0], path=env["PATH"])
        if executable is None:
            raise FileNotFoundError(f"{_name(workload)}: {command[0]} is neither in {self.venv.path} nor the system")
        return Pod(_name(workload), root, [executable, *command[1:]], env, container.get("readinessProbe"))

    # -- running ------------------------------------------------------------------------------

    def run_job(self, job: Registration, round_no: int) -> JobRun:
        pod = self.pod(job, f"round-{round_no}")
        log = pod.root / "output.log"
        started = time.monotonic()
        with log.open("wb") as out:
            try:
                done = subprocess.run(
                    pod.command, cwd=pod.root, env=pod.env, stdout=out, stderr=subprocess.STDOUT, timeout=JOB_TIMEOUT
                )
                returncode = done.returncode
            except subprocess.TimeoutExpired:
                returncode = -1
                out.write(f"\n(killed after {JOB_TIMEOUT}s)\n".encode())
        return JobRun(pod.name, round_no, returncode, time.monotonic() - started, _tail(log))

    def serve(self, deployment: Registration) -> None:
        """Start a Deployment's container (once) and wait until its readiness probe passes."""
        name = _name(deployment)
        if name in self.ready_after:
            return
        pod = self.pod(deployment, "serving")
        http = (pod.probe or {}).get("httpGet")
        if http is None:
            raise ValueError(f"{pod.name}: only an httpGet readiness probe is reproduced here")
        log = pod.root / "output.log"
        proc = self._served.enter_context(_process(pod.command, log, pod.env))
        url = self.mapping.url(name, int(http["port"]), http.get("path", "/"))
        self.ready_after[name] = _wait(name, proc, lambda: _http_ready(url), [log], timeout=120)

    def run(self, round_no: int) -> list[JobRun]:
        """Every Job once, wave by wave; raises after the first wave with a failed Job.

        A wave's Jobs start together, as in the cluster: races between them (two services
        creating the shared `service` project) show here as they would there.
        """
        results: list[JobRun] = []
        for wave in self.waves():
            jobs = [r for r in wave if r.kind == "Job"]
            with ThreadPoolExecutor(max_workers=self.workers or max(len(jobs), 1)) as pool:
                running = [pool.submit(self.run_job, job, round_no) for job in jobs]
                for deployment in (r for r in wave if r.kind == "Deployment"):
                    self.serve(deployment)
                done = [future.result() for future in running]
            self.runs += done
            results += done
            failed = [run for run in done if not run.ok]
            if failed:
                served = [f"--- {log}\n{_tail(log, 30)}" for log in self.served_logs()]
                raise JobFailedError("\n\n".join([*(run.describe() for run in failed), *served]))
        return results

    def close(self) -> None:
        """Stop what serve() started."""
        self._served.close()

    def served_logs(self) -> list[Path]:
        return sorted((self.mapping.root / "serving").glob("*/output.log"))


@dataclass
class ChainReport:
    """What a stack's chain took: for the test session's summary."""

    stack: str
    phases: dict[str, float] = field(default_factory=dict)  # in the order they ran
    runs: list[JobRun] = field(default_factory=list)
    ready_after: dict[str, float] = field(default_factory=dict)
    not_run: dict[str, list[str]] = field(default_factory=dict)

    def lines(self) -> list[str]:
        rounds = sorted({run.round for run in self.runs})
        jobs = list(dict.fromkeys(run.name for run in self.runs))
        seconds = {(run.name, run.round): run.seconds for run in self.runs}
        total = sum(self.phases.values())
        lines = [
            f"bootstrap chain {self.stack}: {len(jobs)} Jobs x {len(rounds)} rounds = {len(self.runs)} runs,"
            f" {total:.1f}s in all",
            "  " + ", ".join(f"{name} {value:.1f}s" for name, value in self.phases.items()),
            *(f"  {name} served, ready {ready:.1f}s after start" for name, ready in self.ready_after.items()),
            "  seconds per Job (" + " / ".join(f"round {r}" for r in rounds) + "; a wave's Jobs share the cores):",
        ]
        for name in jobs:
            per_round = " / ".join(f"{seconds[(name, r)]:6.1f}" if (name, r) in seconds else "     -" for r in rounds)
            lines.append(f"    {name:32s} {per_round}")
        for job, workloads in self.not_run.items():
            lines.append(f"  {job} ran without what it waits for in the cluster: {', '.join(workloads)}")
        return lines


def _http_ready(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return 200 <= response.status < 400
    except (urllib.error.URLError, OSError):
        return False


def adopt_root_password(venv: OpenStackVenv, mariadb: MariaDB, password: str) -> MariaDB:
    """Give root@'%' the plan's `mariadb-root` password, as the MariaDB operator does."""
    code = (
        "import os, pymysql\n"
        "db = pymysql.connect(host=os.environ['H'], port=int(os.environ['P']), user='root',"
        " password=os.environ['OLD'], autocommit=True)\n"
        "db.cursor().execute(\"ALTER USER 'root'@'%%' IDENTIFIED BY %s\", (os.environ['NEW'],))\n"
    )
    env = venv.env() | {"H": mariadb.host, "P": str(mariadb.port), "OLD": mariadb.password or "", "NEW": password}
    done = subprocess.run([venv.python, "-c", code], env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"setting MariaDB's root password failed:\n{done.stderr[-2000:]}")
    return replace(mariadb, password=password)
