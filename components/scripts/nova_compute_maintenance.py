"""nova-compute-maintenance: compute nodes as Kubernetes sees them, made true in Nova.

    python3 /scripts/nova_compute_maintenance.py      (the Deployment's command)

Every POLL_SECONDS it lists the compute nodes (COMPUTE_NODE_SELECTOR) and Nova's compute
services, and for each node:

- cordoned (`kubectl cordon`, `kubectl drain`): its nova-compute service is disabled with the
  reason `cordoned`; uncordoned: enabled again, only if this controller disabled it (an
  operator's own disable, or nova-compute's, stays);
- annotated `openstack.org/maintenance=requested`: its service is disabled (`maintenance`), the
  other enabled hosts must have room in Placement for every running server (else `refused`),
  the servers are live-migrated away one at a time, the node's RESTART_COMPONENTS pods are
  deleted so their DaemonSets start them from their current templates (OnDelete updates), and
  once those are Ready the node is `done` and its service enabled again. Progress goes to the
  annotations and to Events about the node (maintenance_plan.py says which).

It keeps nothing in memory that matters: each pass reads the state again, so it may restart at
any time. It serves GET /healthz on HEALTH_PORT: 200 while its passes keep coming.
"""

from __future__ import annotations

import http.server
import os
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import maintenance_plan as plan
from maintenance_kube import Kube, KubeError
from maintenance_nova import Nova, NovaError, SdkTransport

# A pass that has not ended after this long means the loop hangs (every call has a timeout).
STALE_SECONDS = 300
# At most this many phases in one pass (requested → migrating → restarting → done).
HOPS = 4


@dataclass(frozen=True)
class Config:
    namespace: str
    node_selector: str  # label selector of the compute nodes, e.g. openstack-compute-node=enabled
    restart_components: tuple[str, ...]  # app.kubernetes.io/component of the pods to restart
    interval: float = 10.0
    restart_timeout: float = 900.0
    # The longest wait for a task of Nova's on a server of the node (a live migration in flight, or another
    # task state) before the maintenance fails, naming the server.
    task_timeout: float = 3600.0
    health_port: int = 8080
    pod: str = "nova-compute-maintenance"

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> Config:
        return cls(
            namespace=env["NAMESPACE"],
            node_selector=env["COMPUTE_NODE_SELECTOR"],
            restart_components=tuple(c for c in env.get("RESTART_COMPONENTS", "").split(",") if c),
            interval=float(env.get("POLL_SECONDS", cls.interval)),
            restart_timeout=float(env.get("RESTART_TIMEOUT_SECONDS", cls.restart_timeout)),
            task_timeout=float(env.get("TASK_TIMEOUT_SECONDS", cls.task_timeout)),
            health_port=int(env.get("HEALTH_PORT", cls.health_port)),
            pod=env.get("POD_NAME", cls.pod),
        )


class Controller:
    def __init__(
        self,
        kube: Kube,
        nova: Nova,
        config: Config,
        clock: Callable[[], float] = time.time,
        log: Callable[[str], None] = lambda line: print(line, flush=True),
    ):
        self.kube, self.nova, self.config, self.clock, self.log = kube, nova, config, clock, log
        self.passes = 0
        self.last_pass = time.monotonic()

    def run(self, stop: threading.Event) -> None:
        while not stop.is_set():
            try:
                self.reconcile()
            except (KubeError, NovaError) as error:
                self.log(f"pass failed, trying again in {self.config.interval:.0f}s: {error}")
            self.passes += 1
            self.last_pass = time.monotonic()
            stop.wait(self.config.interval)

    def reconcile(self) -> None:
        nodes = self.kube.compute_nodes(self.config.node_selector)
        services = self.nova.compute_services()
        for node in nodes:
            try:
                self.node(node, plan.service_of(node, services))
            except (KubeError, NovaError) as error:
                self.log(f"{node.name}: {error}")

    def node(self, node: plan.Node, service: plan.Service | None) -> None:
        phase = node.phase
        service = self._service(node, phase, service)
        if phase in plan.WORKING:
            host = service.host if service else node.name
            for _ in range(HOPS):
                step = self._step(node, phase, host)
                node = self._commit(node, step)
                moved_on, phase = step.phase != phase, step.phase
                if not moved_on or phase not in plan.WORKING:
                    break
        elif node.annotations.get(plan.PHASE) is None and any(k in node.annotations for k in plan.ANNOTATIONS):
            node = self.kube.annotate(node, dict.fromkeys(plan.ANNOTATIONS))  # the operator removed the request
        self._service(node, phase, service)

    def _service(self, node: plan.Node, phase: plan.Phase | None, service: plan.Service | None) -> plan.Service | None:
        change = plan.service_change(node.unschedulable, phase, service)
        if change is None or service is None:
            return service
        changed = self.nova.change_service(service, change)
        what = "enabled" if change.enable else f"disabled, reason '{change.reason}'"
        self.log(f"{node.name}: nova-compute on {service.host} {what}")
        reason = "ComputeServiceEnabled" if change.enable else "ComputeServiceDisabled"
        self._event(node, plan.Event(reason, f"nova-compute on {service.host} {what}"))
        return changed

    def _step(self, node: plan.Node, phase: plan.Phase | None, host: str) -> plan.Step:
        if phase is plan.Phase.REQUESTED:
            return self._requested(host)
        if phase is plan.Phase.MIGRATING:
            return self._migrating(host, node.state)
        assert phase is plan.Phase.RESTARTING
        return plan.restart_step(
            self.kube.pods_on(node.name),
            node.state,
            self.config.restart_components,
            self.clock(),
            self.config.restart_timeout,
        )

    def _requested(self, host: str) -> plan.Step:
        hypervisors = self.nova.hypervisors()
        servers = self.nova.servers_on(host)
        held: dict[str, dict[str, int]] = {}
        for hypervisor in hypervisors:
            if hypervisor.host == host:
                held.update(self.nova.allocations_on(hypervisor.id))
        needs = [plan.Need(s.label(), held.get(s.id, {})) for s in servers if s.movable]
        others = [h for h in hypervisors if h.host != host and h.enabled and h.up]
        rooms = [self.nova.room(h) for h in others] if needs else []
        return plan.requested_step(servers, needs, rooms)

    def _migrating(self, host: str, state: plan.State) -> plan.Step:
        servers = self.nova.servers_on(host)
        current = plan.in_flight(servers, state)
        detail, unfinished = "", None
        if current is not None:
            detail = self.nova.migration_progress(current) if current.busy else self.nova.last_live_migration(current)
        elif state.instance:  # it left the node: the source may still be finishing with it
            unfinished = self.nova.unfinished_live_migration(state.instance)
        now, timeout = self.clock(), self.config.restart_timeout
        step = plan.migration_step(servers, state, detail, unfinished, now, timeout, self.config.task_timeout)
        if step.migrate is not None:
            try:
                self.nova.live_migrate(step.migrate)
            except NovaError as error:
                return plan.migration_refused(step.migrate, str(error), state)
        return step

    def _commit(self, node: plan.Node, step: plan.Step) -> plan.Node:
        for pod in step.delete:
            self.kube.delete_pod(pod)
        wanted = {plan.PHASE: step.phase.value, plan.PROGRESS: step.progress, plan.STATE: step.state.dump()}
        if any(node.annotations.get(k) != v for k, v in wanted.items()):
            node = self.kube.annotate(node, wanted)
            self.log(f"{node.name}: maintenance {step.phase.value}: {step.progress.removeprefix(f'{step.phase}: ')}")
        if step.event is not None:
            self._event(node, step.event)
        return node

    def _event(self, node: plan.Node, event: plan.Event) -> None:
        """Events only tell: one that cannot be written must not stop the work (the annotations hold it)."""
        try:
            self.kube.record(node, event)
        except KubeError as error:
            self.log(f"{node.name}: event {event.reason} not recorded: {error}")

    def healthy(self) -> bool:
        return time.monotonic() - self.last_pass < max(STALE_SECONDS, 3 * self.config.interval)


def serve_health(controller: Controller, port: int) -> http.server.ThreadingHTTPServer:
    class Health(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # the name http.server calls
            ok = self.path == "/healthz" and controller.healthy()
            self.send_response(200 if ok else 503)
            self.end_headers()
            self.wfile.write(b"ok\n" if ok else b"stale\n")

        def log_message(self, format: str, *args: object) -> None:
            pass  # the kubelet asks every few seconds

    server = http.server.ThreadingHTTPServer(("", port), Health)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def main() -> None:
    config = Config.from_env(os.environ)
    kube = Kube.in_cluster(namespace=config.namespace, reporter=config.pod)
    controller = Controller(kube, Nova(SdkTransport.connect()), config)
    serve_health(controller, config.health_port)
    print(f"watching nodes {config.node_selector} every {config.interval:.0f}s", flush=True)
    controller.run(threading.Event())


if __name__ == "__main__":
    main()
