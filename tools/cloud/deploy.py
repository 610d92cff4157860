"""Deploys a plan onto the node as `pulumi up` and the cluster would: object by object, in graph order.

An object starts once everything it depends on (the plan's engine dependencies) is done, and
is done when pulumi-kubernetes would stop waiting for it: a Job when it completed, a
Deployment or StatefulSet when its pods are Ready, a DaemonSet when its pod on this node is
Ready (at once when it is not scheduled here or carries `pulumi.com/skipAwait`), a custom
resource with `pulumi.com/waitFor` when the operator's pods are Ready, anything else at once.
Deployments run one pod (this machine is one node), StatefulSets all their replicas (their
pods have names others address), DaemonSets one pod if their selector and affinity admit the node.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tools.cloud.kubelet import JobRuntime, PodRuntime
from tools.cloud.netpol import NetworkPolicies, PodAddress
from tools.cloud.node import Node
from tools.cloud.pods import Manifest, PodFactory, PodPlan, PodSpecError, secret_data
from tools.cloud.standins import STAND_INS, StandIn
from tools.plan import Plan
from tools.runtime import Registration

POD_KINDS = ("Deployment", "DaemonSet", "StatefulSet")
SKIP_AWAIT = "pulumi.com/skipAwait"


class DeployFailedError(RuntimeError):
    pass


def admits(node_labels: dict[str, str], spec: Manifest) -> tuple[bool, str]:
    """Would the scheduler place this pod on the node? (nodeSelector and required node affinity)."""
    for key, value in (spec.get("nodeSelector") or {}).items():
        if node_labels.get(key) != value:
            return False, f"nodeSelector {key}={value} does not match the node"
    required = ((spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution"
    )
    if required:
        terms = required.get("nodeSelectorTerms", [])
        if not any(all(_matches(node_labels, e) for e in term.get("matchExpressions", [])) for term in terms):
            return False, "required node affinity excludes the node"
    return True, ""


def _matches(labels: dict[str, str], expression: Manifest) -> bool:
    key, operator, values = expression["key"], expression["operator"], expression.get("values", [])
    return {
        "In": lambda: labels.get(key) in values,
        "NotIn": lambda: labels.get(key) not in values,
        "Exists": lambda: key in labels,
        "DoesNotExist": lambda: key not in labels,
    }[operator]()


@dataclass
class Workload:
    """One object of the plan that runs pods (or is played by one): its runtime state."""

    kind: str
    name: str
    template: Manifest
    replicas: int
    scheduled: bool = True
    skip_await: bool = False
    why_not_scheduled: str = ""
    ips: list[str] = field(default_factory=list)
    pods: list[PodRuntime] = field(default_factory=list)
    job: JobRuntime | None = None
    started: bool = False

    @property
    def host_network(self) -> bool:
        return bool(self.template["spec"].get("hostNetwork"))

    @property
    def done(self) -> bool:
        if not self.started:
            return False
        if self.job is not None:
            return self.job.phase == "Complete"
        if not self.scheduled or self.skip_await:
            return True
        return len(self.pods) == self.replicas and all(p.ready for p in self.pods)

    @property
    def failed(self) -> str:
        if self.job is not None and self.job.phase == "Failed":
            return f"Job {self.name} failed: {self.job.failure}"
        broken = [p for p in self.pods if p.phase == "Failed"]
        return f"{self.kind} {self.name}: pod {broken[0].plan.name} failed: {broken[0].failure}" if broken else ""


@dataclass
class Cloud:
    plan: Plan
    node: Node
    venv: Path
    out: Path  # build/cloud/<stack>: logs and report
    log: Callable[[str], None]
    # Workloads this machine cannot run, and why: they are not started and count as not run.
    cannot_run: dict[str, str] = field(default_factory=dict)
    workloads: dict[str, Workload] = field(default_factory=dict)  # urn → workload
    cron_jobs: list[Workload] = field(default_factory=list)
    services: dict[str, str] = field(default_factory=dict)  # host name → IP
    objects: dict[tuple[str, str], dict[str, str]] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)  # workload → seconds from start to done
    _done: set[str] = field(default_factory=set)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def __post_init__(self) -> None:
        self.network_policies = NetworkPolicies(
            self.node, [r.revealed["spec"] for r in self.plan.custom if r.kind == "NetworkPolicy"]
        )
        self.factory = PodFactory(
            self.node, self.venv, self._object, self.hosts, self.out / "logs", self.plan.settings.namespace
        )
        for r in self.plan.custom:
            if r.kind in ("Secret", "ConfigMap"):
                data = secret_data(r.revealed) if r.kind == "Secret" else dict(r.revealed.get("data") or {})
                self.objects[(r.kind, r.k8s_name or r.name)] = data
        stand_ins: list[tuple[Registration, StandIn]] = []
        for r in self.plan.custom:
            if r.kind in POD_KINDS or r.kind in ("Job", "CronJob"):
                self._add(r)
            elif r.kind in STAND_INS:
                stand_in = STAND_INS[r.kind](r.revealed)
                stand_ins.append((r, stand_in))
                self.objects.update({("Secret", k): v for k, v in stand_in.secrets.items()})
                self.objects.update({("ConfigMap", k): v for k, v in stand_in.config_maps.items()})
                self.workloads[r.urn] = Workload(r.kind, stand_in.name, stand_in.template, 1)
        self._address_pods()
        self._name_services(stand_ins)

    # -- the cluster's view ------------------------------------------------------------------------

    def _add(self, r: Registration) -> None:
        if r.kind is None:
            raise ValueError(f"{r.urn} is not a Kubernetes object: it has no kind to run")
        spec = r.revealed["spec"]
        template = spec["jobTemplate"]["spec"]["template"] if r.kind == "CronJob" else spec["template"]
        replicas = int(spec.get("replicas", 1)) if r.kind == "StatefulSet" else 1
        workload = Workload(r.kind, r.k8s_name or r.name, template, replicas)
        workload.skip_await = (r.revealed["metadata"].get("annotations") or {}).get(SKIP_AWAIT) == "true"
        if r.kind == "DaemonSet":
            workload.scheduled, workload.why_not_scheduled = admits(self.node.labels, template["spec"])
        if workload.name in self.cannot_run:
            workload.scheduled, workload.why_not_scheduled = False, self.cannot_run[workload.name]
        if r.kind == "CronJob":
            self.cron_jobs.append(workload)
        else:
            self.workloads[r.urn] = workload

    def _address_pods(self) -> None:
        for workload in self.workloads.values():
            if workload.kind in ("Deployment", "StatefulSet", "MariaDB", "RabbitmqCluster"):
                workload.ips = [
                    self.node.ip if workload.host_network else self.node.allocate_ip() for _ in range(workload.replicas)
                ]

    def _name_services(self, stand_ins: list[tuple[Registration, StandIn]]) -> None:
        ns, domain = self.plan.settings.namespace, self.plan.settings.endpoints.cluster_domain
        by_name = {w.name: w for w in self.workloads.values()}
        for r in self.plan.custom:
            if r.kind != "Service":
                continue
            selector = r.revealed["spec"].get("selector") or {}
            backing = [w for w in self.workloads.values() if w.ips and selector.items() <= _labels(w.template).items()]
            if backing:
                self._service(r.k8s_name or r.name, backing[0].ips[0], ns, domain)
                # A StatefulSet's pods are named through its (headless) governing Service.
                for w in backing:
                    if w.kind == "StatefulSet":
                        for index, ip in enumerate(w.ips):
                            self._service(f"{w.name}-{index}.{r.k8s_name}", ip, ns, domain)
        for _, stand_in in stand_ins:
            for service in stand_in.services:
                self._service(service, by_name[stand_in.name].ips[0], ns, domain)

    def _service(self, name: str, ip: str, ns: str, domain: str) -> None:
        for host in (name, f"{name}.{ns}", f"{name}.{ns}.svc", f"{name}.{ns}.svc.{domain}"):
            self.services[host] = ip

    def hosts(self, hostname: str, ip: str) -> str:
        lines = ["127.0.0.1\tlocalhost", "::1\tlocalhost ip6-localhost ip6-loopback", f"{ip}\t{hostname}"]
        by_ip: dict[str, list[str]] = {}
        for host, address in self.services.items():
            by_ip.setdefault(address, []).append(host)
        lines += [f"{address}\t{' '.join(hosts)}" for address, hosts in by_ip.items()]
        return "\n".join(lines) + "\n"

    def _object(self, kind: str, name: str) -> dict[str, str]:
        if (kind, name) not in self.objects:
            raise PodSpecError(f"{kind} {name} does not exist (the pod would wait in ContainerCreating)")
        return self.objects[(kind, name)]

    # -- running -----------------------------------------------------------------------------------

    def start(self, urn: str) -> None:
        workload = self.workloads[urn]
        workload.started = True
        self.seconds.setdefault(f"start:{workload.name}", time.monotonic())
        if not workload.scheduled:
            self.log(f"{workload.kind} {workload.name}: not started on {self.node.name} ({workload.why_not_scheduled})")
            return
        if workload.kind == "Job":
            workload.job = self._job(workload)
            workload.job.start()
            return
        for index in range(workload.replicas):
            pod = self.pod(workload, index)
            workload.pods.append(pod)
            pod.start()
        self.log(f"{workload.kind} {workload.name}: started {workload.replicas} pod(s)")

    def pod(self, workload: Workload, index: int, attempt: int = 0) -> PodRuntime:
        name = self.factory.pod_name(workload.kind, workload.name, index + attempt * 100)
        # Workloads behind Services got their addresses up front (their names resolve from the start).
        known = workload.ips[index] if workload.ips else None
        ip = known or (self.node.ip if workload.host_network else self.node.allocate_ip())
        plan = self.factory.build(workload.kind, workload.name, workload.template, name, ip)
        return PodRuntime(plan, self.node, self.log, on_network=self._enforce_policies)

    def _enforce_policies(self, plan: PodPlan) -> None:
        netns = None if plan.host_network else f"pod-{plan.name}"
        self.network_policies.add(PodAddress(plan.name, plan.ip, plan.labels, netns))

    def _job(self, workload: Workload) -> JobRuntime:
        job_spec = self._job_spec(workload)
        return JobRuntime(
            workload.name,
            lambda attempt: self.pod(workload, 0, attempt),
            backoff_limit=int(job_spec.get("backoffLimit", 6)),
            active_deadline=job_spec.get("activeDeadlineSeconds"),
            log=self.log,
        )

    def _job_spec(self, workload: Workload) -> Manifest:
        for r in self.plan.custom:
            if (r.k8s_name or r.name) == workload.name and r.kind in ("Job", "CronJob"):
                spec = r.revealed["spec"]
                return spec["jobTemplate"]["spec"] if r.kind == "CronJob" else spec
        return {}

    def deploy(self, timeout: float) -> None:
        """Start everything in graph order; raise at the first failed Job or pod, or after `timeout`."""
        started = time.monotonic()
        pending = {r.urn for r in self.plan.custom}
        while pending:
            for urn in sorted(pending):
                if not set(self.plan.dependencies.get(urn, ())) <= self._done:
                    continue
                if urn in self.workloads and not self.workloads[urn].started:
                    try:
                        self.start(urn)
                    except (PodSpecError, KeyError, OSError) as error:
                        # What the kubelet would refuse, or what this harness cannot reproduce.
                        raise DeployFailedError(f"{self.workloads[urn].name}: {error}") from error
                if urn not in self.workloads or self.workloads[urn].done:
                    self._done.add(urn)
                    pending.discard(urn)
                    if urn in self.workloads:
                        name = self.workloads[urn].name
                        self.seconds[name] = time.monotonic() - self.seconds.pop(f"start:{name}", started)
            failures = [w.failed for w in self.workloads.values() if w.failed]
            if failures:
                raise DeployFailedError("; ".join(failures))
            if time.monotonic() - started > timeout:
                waiting = sorted(self.workloads[u].name for u in pending if u in self.workloads)
                raise DeployFailedError(f"not done after {timeout:.0f}s: {', '.join(waiting)}")
            time.sleep(0.5)

    def run_cron_jobs(self, timeout: float) -> None:
        """Each CronJob's Job once, as if its schedule fired now (those this machine can run)."""
        for workload in self.cron_jobs:
            if not workload.scheduled:
                self.log(f"CronJob {workload.name}: not run ({workload.why_not_scheduled})")
                continue
            workload.started = True
            workload.job = self._job(workload)
            workload.job.start()
        deadline = time.monotonic() + timeout
        while any(not w.job.done for w in self.cron_jobs if w.job) and time.monotonic() < deadline:
            time.sleep(0.5)

    def all_pods(self) -> list[PodRuntime]:
        pods = [p for w in [*self.workloads.values(), *self.cron_jobs] for p in w.pods]
        pods += [p for w in [*self.workloads.values(), *self.cron_jobs] if w.job for p in w.job.pods]
        return pods

    def workload(self, name: str) -> Workload:
        return next(w for w in self.workloads.values() if w.name == name)

    def stop(self) -> None:
        for pod in self.all_pods():
            pod.kill()


def _labels(template: Manifest) -> dict[str, Any]:
    return dict((template.get("metadata") or {}).get("labels") or {})
