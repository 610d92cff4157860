"""Deploys a plan onto the lab's cluster as `pulumi up` and the cluster would: object by object, in graph order.

An object is created once everything it depends on (the plan's engine dependencies) is done,
and is done when pulumi-kubernetes would stop waiting for it (tests/lab/cloud/awaits.py), within
the timeout pulumi-kubernetes would give it; past that the deploy fails as `pulumi up` would.
Pods are placed as the scheduler places them (tests/lab/cloud/scheduler.py): every replica of a
Deployment or StatefulSet on a node that admits it, a DaemonSet's pod on every node that admits
it. Services get their cluster address and DNS name when created, and their endpoints follow
the pods' readiness (tests/lab/cloud/services.py).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tests.lab.cloud import awaits, backup_standin
from tests.lab.cloud.cluster import Cluster
from tests.lab.cloud.images import ReleaseVenvs
from tests.lab.cloud.kubelet import JobRuntime, PodRuntime
from tests.lab.cloud.netpol import CniMode, NetworkPolicies, PodAddress
from tests.lab.cloud.node import Node
from tests.lab.cloud.pods import Manifest, PodFactory, PodPlan, PodSpecError, SyncedVolume, secret_data
from tests.lab.cloud.scheduler import SchedulingError, admits, place
from tests.lab.cloud.services import (
    API_SERVER_ADDRESS,
    DNS_ADDRESS,
    ClusterDns,
    Endpoint,
    KubeProxy,
    Port,
    Service,
    ServiceTable,
)
from tests.lab.cloud.standins import STAND_INS, StandIn
from tools.plan import Plan
from tools.runtime import Registration

if TYPE_CHECKING:
    from tests.lab.cloud.apiserver import LabApiServer

POD_KINDS = ("Deployment", "DaemonSet", "StatefulSet")
API_SERVER_PORT = 6443
SYNC_SECONDS = 1.0
# How soon a changed Secret reaches the pods that mount it: the kubelet syncs each pod about
# every minute (syncFrequency) and reads Secrets through a cache; here a little sooner.
KUBELET_SYNC_SECONDS = 15.0


class DeployFailedError(RuntimeError):
    pass


@dataclass
class Workload:
    """One object of the plan that runs pods (or is played by one): its runtime state."""

    kind: str
    name: str
    urn: str
    template: Manifest
    replicas: int  # Deployments, StatefulSets, stand-ins; DaemonSets: how many nodes admit it
    planned_replicas: int = 1  # what the plan asks (the lab may run fewer of a Deployment)
    nodes: list[Node] = field(default_factory=list)  # a DaemonSet's nodes
    skip_await: bool = False
    stand_in: bool = False
    pod_name: str = ""  # a stand-in's pod, named as its operator's StatefulSet names it
    why_not_scheduled: str = ""
    pods: list[PodRuntime] = field(default_factory=list)
    job: JobRuntime | None = None
    started: bool = False
    restarts: int = 0  # pods started after the first ones (a deletion's successors, a rollout's): their names
    strategy: Manifest = field(default_factory=dict)  # spec.strategy or spec.updateStrategy
    # The template's revision (its ReplicaSet's, its ControllerRevision's): 0 as deployed, one more per
    # update that changes it (tests/lab/cloud/apply.py); each pod keeps the revision it was made from.
    revision: int = 0
    templates: dict[int, Manifest] = field(default_factory=dict)  # revision → template, for older pods' successors
    job_spec: Manifest = field(default_factory=dict)  # a stand-in's Job (its backoffLimit), where the plan has none
    # A custom resource an operator plays with a Job (a one-time Backup): its status from the Job's
    # phase, which the plan's pulumi.com/waitFor reads (tests/lab/cloud/backup_standin.py).
    job_status: Callable[[str | None], Manifest] | None = None
    wait_for: str = ""

    @property
    def runs_job(self) -> bool:
        return self.kind == "Job" or self.job_status is not None

    def status(self) -> Manifest:
        """What its operator says in the custom resource's status (a stand-in's that runs a Job)."""
        return self.job_status(self.job.phase if self.job else None) if self.job_status else {}

    @property
    def host_network(self) -> bool:
        return bool(self.template["spec"].get("hostNetwork"))

    @property
    def active_pods(self) -> list[PodRuntime]:
        """The pods its controller counts. A Deployment's ReplicaSet leaves out a pod being deleted (its
        status.replicas counts active pods only: pkg/controller/replicaset, FilterActivePods), so a rolling
        update goes on, and pulumi-kubernetes stops waiting, while an old pod is still in its grace period.
        A StatefulSet's and a DaemonSet's controllers wait until it is gone (its name, its node)."""
        pods = list(self.pods)  # a copy: a deletion's thread removes pods from the list
        return pods if self.kind != "Deployment" else [p for p in pods if not p.terminating]

    @property
    def done(self) -> bool:
        """pulumi-kubernetes' awaiters: a Deployment's and a DaemonSet's pods all ready and of the current
        template (deployment.go; daemonset.go through kstatus, which an OnDelete update meets only once
        someone deleted every old pod); a StatefulSet's too, but after an OnDelete update only ready
        (statefulset.go); a Job complete."""
        if not self.started:
            return False
        if self.job is not None:
            if self.job_status is not None:  # pulumi-kubernetes reads the custom resource, not the Job
                return self.skip_await or awaits.wait_for_met(self.wait_for, {"status": self.status()})
            return self.job.phase == "Complete"
        if self.skip_await:
            return True
        pods = self.active_pods
        ready = len(pods) == self.replicas and all(p.ready for p in pods)
        if self.kind == "StatefulSet" and self.revision and self.strategy.get("type") == "OnDelete":
            return ready
        return ready and all(p.revision == self.revision for p in pods)

    def template_of(self, revision: int) -> Manifest:
        return self.templates.get(revision, self.template)

    @property
    def failed(self) -> str:
        if self.job is not None and self.job.phase == "Failed" and self.job_status is not None:
            # pulumi-kubernetes would wait for its waitFor until the timeout: the lab stops at once, saying so.
            return (
                f"{self.kind} {self.name}: its operator's Job failed ({self.job.failure}), status "
                f"{self.status()['conditions']}; `pulumi up` waits for {self.wait_for} until its timeout"
            )
        if self.job is not None and self.job.phase == "Failed":
            return f"Job {self.name} failed: {self.job.failure}"
        broken = [p for p in self.pods if p.phase == "Failed"]
        return f"{self.kind} {self.name}: pod {broken[0].plan.name} failed: {broken[0].failure}" if broken else ""


@dataclass
class Timing:
    """When `pulumi up` began an object's step and stopped waiting for it (seconds since the deploy began)."""

    kind: str
    name: str
    created: float  # when its step began: a create, or (tests/lab/cloud/apply.py) an update or a replacement
    done: float | None = None
    timeout: float = 0.0
    operation: str = "create"


@dataclass
class Cloud:
    plan: Plan
    cluster: Cluster
    venvs: ReleaseVenvs  # the OpenStack venv of each release the pods run (tests/lab/cloud/images.py)
    out: Path  # build/cloud/<stack>: logs and report
    log: Callable[[str], None]
    # Workloads this machine cannot run, and why: they are not started and count as not run.
    cannot_run: dict[str, str] = field(default_factory=dict)
    cni: CniMode = CniMode.NODE_IPS_NOT_IN_IPBLOCK
    # At most this many pods of a Deployment (None: as many as the plan asks). The lab has two
    # CPUs for every process of the cloud: three of each API is more than they start in time.
    deployment_replicas: int | None = 1
    workloads: dict[str, Workload] = field(default_factory=dict)  # urn → workload
    cron_jobs: list[Workload] = field(default_factory=list)
    objects: dict[tuple[str, str], dict[str, str]] = field(default_factory=dict)
    timings: dict[str, Timing] = field(default_factory=dict)  # urn → its wait
    extra_endpoints: list[Endpoint] = field(default_factory=list)  # the cluster's own pods (DNS, API)
    api: LabApiServer | None = None  # the lab's API server (tests/lab/cloud/run.py): its Secrets and RBAC
    # Volumes of the lab's own pods (the user's pod's copy of the CA bundle: tests/lab/cloud/endpoint_tls.py),
    # which the kubelet's sync writes again as it does the plan's pods'.
    lab_volumes: list[SyncedVolume] = field(default_factory=list)
    deployed: Plan | None = None  # the plan the first deploy created (tests/lab/cloud/apply.py changes `plan`)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _stopping: threading.Event = field(default_factory=threading.Event)

    def __post_init__(self) -> None:
        namespace = self.plan.settings.namespace
        self.domain = self.plan.settings.endpoints.cluster_domain
        self.network_policies = NetworkPolicies(
            [r.revealed["spec"] for r in self.plan.custom if r.kind == "NetworkPolicy"],
            [n.ip for n in self.cluster.nodes],
            self.cni,
            namespace,
            {
                r.revealed["metadata"]["name"]: dict(r.revealed["metadata"].get("labels") or {})
                for r in self.plan.custom
                if r.kind == "Namespace"
            },
        )
        for r in self.plan.custom:
            if r.kind in ("Secret", "ConfigMap"):
                self.objects[(r.kind, r.k8s_name or r.name)] = config_data(r)
        services = [Service.from_manifest(r.revealed, namespace) for r in self.plan.custom if r.kind == "Service"]
        services += _cluster_services()
        for r in self.plan.custom:
            if r.kind in POD_KINDS or r.kind in ("Job", "CronJob"):
                self._add(r)
            elif r.kind in STAND_INS:
                stand_in = STAND_INS[r.kind](r.revealed)
                self._add_stand_in(r, stand_in)
                services += [Service.from_manifest(s, namespace) for s in stand_in.services]
            elif r.kind == "Backup" and backup_standin.one_time(r.revealed):
                self.add_backup(r)
        self.table = ServiceTable(services, self.domain)
        self.factory = PodFactory(self.venvs, self._object, self.out / "logs", namespace, self.domain)
        self.dns = ClusterDns(self.cluster.control_plane, self.cluster.state / "dns", self.domain)
        self.proxy = KubeProxy(self.cluster.nodes, self.table)

    # -- the cluster's view ------------------------------------------------------------------------

    def _add(self, r: Registration) -> None:
        if r.kind is None:
            raise ValueError(f"{r.urn} is not a Kubernetes object: it has no kind to run")
        workload = Workload(r.kind, r.k8s_name or r.name, r.urn, pod_template(r), 1)
        self.set_spec(workload, r)
        if workload.name in self.cannot_run:
            workload.why_not_scheduled = self.cannot_run[workload.name]
        if r.kind == "CronJob":
            self.cron_jobs.append(workload)
        else:
            self.workloads[r.urn] = workload

    def set_spec(self, workload: Workload, r: Registration) -> None:
        """What the workload's spec says beside its template: replicas (the lab's share), the nodes a
        DaemonSet runs on, the update strategy, whether pulumi-kubernetes awaits it."""
        spec = r.revealed["spec"]
        workload.strategy = dict(spec.get("strategy") or spec.get("updateStrategy") or {})
        workload.skip_await = not awaits.awaited(workload.kind, r.revealed) if workload.kind != "CronJob" else False
        if workload.kind in ("StatefulSet", "Deployment"):
            workload.planned_replicas = workload.replicas = int(spec.get("replicas", 1))
        if workload.kind == "Deployment" and self.deployment_replicas is not None:
            workload.replicas = min(workload.planned_replicas, self.deployment_replicas)
        if workload.kind == "DaemonSet" and workload.name not in self.cannot_run:
            try:
                workload.nodes = [
                    n for n in self.cluster.nodes if admits(n, workload.template["spec"], daemonset=True)[0]
                ]
            except SchedulingError as error:
                raise DeployFailedError(f"DaemonSet {workload.name}: {error}") from error
            workload.replicas = len(workload.nodes)
            workload.why_not_scheduled = "" if workload.nodes else "no node of the lab admits it"

    def _add_stand_in(self, r: Registration, stand_in: StandIn) -> None:
        self.objects.update({("Secret", k): v for k, v in stand_in.secrets.items()})
        self.objects.update({("ConfigMap", k): v for k, v in stand_in.config_maps.items()})
        workload = Workload(
            r.kind or "", stand_in.name, r.urn, stand_in.template, 1, stand_in=True, pod_name=stand_in.pod_name
        )
        workload.skip_await = not awaits.awaited(r.kind or "", r.revealed)
        self.workloads[r.urn] = workload

    def add_backup(self, r: Registration) -> None:
        """A one-time Backup as mariadb-operator runs it: a Job, and the status its waitFor reads."""
        ref = r.revealed["spec"]["mariaDbRef"]["name"]
        mariadb = next(m.revealed for m in self.plan.custom if m.kind == "MariaDB" and (m.k8s_name or m.name) == ref)
        job = backup_standin.backup_job(r.revealed, mariadb, self.domain)
        annotations = (r.revealed.get("metadata") or {}).get("annotations") or {}
        self.workloads[r.urn] = Workload(
            "Backup", job.name, r.urn, job.template, 1, stand_in=True, job_spec=job.job_spec,
            job_status=backup_standin.status, wait_for=annotations.get(awaits.WAIT_FOR, ""),
            skip_await=not awaits.awaited("Backup", r.revealed),
        )  # fmt: skip

    def _object(self, kind: str, name: str) -> dict[str, str]:
        if (kind, name) not in self.objects:
            raise PodSpecError(f"{kind} {name} does not exist (the pod would wait in ContainerCreating)")
        return self.objects[(kind, name)]

    def endpoints(self) -> list[Endpoint]:
        found = list(self.extra_endpoints)
        # A copy: an apply (tests/lab/cloud/apply.py) adds and removes workloads while the sync loop reads them.
        for workload in list(self.workloads.values()):
            for pod in workload.pods:
                if pod.phase in ("Pending", "Stopped"):
                    continue
                found.append(pod.endpoint())
        return found

    # -- running -----------------------------------------------------------------------------------

    def start_cluster_services(self, api_server_endpoint: Endpoint | None) -> None:
        """DNS and kube-proxy, before any pod of the plan."""
        self.dns.start(self.table.dns_hosts())
        self.extra_endpoints = [
            Endpoint("kube-dns", self.dns.ip, True, (("k8s-app", "kube-dns"),), (("dns", 53), ("dns-tcp", 53)))
        ]
        if api_server_endpoint is not None:
            self.extra_endpoints.append(api_server_endpoint)
        self.table.update(self.endpoints())
        self.proxy.install()
        self.dns.reload(self.table.dns_hosts())
        threading.Thread(target=self._sync_loop, name="endpoints", daemon=True).start()

    def _sync_loop(self) -> None:
        """The endpoints controller, kube-proxy and CoreDNS: follow the pods' readiness."""
        while not self._stopping.wait(SYNC_SECONDS):
            self.sync()

    def sync(self) -> None:
        with self._lock:
            if self.table.update(self.endpoints()):
                self.proxy.apply()
                self.dns.reload(self.table.dns_hosts())

    def start(self, urn: str) -> None:
        workload = self.workloads[urn]
        workload.started = True
        if workload.why_not_scheduled:
            self.log(f"{workload.kind} {workload.name}: not started ({workload.why_not_scheduled})")
            workload.replicas = 0
            return
        if workload.runs_job:
            workload.job = self._job(workload)
            workload.job.start()
            return
        if workload.kind == "DaemonSet":
            for node in workload.nodes:
                self._start_pod(workload, node, len(workload.pods))
        else:
            for index in range(workload.replicas):
                self._start_pod(workload, self._schedule(workload), index)
        where = ", ".join(sorted({p.node.name for p in workload.pods}))
        self.log(f"{workload.kind} {workload.name}: started {len(workload.pods)} pod(s) on {where}")

    def _schedule(self, workload: Workload) -> Node:
        running = [(p.node.name, p.plan.labels) for w in list(self.workloads.values()) for p in w.pods]
        try:
            node, why = place(workload.template["spec"], self.cluster.nodes, running)
        except SchedulingError as error:
            raise PodSpecError(str(error)) from error
        if node is None:
            raise PodSpecError(f"{workload.kind} {workload.name} stays Pending: {why}")
        return self.cluster.node(node.name)

    def _start_pod(
        self, workload: Workload, node: Node, index: int, attempt: int = 0, revision: int | None = None
    ) -> PodRuntime:
        pod = self.pod(workload, node, index, attempt, revision)
        workload.pods.append(pod)
        pod.start()
        return pod

    def pod(
        self, workload: Workload, node: Node, index: int, attempt: int = 0, revision: int | None = None
    ) -> PodRuntime:
        revision = workload.revision if revision is None else revision
        name = self.pod_name(workload, node, index, attempt)
        ip = node.ip if workload.host_network else node.allocate_ip()
        template = workload.template_of(revision)
        plan = self.factory.build(workload.kind, workload.name, template, name, ip, node, index)
        return PodRuntime(plan, node, self.log, on_network=self._enforce_policies, revision=revision)

    def pod_name(self, workload: Workload, node: Node, index: int, attempt: int = 0) -> str:
        """A StatefulSet's pod is `<name>-<ordinal>` whoever replaces it (its DNS name and its claims go by it);
        a stand-in's as its operator's StatefulSet names it; other pods get a new name per attempt and node."""
        if workload.pod_name:
            return workload.pod_name
        if workload.kind == "StatefulSet":
            return self.factory.pod_name(workload.kind, workload.name, index)
        unique = index + attempt * 100 + (node.index * 1000 if workload.kind == "DaemonSet" else 0)
        return self.factory.pod_name(workload.kind, workload.name, unique)

    def start_successor(self, workload: Workload, index: int, node: Node | None, revision: int) -> PodRuntime:
        """A pod its controller starts after the first ones: of `revision`, on `node` (a DaemonSet's) or
        where the scheduler places it."""
        workload.restarts += 1
        where = node if node is not None else self._schedule(workload)
        pod = self._start_pod(workload, where, index, attempt=workload.restarts, revision=revision)
        self.sync()
        return pod

    def _enforce_policies(self, plan: PodPlan) -> None:
        netns = None if plan.host_network else f"pod-{plan.name}"
        node = self.cluster.node(plan.node)
        address = PodAddress(plan.name, plan.ip, plan.labels, netns, node.name, (node.ip, node.pod_gateway))
        self.network_policies.add(address)

    def _job(self, workload: Workload) -> JobRuntime:
        job_spec = self._job_spec(workload)

        def make_pod(attempt: int) -> PodRuntime:
            return self.pod(workload, self._schedule(workload), 0, attempt)

        return JobRuntime(
            workload.name,
            make_pod,
            backoff_limit=int(job_spec.get("backoffLimit", 6)),
            active_deadline=job_spec.get("activeDeadlineSeconds"),
            log=self.log,
        )

    def _job_spec(self, workload: Workload) -> Manifest:
        if workload.job_spec:
            return workload.job_spec
        for r in self.plan.custom:
            if (r.k8s_name or r.name) == workload.name and r.kind in ("Job", "CronJob"):
                spec = r.revealed["spec"]
                return spec["jobTemplate"]["spec"] if r.kind == "CronJob" else spec
        return {}

    # -- pulumi up -----------------------------------------------------------------------------------

    def _object_done(self, r: Registration) -> bool:
        """Would pulumi-kubernetes stop waiting for this object now?"""
        if r.urn in self.workloads:
            return self.workloads[r.urn].done
        if r.kind == "Service" and awaits.awaited("Service", r.revealed):
            endpoints = self.table.endpoints.get(r.k8s_name or r.name, ())
            return bool(endpoints) and all(e.ready for e in endpoints)
        return True  # claims are bound at once by the lab's provisioner; the rest is created

    def deploy(self) -> None:
        """Create everything in graph order; raise at the first failed Job or pod, or a wait that times out."""
        self.deployed = self.plan  # what `timings` measured, whatever an apply makes of the cloud later
        self.walk(self.plan.custom, self.plan.dependencies, self._create, self._object_done, self.timings)

    def _create(self, r: Registration) -> None:
        if r.urn in self.workloads:
            try:
                self.start(r.urn)
            except (PodSpecError, KeyError, OSError) as error:
                # What the kubelet would refuse, or what this harness cannot reproduce.
                raise DeployFailedError(f"{self.workloads[r.urn].name}: {error}") from error

    def walk(
        self,
        resources: list[Registration],
        dependencies: Mapping[str, list[str]],
        begin: Callable[[Registration], None],
        done: Callable[[Registration], bool],
        timings: dict[str, Timing],
        operations: Mapping[str, str] | None = None,
    ) -> None:
        """The engine's walk, for a first deploy and an update alike: each object's step begun once the
        steps of everything it depends on are done, and done when `done` says pulumi-kubernetes stops
        waiting; raise at the first failed Job or pod, or a wait past its timeout. `operations` names each
        object's step (create by default: its timeout is customTimeouts' of that operation)."""
        started = time.monotonic()
        known = {r.urn for r in resources}
        finished: set[str] = set()
        pending = {r.urn: r for r in resources}
        while pending:
            now = time.monotonic() - started
            for urn, r in sorted(pending.items()):
                if not set(dependencies.get(urn, ())) & known <= finished:
                    continue
                if urn not in timings:
                    operation = (operations or {}).get(urn, "create")
                    metadata = r.revealed.get("metadata") or {}
                    # A replacement waits as the create of the new object does (its old one is gone).
                    waits = {"replace": "create", "same": "update"}.get(operation, operation)
                    timeout = awaits.timeout_seconds(r.kind or "", metadata, r.custom_timeouts, waits)
                    # Stamped now, not at the pass's start: what it waited for may have finished in this pass.
                    timings[urn] = Timing(r.kind or r.type, r.k8s_name or r.name, time.monotonic() - started,
                                          timeout=timeout, operation=operation)  # fmt: skip
                    begin(r)
                timing = timings[urn]
                if done(r):
                    timing.done = time.monotonic() - started
                    finished.add(urn)
                    del pending[urn]
                elif now - timing.created > timing.timeout:
                    raise DeployFailedError(
                        f"{timing.kind} {timing.name}: pulumi-kubernetes stops waiting after {timing.timeout:.0f}s "
                        f"({timing.operation} begun at {timing.created:.0f}s): {self._why_waiting(r)}"
                    )
            failures = [w.failed for w in self.workloads.values() if w.failed]
            if failures:
                raise DeployFailedError("; ".join(failures))
            time.sleep(0.5)

    def _why_waiting(self, r: Registration) -> str:
        if r.urn in self.workloads:
            w = self.workloads[r.urn]
            pods = w.active_pods
            current = sum(p.revision == w.revision for p in pods)
            return f"{sum(p.ready for p in pods)}/{w.replicas} pods ready, {current} of the current template"
        return "Service does not target any Pods (no Ready endpoint, or some unready)"

    def run_cron_jobs(self, timeout: float, only: Callable[[Workload], bool] = lambda w: True) -> None:
        """Each CronJob's Job once, as if its schedule fired now (those this machine can run)."""
        for workload in self.cron_jobs:
            if workload.why_not_scheduled or not only(workload):
                if workload.why_not_scheduled:
                    self.log(f"CronJob {workload.name}: not run ({workload.why_not_scheduled})")
                continue
            workload.started = True
            workload.job = self._job(workload)
            workload.job.start()
        deadline = time.monotonic() + timeout
        while any(not w.job.done for w in self.cron_jobs if w.job) and time.monotonic() < deadline:
            time.sleep(0.5)

    # -- controllers ---------------------------------------------------------------------------------

    def delete_pod(self, name: str) -> bool:
        """`kubectl delete pod`: the kubelet stops it; its DaemonSet or ReplicaSet starts a successor, of the
        current template (a StatefulSet's below its partition: of the pod's own revision)."""
        for workload in list(self.workloads.values()):
            for pod in list(workload.pods):
                if pod.plan.name != name:
                    continue
                replaced = pod.terminating  # deleted already (a roll's): its controller made its successor
                self.remove_pod(workload, pod)
                if replaced:
                    return True
                node = pod.node if workload.kind == "DaemonSet" else None
                self.start_successor(workload, pod.plan.index, node, self._successor_revision(workload, pod))
                return True
        return False

    @staticmethod
    def _successor_revision(workload: Workload, pod: PodRuntime) -> int:
        """A StatefulSet's pod below its RollingUpdate partition comes back at the revision it had; any
        other pod at the current template (Kubernetes, StatefulSet partitioned rolling updates)."""
        rolling = workload.strategy.get("rollingUpdate") or {}
        partitioned = workload.kind == "StatefulSet" and workload.strategy.get("type") in (None, "RollingUpdate")
        return pod.revision if partitioned and pod.plan.index < int(rolling.get("partition", 0)) else workload.revision

    def remove_pod(self, workload: Workload, pod: PodRuntime) -> None:
        """The kubelet stops the pod (preStop, SIGTERM, SIGKILL after its grace) and removes its sandbox. Its
        Services stop sending it connections first: on a cluster the endpoints controller and kube-proxy
        act on the deletion as the kubelet does, so a pod in its grace period takes no new calls."""
        with self._lock:  # two deleters (a roll's, a replacement's): the second waits for the first
            earlier = pod.deletion
            if earlier is None:
                deletion = pod.deletion = threading.Event()
        if earlier is not None:
            earlier.wait()
            return
        try:
            self._remove_pod(workload, pod)
        finally:
            deletion.set()

    def _remove_pod(self, workload: Workload, pod: PodRuntime) -> None:
        started = time.monotonic()
        pod.terminating = True
        pod.deleted_at = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        self.sync()
        pod.stop()
        self.log(f"pod {pod.plan.name}: deleted after {time.monotonic() - started:.0f}s")
        self.network_policies.remove(pod.plan.name)
        # The kubelet removes the pod's sandbox, its network namespace with it; a StatefulSet's
        # or an operator's successor of the same name needs it gone first.
        if not pod.plan.host_network:
            pod.node.delete_pod_network(f"pod-{pod.plan.name}")
        if pod in workload.pods:
            workload.pods.remove(pod)
        self.sync()

    def all_pods(self) -> list[PodRuntime]:
        workloads = [*list(self.workloads.values()), *self.cron_jobs]
        pods = [p for w in workloads for p in list(w.pods)]
        pods += [p for w in workloads if w.job for p in list(w.job.pods)]
        return pods

    # -- what the lab's API server serves (tests/lab/cloud/apiserver.py) ----------------------------------

    def api_nodes(self) -> list[Manifest]:
        return [n.as_kubernetes() for n in self.cluster.nodes]

    def api_patch_node(self, name: str, patched: Manifest) -> None:
        node = self.cluster.node(name)
        labels = dict(patched["metadata"].get("labels") or {})
        labels.pop("kubernetes.io/hostname", None)
        node.labels = labels
        node.annotations = dict(patched["metadata"].get("annotations") or {})
        node.unschedulable = bool((patched.get("spec") or {}).get("unschedulable"))
        node.taints = list((patched.get("spec") or {}).get("taints") or [])

    def api_pods(self, namespace: str) -> list[Manifest]:
        if namespace != self.plan.settings.namespace:
            return []
        return [p.as_kubernetes(namespace) for p in self.all_pods() if p.phase not in ("Stopped",)]

    def api_delete_pod(self, namespace: str, name: str) -> bool:
        return namespace == self.plan.settings.namespace and self.delete_pod(name)

    def api_update_secret(self, namespace: str, name: str, data: Mapping[str, str]) -> None:
        """The Secret changed: the kubelet writes it again into the volumes of the pods that mount it."""
        self.objects[("Secret", name)] = dict(data)
        self.kubelet_resync("Secret", name)

    def kubelet_resync(self, kind: str, name: str) -> None:
        """After its sync period the kubelet writes a changed Secret or ConfigMap again into the volumes of
        the running pods that mount it (not subPath mounts: those keep what their pod started with)."""

        def sync() -> None:
            time.sleep(KUBELET_SYNC_SECONDS)
            data = self.objects.get((kind, name))
            if data is None:  # deleted meanwhile: the kubelet keeps what it wrote
                return
            for pod in self.all_pods():
                for volume in pod.plan.synced_volumes:
                    if (volume.kind, volume.name) == (kind, name) and pod.phase == "Running":
                        volume.write(data)
                        self.log(f"kubelet: {kind} {name} written again into pod {pod.plan.name}")
            for volume in self.lab_volumes:
                if (volume.kind, volume.name) == (kind, name):
                    volume.write(data)
                    self.log(f"kubelet: {kind} {name} written again into {volume.target}")

        threading.Thread(target=sync, daemon=True).start()

    def workload(self, name: str) -> Workload:
        return next(w for w in self.workloads.values() if w.name == name)

    def stop(self) -> None:
        self._stopping.set()
        for pod in self.all_pods():
            pod.kill()
        self.dns.stop()


def _cluster_services() -> list[Service]:
    """The Services every cluster has: the API server's and the resolver's."""
    return [
        Service("kubernetes", "default", (("component", "apiserver"),), (Port("https", 443, API_SERVER_PORT),),
                cluster_ip=API_SERVER_ADDRESS),
        Service("kube-dns", "kube-system", (("k8s-app", "kube-dns"),),
                (Port("dns", 53, 53, "UDP"), Port("dns-tcp", 53, 53, "TCP")), cluster_ip=DNS_ADDRESS),
    ]  # fmt: skip


def api_server_endpoint(node: Node) -> Endpoint:
    return Endpoint("kube-apiserver", node.ip, True, (("component", "apiserver"),), (("https", API_SERVER_PORT),))


def _labels(template: Manifest) -> dict[str, Any]:
    return dict((template.get("metadata") or {}).get("labels") or {})


def pod_template(r: Registration) -> Manifest:
    """The pod template of a workload, Job or CronJob, as its controller makes pods from it."""
    spec = r.revealed["spec"]
    template: Manifest = spec["jobTemplate"]["spec"]["template"] if r.kind == "CronJob" else spec["template"]
    if r.kind == "StatefulSet":
        # The StatefulSet controller names each pod's host within its governing Service.
        template = {**template, "spec": {**template["spec"], "subdomain": spec["serviceName"]}}
    return template


def config_data(r: Registration) -> dict[str, str]:
    """A Secret's or ConfigMap's keys as a pod's volume shows them."""
    return secret_data(r.revealed) if r.kind == "Secret" else dict(r.revealed.get("data") or {})
