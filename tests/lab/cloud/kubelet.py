"""What the kubelet does for a pod: init containers, containers, probes, restarts, and Jobs' retries.

Probes are evaluated as the kubelet evaluates them: from the node's network namespace, an
httpGet to the pod's IP with that address as the Host, a TCP connect, or a command run inside
the container's namespaces as its user; honouring initialDelaySeconds, periodSeconds,
timeoutSeconds and the thresholds. A startup probe holds the others back until it passed, and
restarts the container when it fails its threshold. A container whose liveness probe fails is
restarted; one that exits is restarted with the kubelet's back-off under restartPolicy Always
(and OnFailure when it failed). A pod is Ready when every container runs and its readiness probe
(if any) passed last time: a container that exited is not Ready, probe or not.
"""

from __future__ import annotations

import http.client
import socket
import ssl
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field

from tests.lab.cloud.container import Container
from tests.lab.cloud.netns import enter_netns
from tests.lab.cloud.node import Node
from tests.lab.cloud.pods import ContainerPlan, PodPlan, Probe
from tests.lab.cloud.services import Endpoint

BACKOFF_START, BACKOFF_CAP = 10.0, 300.0
OWNERS = {"Deployment": "ReplicaSet", "CronJob": "Job"}
TICK = 0.5


@dataclass
class ProbeRecord:
    """One probe of one container: how often it ran and passed, and its last answer."""

    pod: str
    container: str
    kind: str  # startup, readiness or liveness
    handler: str
    runs: int = 0
    passes: int = 0
    last: str = ""

    @property
    def passed(self) -> bool:
        return self.passes > 0 and self.last == "ok"


@dataclass
class _ProbeState:
    probe: Probe
    record: ProbeRecord
    next_at: float
    failures: int = 0
    successes: int = 0


class PodRuntime:
    """One pod on the node: runs until stopped, or (Jobs) until its containers have terminated."""

    def __init__(
        self,
        plan: PodPlan,
        node: Node,
        log: Callable[[str], None],
        on_network: Callable[[PodPlan], None] = lambda plan: None,
        revision: int = 0,
    ):
        self.plan, self.node, self.log, self.on_network = plan, node, log, on_network
        self.revision = revision  # of its workload's template it was made from (tests/lab/cloud/deploy.py)
        self.uid = str(uuid.uuid4())
        self.phase = "Pending"
        self.restarts: dict[str, int] = {c.container.name: 0 for c in plan.containers}
        self.exit_codes: dict[str, int | None] = {}
        self.ready_at: float | None = None
        self.started_at = time.monotonic()
        self.failure = ""
        # Deleted: the endpoints controller takes it out of its Services (EndpointSlice `ready` false for a
        # terminating pod) as the kubelet begins to stop it (tests/lab/cloud/deploy.py remove_pod).
        self.terminating = False
        self.deletion: threading.Event | None = None  # set once deleted; made by the first to delete it
        self.deleted_at = ""  # RFC 3339, as the API server stamps a deletion
        self._ready: dict[str, bool] = {}
        self._started: dict[str, bool] = {}  # a startup probe passed (or there is none)
        self._probes: list[_ProbeState] = []
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"pod {plan.name}", daemon=True)

    # -- public ----------------------------------------------------------------------------------

    def start(self) -> None:
        if not self.plan.host_network:
            self.node.create_pod_network(f"pod-{self.plan.name}", self.plan.ip)
        self.on_network(self.plan)  # the network plugin's turn: NetworkPolicies
        self._thread.start()

    @property
    def ready(self) -> bool:
        return self.phase == "Running" and bool(self._ready) and all(self._ready.values())

    def as_kubernetes(self, namespace: str) -> dict[str, object]:
        """The pod as the API server shows it."""
        ready = "True" if self.ready else "False"
        return {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": self.plan.name,
                "namespace": namespace,
                "uid": self.uid,
                "labels": self.plan.labels,
                # Its controller, as `kubectl drain` reads it (a Deployment's pods are its ReplicaSet's).
                "ownerReferences": [{"kind": OWNERS.get(self.plan.kind, self.plan.kind), "name": self.plan.workload}],
                # Being deleted: its grace period runs (`kubectl get pods` says Terminating).
                **({"deletionTimestamp": self.deleted_at} if self.deleted_at else {}),
            },
            "spec": {"nodeName": self.node.name},
            "status": {"phase": self.phase, "podIP": self.plan.ip, "conditions": [{"type": "Ready", "status": ready}]},
        }

    def endpoint(self) -> Endpoint:
        """The pod as the endpoints controller sees it."""
        return Endpoint(
            self.plan.name,
            self.plan.ip,
            self.ready and not self.terminating,
            tuple(sorted(self.plan.labels.items())),
            tuple(sorted(self.plan.ports.items())),
            self.plan.hostname,
            self.plan.subdomain,
        )

    @property
    def done(self) -> bool:
        return self.phase in ("Succeeded", "Failed")

    @property
    def probe_records(self) -> list[ProbeRecord]:
        return [state.record for state in self._probes]

    def container(self, name: str) -> Container:
        return next(c.container for c in self.plan.containers if c.container.name == name)

    def stop(self) -> None:
        """Delete the pod: preStop hooks, SIGTERM, SIGKILL after the grace period."""
        self._stopping.set()
        if self._thread.is_alive():
            self._thread.join(timeout=self.plan.grace + 60)
        for plan in self.plan.containers:
            self._stop_container(plan)
        self.phase = "Stopped" if not self.done else self.phase

    def kill(self) -> None:
        """What a crashed container runtime leaves behind: every process of the pod killed at once."""
        self._stopping.set()
        for plan in [*self.plan.init_containers, *self.plan.containers]:
            plan.container.kill()
        if self._thread.is_alive():
            self._thread.join(timeout=30)
        self.phase = "Stopped" if not self.done else self.phase

    # -- the pod's life --------------------------------------------------------------------------

    def _run(self) -> None:
        try:
            # The kubelet's probes run in its node's network; so do the containers this thread starts.
            enter_netns(self.node.netns_path)
            if not self._run_init_containers():
                return
            for plan in self.plan.containers:
                plan.container.start()
                self._watch(plan)
            self.phase = "Running"
            self.log(f"pod {self.plan.name}: containers started")
            self._loop()
        except Exception as error:  # a harness fault must show in the report, not kill a thread silently
            self.phase, self.failure = "Failed", f"{type(error).__name__}: {error}"
            self.log(f"pod {self.plan.name}: {self.failure}")

    def _run_init_containers(self) -> bool:
        for plan in self.plan.init_containers:
            attempt = 0
            while not self._stopping.is_set():
                plan.container.start()
                while plan.container.running and not self._stopping.is_set():
                    time.sleep(TICK)
                code = plan.container.exit_code
                if code == 0:
                    break
                attempt += 1
                self.log(f"pod {self.plan.name}: init container {plan.container.name} exited {code}")
                if self.plan.restart_policy == "Never":
                    self.phase, self.failure = "Failed", f"init container {plan.container.name} exited {code}"
                    return False
                self._stopping.wait(min(BACKOFF_START * 2 ** (attempt - 1), BACKOFF_CAP))
            if self._stopping.is_set():
                return False
        return True

    def _watch(self, plan: ContainerPlan) -> None:
        now = time.monotonic()
        name = plan.container.name
        self._ready[name] = plan.readiness is None and plan.startup is None
        self._started[name] = plan.startup is None
        for kind, probe in (("startup", plan.startup), ("readiness", plan.readiness), ("liveness", plan.liveness)):
            if probe is not None:
                record = ProbeRecord(self.plan.name, name, kind, probe.kind)
                self._probes.append(_ProbeState(probe, record, now + probe.initial_delay))

    def _loop(self) -> None:
        restart_at: dict[str, float] = {}
        while not self._stopping.is_set():
            now = time.monotonic()
            for plan in self.plan.containers:
                name = plan.container.name
                if plan.container.running or name in self.exit_codes:
                    continue
                self._ready[name] = False  # an exited container is not Ready, probe or not
                code = plan.container.exit_code
                restart = self.plan.restart_policy == "Always" or (self.plan.restart_policy == "OnFailure" and code)
                if not restart:
                    self.exit_codes[name] = code
                    self._ready[name] = False
                    continue
                if name not in restart_at:
                    # The kubelet's back-off: at once, then 10 s doubling up to five minutes.
                    count = self.restarts[name]
                    delay = 0.0 if count == 0 else min(BACKOFF_START * 2 ** (count - 1), BACKOFF_CAP)
                    restart_at[name] = now + delay
                    self.log(f"pod {self.plan.name}: container {name} exited {code}; restart in {delay:.0f}s")
                elif now >= restart_at[name]:
                    del restart_at[name]
                    self.restarts[name] += 1
                    plan.container.start()
                    self._reset_probes(name, now)
                    self._ready[name] = plan.readiness is None and plan.startup is None
                    self._started[name] = plan.startup is None
            if self.exit_codes and len(self.exit_codes) == len(self.plan.containers):
                failed = [n for n, c in self.exit_codes.items() if c != 0]
                self.phase = "Failed" if failed else "Succeeded"
                self.failure = ", ".join(f"{n} exited {self.exit_codes[n]}" for n in failed)
                return
            self._probe_due(now)
            was_ready = self.ready_at is not None
            if self.ready and not was_ready:
                self.ready_at = now
                self.log(f"pod {self.plan.name}: Ready after {now - self.started_at:.0f}s")
            self._stopping.wait(TICK)

    def _reset_probes(self, container: str, now: float) -> None:
        for state in self._probes:
            if state.record.container == container:
                state.next_at, state.failures, state.successes = now + state.probe.initial_delay, 0, 0

    def _probe_due(self, now: float) -> None:
        for state in self._probes:
            plan = next(p for p in self.plan.containers if p.container.name == state.record.container)
            if now < state.next_at or not plan.container.running:
                continue
            name = plan.container.name
            if state.record.kind != "startup" and not self._started[name]:
                continue  # the kubelet holds readiness and liveness back until the startup probe passed
            if state.record.kind == "startup" and self._started[name]:
                continue
            ok, detail = self._probe(plan.container, state.probe)
            state.next_at = time.monotonic() + state.probe.period
            state.record.runs += 1
            state.record.last = "ok" if ok else detail
            if ok:
                state.record.passes += 1
                state.successes, state.failures = state.successes + 1, 0
            else:
                state.successes, state.failures = 0, state.failures + 1
            if state.record.kind == "startup" and ok:
                self._started[name] = True
                self._ready[name] = plan.readiness is None
            elif state.record.kind == "readiness":
                if ok and state.successes >= state.probe.success_threshold:
                    self._ready[name] = True
                elif not ok and state.failures >= state.probe.failure_threshold:
                    self._ready[name] = False
            elif not ok and state.failures >= state.probe.failure_threshold:
                what = f"{state.record.kind} of {name} failed {state.failures}x ({detail})"
                self.log(f"pod {self.plan.name}: {what}; restarting")
                self._stop_container(plan)
                state.failures = 0

    def _probe(self, container: Container, probe: Probe) -> tuple[bool, str]:
        if probe.kind == "exec":
            code, output = container.exec_command(list(probe.command), timeout=probe.timeout)
            return code == 0, f"exit {code}: {output.strip()[-300:]}"
        if probe.kind == "tcpSocket":
            try:
                with socket.create_connection((self.plan.ip, probe.port), timeout=probe.timeout):
                    return True, ""
            except OSError as error:
                return False, str(error)
        return http_probe(self.plan.ip, probe)

    def _stop_container(self, plan: ContainerPlan) -> None:
        if plan.pre_stop and plan.container.running:
            code, output = plan.container.exec_command(list(plan.pre_stop), timeout=self.plan.grace)
            self.log(f"pod {self.plan.name}: preStop of {plan.container.name} exited {code}: {output.strip()[-200:]}")
        plan.container.stop(self.plan.grace)


def http_probe(ip: str, probe: Probe) -> tuple[bool, str]:
    """The kubelet's httpGet: the pod IP as the Host, success for 200-399, redirects not followed;
    over HTTPS without verifying the certificate, as the kubelet does."""
    connection: http.client.HTTPConnection
    if probe.scheme == "HTTPS":
        connection = http.client.HTTPSConnection(
            ip, probe.port, timeout=probe.timeout, context=ssl._create_unverified_context()
        )
    else:
        connection = http.client.HTTPConnection(ip, probe.port, timeout=probe.timeout)
    try:
        headers = {"Host": f"{ip}:{probe.port}", "User-Agent": "kube-probe/1.31", "Accept": "*/*"}
        headers.update(dict(probe.headers))
        connection.request("GET", probe.path, headers=headers)
        status = connection.getresponse().status
        return 200 <= status < 400, f"HTTP {status}"
    except OSError as error:
        return False, str(error)
    finally:
        connection.close()


@dataclass
class JobRuntime:
    """A Job: pods until one succeeds, at most backoffLimit failures, within activeDeadlineSeconds."""

    name: str
    make_pod: Callable[[int], PodRuntime]
    backoff_limit: int = 6
    active_deadline: float | None = None
    log: Callable[[str], None] = print
    pods: list[PodRuntime] = field(default_factory=list)
    phase: str = "Pending"
    failure: str = ""
    started_at: float = 0.0
    finished_at: float | None = None

    def start(self) -> None:
        self.started_at = time.monotonic()
        threading.Thread(target=self._run, name=f"job {self.name}", daemon=True).start()

    @property
    def done(self) -> bool:
        return self.phase in ("Complete", "Failed")

    def _run(self) -> None:
        failures = 0
        while True:
            pod = self.make_pod(len(self.pods))
            self.pods.append(pod)
            pod.start()
            self.phase = "Running"
            while not pod.done:
                if self.active_deadline and time.monotonic() - self.started_at > self.active_deadline:
                    pod.stop()
                    self._finish("Failed", f"DeadlineExceeded after {self.active_deadline:.0f}s")
                    return
                # With restartPolicy OnFailure the kubelet restarts in place; those count as failures.
                if sum(pod.restarts.values()) > self.backoff_limit:
                    pod.stop()
                    self._finish("Failed", f"BackoffLimitExceeded: {sum(pod.restarts.values())} restarts")
                    return
                time.sleep(TICK)
            if pod.phase == "Succeeded":
                self._finish("Complete", "")
                return
            failures += 1
            self.log(f"job {self.name}: pod {pod.plan.name} failed ({pod.failure}), {failures} failure(s)")
            if failures > self.backoff_limit:
                self._finish("Failed", f"BackoffLimitExceeded: {failures} failed pods; last: {pod.failure}")
                return
            time.sleep(min(BACKOFF_START * 2 ** (failures - 1), BACKOFF_CAP))

    def _finish(self, phase: str, failure: str) -> None:
        self.phase, self.failure, self.finished_at = phase, failure, time.monotonic()
        self.log(f"job {self.name}: {phase} after {self.finished_at - self.started_at:.0f}s {failure}".rstrip())
