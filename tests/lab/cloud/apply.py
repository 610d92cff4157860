"""`pulumi up` of a new plan on the running lab: the engine's steps, pulumi-kubernetes' waits, the controllers.

From the Pulumi engine (pkg/resource/deploy/step_generator.go) and pulumi-kubernetes
(provider/pkg/provider/provider.go Diff, provider/pkg/await):
- Each object gets the engine's step (tests/lab/cloud/engine.py): same, create, update, replace or
  delete. Every object here is named, so a replacement deletes the old object before it creates
  the new one (Diff's DeleteBeforeReplace); an old object under `retainOnDelete` stays, and the
  create then fails on the name, as `pulumi up` does.
- The steps run in the plan's dependency order, each once the steps of what it depends on are done,
  with the waits and timeouts of the first deploy (tests/lab/cloud/deploy.py `walk`): an update waits as a
  create does (a workload until every pod runs the new template and is ready, a replaced Job until
  it completed), within customTimeouts' `update`. Objects the new plan no longer has are deleted
  after every other step, dependents first (the old plan's order reversed), each awaited until its
  pods are gone (foreground deletion); `protect` makes that fail, `retainOnDelete` leaves it.
- Kubernetes does the rest: a changed pod template rolls by its strategy (tests/lab/cloud/rollout.py), a
  Job replaced runs again, OnDelete pods stay until someone deletes them, a Secret or ConfigMap
  replaced under its name reaches the volumes of the running pods at the kubelet's next sync
  (tests/lab/cloud/deploy.py kubelet_resync) and rolls nothing by itself.

Operators the lab plays beside Kubernetes' controllers watch the steps (`watchers`): each is told
of an object's step once it began, as an operator's watch sees the object change (the cert-manager
stand-in issues a Certificate created or changed: tests/lab/cloud/ca_rotation.py).

Not played: the operators' answer to a change of their MariaDB or RabbitmqCluster (listed in
`not_modelled`), a chart's children (the offline plan does not expand them), dependent
replacements (a delete-before-replace that forces the replacement of objects whose inputs are
computed from its outputs: this program names objects with plain strings, so none arise).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from tests.lab.cloud import awaits, backup_standin, rollout
from tests.lab.cloud.deploy import POD_KINDS, Cloud, DeployFailedError, Timing, Workload, config_data, pod_template
from tests.lab.cloud.engine import Step, delete_order, engine_steps
from tests.lab.cloud.pods import PodSpecError
from tests.lab.cloud.services import Service
from tests.lab.cloud.standins import STAND_INS
from tools.plan import Plan
from tools.plan_configs import object_key
from tools.runtime import Registration

RBAC_KINDS = ("ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding")
TICK = 0.5
Watcher = Callable[[Registration, Step], None]  # an operator's watch: an object's step, once begun


class ApplyFailedError(DeployFailedError):
    pass


@dataclass
class Rolled:
    """A workload's pods that the apply replaced (or a replaced Job's run), when."""

    ref: str
    why: str
    began: float  # wall clock, as the API clients stamp their calls
    ended: float | None = None
    deleted: list[str] = field(default_factory=list)
    started: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        seconds = round((self.ended or time.time()) - self.began, 1)
        return {"why": self.why, "deleted": self.deleted, "started": self.started, "seconds": seconds}


@dataclass
class Applied:
    """What the apply did, for report.json's `apply`."""

    steps: dict[str, Step]
    timings: dict[str, Timing] = field(default_factory=dict)
    rolled: dict[str, Rolled] = field(default_factory=dict)  # "Kind/name" → its pods replaced
    jobs_run: dict[str, str] = field(default_factory=dict)  # "Job/name" → its run's phase
    not_modelled: list[str] = field(default_factory=list)
    error: str = ""
    seconds: float = 0.0

    def objects(self) -> dict[str, list[str]]:
        found: dict[str, list[str]] = {}
        for step in self.steps.values():
            if step.op != "same":
                found.setdefault(step.op, []).append(step.ref)
        return found

    def as_dict(self) -> dict[str, Any]:
        return {
            "error": self.error,
            "seconds": round(self.seconds, 1),
            "objects": {op: sorted(refs) for op, refs in self.objects().items()},
            "pods_replaced": {ref: r.as_dict() for ref, r in sorted(self.rolled.items())},
            "jobs_run": dict(sorted(self.jobs_run.items())),
            # Every step but the same ones, which take no time: when it began and when it was done.
            "steps": [_step_record(t) for t in sorted(self.timings.values(), key=_began) if t.operation != "same"],
            "not_modelled": self.not_modelled,
        }


def _began(timing: Timing) -> tuple[float, str, str]:
    return timing.created, timing.kind, timing.name


def _step_record(timing: Timing) -> dict[str, Any]:
    end = None if timing.done is None else round(timing.done, 1)
    return {"step": timing.operation, "object": f"{timing.kind}/{timing.name}", "start_s": round(timing.created, 1),
            "end_s": end}  # fmt: skip


class Controller(threading.Thread):
    """A workload's controller after its update: syncs (tests/lab/cloud/rollout.py) until it is rolled."""

    def __init__(self, cloud: Cloud, workload: Workload, record: Rolled | None, stopping: threading.Event):
        super().__init__(name=f"rollout {workload.name}", daemon=True)
        self.cloud, self.workload, self.record, self.stopping = cloud, workload, record, stopping
        self.current = workload.revision - 1 if workload.revision else 0  # a StatefulSet's currentRevision
        self.error = ""

    def sync(self) -> list[rollout.Action]:
        w = self.workload
        pods = [rollout.Pod(p.plan.name, p.revision, p.ready, p.plan.index, p.node.name) for p in w.active_pods]
        if w.kind == "Deployment":
            strategy = rollout.at_lab_scale(w.strategy, w.planned_replicas, w.replicas)
            return rollout.deployment(strategy, w.replicas, pods, w.revision)
        if w.kind == "StatefulSet":
            return rollout.statefulset(w.strategy, w.replicas, pods, w.revision, self.current)
        return rollout.daemonset(w.strategy, [n.name for n in w.nodes], pods, w.revision)

    def run(self) -> None:
        try:
            while not self.stopping.is_set():
                actions = self.sync()
                if not actions:
                    if self._settled():
                        return
                    self.stopping.wait(TICK)
                    continue
                # One sync's deletions at once, as the kubelets of their nodes stop them side by side (a
                # DaemonSet's maxUnavailable nodes); a DaemonSet's or StatefulSet's next sync waits for them.
                waiting = [self._delete_pod(a) for a in actions if isinstance(a, rollout.Delete)]
                if self.workload.kind != "Deployment":
                    for stopper in waiting:
                        if stopper is not None:
                            stopper.join()
                for action in actions:
                    if isinstance(action, rollout.Create):
                        self._create_pod(action)
        except (PodSpecError, OSError, RuntimeError) as error:  # a pod the kubelet or scheduler refuses
            self._fail(str(error))
        finally:
            self._roll_ended()

    def _fail(self, error: str) -> None:
        self.error = self.error or f"{self.workload.kind} {self.workload.name}: {error}"
        self.cloud.log(f"apply: {self.error}")

    def _roll_ended(self) -> None:
        """The roll lasts until its last old pod is gone: a Deployment's stop after the controller is done, and
        a call its stopping process cuts still falls within the roll (tests/lab/cloud/api_clients.py)."""
        if self.record is not None:
            self.record.ended = max(self.record.ended or 0.0, time.time())

    def _settled(self) -> bool:
        w = self.workload
        if w.strategy.get("type") == "OnDelete":
            return True  # nothing more happens until someone deletes a pod
        pods = w.active_pods
        return len(pods) == w.replicas and all(p.ready and p.revision == w.revision for p in pods)

    def _delete_pod(self, action: rollout.Delete) -> threading.Thread | None:
        """The pod's deletion begun; a Deployment's roll goes on meanwhile (Workload.active_pods). A pod someone
        else deletes already (the API) is waited for (Cloud.remove_pod), not deleted twice."""
        w = self.workload
        pod = next((p for p in list(w.pods) if p.plan.name == action.name), None)
        if pod is None:
            return None
        if self.record is not None and not pod.terminating:
            self.record.deleted.append(action.name)
        pod.terminating = True  # at once: the next sync of a Deployment counts it out

        def stop() -> None:
            try:
                self.cloud.remove_pod(w, pod)
            except (OSError, RuntimeError) as error:  # what the kubelet could not undo: the apply fails on it
                self._fail(f"deleting pod {pod.plan.name}: {error}")
            self._roll_ended()

        stopper = threading.Thread(target=stop, name=f"delete {pod.plan.name}", daemon=True)
        stopper.start()
        return stopper

    def _create_pod(self, action: rollout.Create) -> None:
        node = self.cloud.cluster.node(action.node) if action.node else None
        new = self.cloud.start_successor(self.workload, action.index, node, action.revision)
        if self.record is not None:
            self.record.started.append(new.plan.name)


@dataclass
class Apply:
    cloud: Cloud
    old: Plan
    new: Plan
    applied: Applied
    log: Callable[[str], None]
    controllers: list[Controller] = field(default_factory=list)
    stopping: threading.Event = field(default_factory=threading.Event)
    # The NetworkPolicies and RBAC objects in the cluster as the steps go (object key → registration).
    cluster_config: dict[str, Registration] = field(default_factory=dict)
    job_urns: dict[str, str] = field(default_factory=dict)  # "Job/name" → its URN
    watchers: Sequence[Watcher] = ()

    def __post_init__(self) -> None:
        self.old_by_key = {object_key(r.urn): r for r in self.old.custom}
        self.cluster_config = {k: r for k, r in self.old_by_key.items() if r.kind in ("NetworkPolicy", *RBAC_KINDS)}

    # -- the steps -----------------------------------------------------------------------------------

    def op(self, r: Registration) -> str:
        return self.applied.steps[object_key(r.urn)].op

    def begin(self, r: Registration) -> None:
        step = self.applied.steps[object_key(r.urn)]
        if step.op == "same":
            return
        self.log(f"apply: {step.op} {step.ref} {', '.join(step.forced or step.fields)[:200]}")
        if step.op == "create":
            self.create(r)
        elif step.op == "update":
            self.update(r, step)
        elif step.op == "replace":
            previous = self.old_by_key[object_key(r.urn)]
            if previous.retain_on_delete:
                raise ApplyFailedError(f"{step.ref}: replaced, and the old object is retained (retainOnDelete): "
                                       "creating the new one fails, its name is taken")  # fmt: skip
            self.delete(previous, replaced=True)
            self.create(r)
        for watch in self.watchers:
            watch(r, step)

    def done(self, r: Registration) -> bool:
        if self.op(r) == "same":
            return True  # the engine waits for no same step
        for controller in self.controllers:
            if controller.error:
                raise ApplyFailedError(controller.error)
        return self.cloud._object_done(r)

    def create(self, r: Registration) -> None:
        cloud, namespace, name = self.cloud, self.new.settings.namespace, r.k8s_name or r.name
        if r.kind in ("Secret", "ConfigMap"):
            cloud.objects[(r.kind, name)] = config_data(r)
            if r.kind == "Secret" and cloud.api is not None:
                cloud.api.add_secret(namespace, r.revealed)
            cloud.kubelet_resync(r.kind, name)  # a replacement's data reaches the running pods that mount it
        elif r.kind == "Service":
            self._services([Service.from_manifest(r.revealed, namespace)], [])
        elif r.kind in POD_KINDS or r.kind in ("Job", "CronJob"):
            with cloud._lock:  # the sync loop reads the workloads
                cloud._add(r)
            if r.kind != "CronJob":
                self._start(r)
        elif r.kind in STAND_INS:
            stand_in = STAND_INS[r.kind](r.revealed)
            with cloud._lock:
                cloud._add_stand_in(r, stand_in)
            self._services([Service.from_manifest(s, namespace) for s in stand_in.services], [])
            self._start(r)
        elif r.kind == "Backup" and backup_standin.one_time(r.revealed):
            with cloud._lock:  # mariadb-operator makes its Job (tests/lab/cloud/backup_standin.py)
                cloud.add_backup(r)
            self._start(r)
        self._cluster_config(r)

    def _start(self, r: Registration) -> None:
        try:
            self.cloud.start(r.urn)
        except (PodSpecError, KeyError, OSError) as error:
            raise ApplyFailedError(f"{r.k8s_name or r.name}: {error}") from error
        workload = self.cloud.workloads[r.urn]
        ref = f"{workload.kind}/{workload.name}"
        if workload.kind == "Job" and workload.job is not None:
            self.applied.jobs_run[ref] = "started"
            self.job_urns[ref] = r.urn
        elif ref in self.applied.rolled:  # a replaced workload: its new pods
            record = self.applied.rolled[ref]
            record.started += [p.plan.name for p in workload.pods]
            record.ended = time.time()

    def update(self, r: Registration, step: Step) -> None:
        cloud = self.cloud
        if r.kind == "Service":
            self._services([Service.from_manifest(r.revealed, self.new.settings.namespace)], [])
        elif r.kind == "CronJob":
            workload = next(w for w in cloud.cron_jobs if w.urn == r.urn)
            workload.template = pod_template(r)  # its next runs use it
        elif r.kind in POD_KINDS and r.urn in cloud.workloads:
            self._roll(cloud.workloads[r.urn], r, step)
        elif r.kind in STAND_INS:
            self.applied.not_modelled.append(f"{step.ref}: {', '.join(step.fields)[:300]} changed; what its operator "
                                             "does then is not played by the lab's stand-in")  # fmt: skip
        self._cluster_config(r)

    def _roll(self, workload: Workload, r: Registration, step: Step) -> None:
        """The workload's new spec; its controller takes it from there."""
        if step.template:
            workload.templates[workload.revision] = workload.template
            workload.revision += 1
            workload.template = pod_template(r)
        self.cloud.set_spec(workload, r)
        if workload.name in self.cloud.cannot_run:
            workload.replicas = 0  # not run here, as at the deploy
            return
        record = None
        if step.template and workload.strategy.get("type") != "OnDelete":
            why = f"its template changed: {workload.strategy.get('type', 'RollingUpdate')}"
            record = self.applied.rolled.setdefault(step.ref, Rolled(step.ref, why, time.time()))
        controller = Controller(self.cloud, workload, record, self.stopping)
        self.controllers.append(controller)
        controller.start()

    def delete(self, r: Registration, replaced: bool = False) -> None:
        """The object deleted with its dependents (foreground): a workload's or a Job's pods gone first."""
        cloud, name = self.cloud, r.k8s_name or r.name
        if r.kind in ("Secret", "ConfigMap"):
            cloud.objects.pop((r.kind, name), None)  # the kubelet keeps what it wrote into running pods
            if r.kind == "Secret" and cloud.api is not None:
                cloud.api.remove_secret(self.old.settings.namespace, name)
        elif r.kind == "Service":
            self._services([], [name])
        elif r.urn in cloud.workloads:
            with cloud._lock:
                workload = cloud.workloads.pop(r.urn)
            pods = [*workload.pods, *(workload.job.pods if workload.job else [])]
            began = time.time()
            stoppers = [threading.Thread(target=cloud.remove_pod, args=(workload, p)) for p in pods]
            for thread in stoppers:
                thread.start()
            for thread in stoppers:
                thread.join()
            ref = f"{workload.kind}/{workload.name}"
            if replaced and workload.kind in POD_KINDS and pods:
                why = "replaced: deleted and created again"
                self.applied.rolled[ref] = Rolled(ref, why, began, deleted=[p.plan.name for p in pods])
            if workload.stand_in and workload.job is None:  # a server's Services go with it, a Job has none
                self._services([], [s.name for s in cloud.table.services if _serves(s, workload)])
        elif r.kind == "CronJob":
            cloud.cron_jobs = [w for w in cloud.cron_jobs if w.urn != r.urn]
        self._cluster_config(r, removed=True)

    def _services(self, put: list[Service], removed: list[str]) -> None:
        cloud = self.cloud
        with cloud._lock:
            for service in put:
                cloud.table.put(service)
            for name in removed:
                cloud.table.remove(self.new.settings.namespace, name)
            cloud.table.update(cloud.endpoints())
            cloud.proxy.apply()
            cloud.dns.reload(cloud.table.dns_hosts())

    def _cluster_config(self, r: Registration, removed: bool = False) -> None:
        """NetworkPolicies and RBAC as the cluster has them after this step: the plugin and the API
        server follow at once."""
        if r.kind != "NetworkPolicy" and r.kind not in RBAC_KINDS:
            return
        if removed:
            self.cluster_config.pop(object_key(r.urn), None)
        else:
            self.cluster_config[object_key(r.urn)] = r
        found = list(self.cluster_config.values())
        if r.kind == "NetworkPolicy":
            self.cloud.network_policies.set_policies([x.revealed["spec"] for x in found if x.kind == "NetworkPolicy"])
        elif self.cloud.api is not None:
            self.cloud.api.rbac_objects = [x.revealed for x in found if x.kind in RBAC_KINDS]

    def stop(self) -> None:
        self.stopping.set()


def _serves(service: Service, workload: Workload) -> bool:
    labels = dict((workload.template.get("metadata") or {}).get("labels") or {})
    return service.selects(labels)


def apply(
    cloud: Cloud, new: Plan, log: Callable[[str], None] | None = None, watchers: Sequence[Watcher] = ()
) -> Applied:
    """Do what `pulumi up` of `new` does to the running cloud; the cloud then runs `new`. `watchers` are the
    operators the lab plays that act on the objects a step changes."""
    old = cloud.plan
    applied = Applied(engine_steps(old.custom, new.custom))
    run = Apply(cloud, old, new, applied, log or cloud.log, watchers=watchers)
    started = time.monotonic()
    cloud.plan = new
    # Images without a release in their tag take the stack's (tests/lab/cloud/images.py image_release).
    cloud.venvs = cloud.factory.venvs = cloud.venvs.running(new.settings.release)
    operations = {r.urn: run.op(r) for r in new.custom}
    try:
        cloud.walk(new.custom, new.dependencies, run.begin, run.done, applied.timings, operations)
        removed = [r for r in old.custom if applied.steps[object_key(r.urn)].op == "delete"]
        _delete_removed(run, delete_order(removed, old.dependencies), started)
        _await_controllers(run)
    except DeployFailedError as error:
        applied.error = str(error)
        run.log(f"apply failed: {error}")
    finally:
        run.stop()
        applied.seconds = time.monotonic() - started
    for ref, urn in run.job_urns.items():
        job = cloud.workloads[urn].job if urn in cloud.workloads else None
        applied.jobs_run[ref] = job.phase if job is not None else "deleted"
    applied.rolled = {k: v for k, v in applied.rolled.items() if v.deleted}  # only what replaced a pod
    return applied


def _delete_removed(run: Apply, ordered: list[Registration], started: float) -> None:
    """The engine's deletes, after every other step: each awaited until it is gone (its pods stopped)."""
    for r in ordered:
        timing = Timing(r.kind or r.type, r.k8s_name or r.name, time.monotonic() - started, operation="delete")
        run.applied.timings[f"delete:{r.urn}"] = timing
        if r.protect:
            raise ApplyFailedError(f"{timing.kind} {timing.name}: protected; the engine refuses to delete it")
        if r.retain_on_delete:
            run.log(f"apply: {timing.kind}/{timing.name} left in the cluster (retainOnDelete)")
        else:
            run.log(f"apply: delete {timing.kind}/{timing.name}")
            run.delete(r)
        timing.done = time.monotonic() - started


def _await_controllers(run: Apply) -> None:
    """Rollouts `pulumi up` does not wait for (skipAwait) go on after it; the record waits for them too,
    within an update's default timeout, so that it tells what Kubernetes did."""
    deadline = time.monotonic() + awaits.DEFAULT_TIMEOUT
    for controller in run.controllers:
        controller.join(max(0.0, deadline - time.monotonic()))
        if controller.error:
            raise ApplyFailedError(controller.error)
