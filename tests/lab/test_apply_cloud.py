"""apply() end to end on the lab's Cloud, its pods test doubles: the real walk, engine steps, controllers and
record, and --against's prediction for the same two plans checked against it.

A unit test cannot start the lab's pods (namespaces, cgroups, the OpenStack code: tests/cloud does), so
the Cloud here is the real one on nodes that are never created, with its kubelet replaced by FakePod
(ready a moment after it starts; a Job's pod succeeds then) and kube-proxy and DNS by no-ops. The plans
are small hand-made ones with the staging stack's settings.
"""

from __future__ import annotations

import dataclasses
import json
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from tests.conftest import plan_of
from tests.lab.cloud import apply_scenario
from tests.lab.cloud.apply import apply
from tests.lab.cloud.cluster import Cluster
from tests.lab.cloud.deploy import Cloud, Workload
from tests.lab.cloud.images import ReleaseVenvs
from tests.lab.cloud.node import Node
from tests.lab.cloud.prediction import not_compared, predicted_vs_actual
from tests.lab.cloud.services import Endpoint
from tools import plan_diff, views
from tools.plan import Plan
from tools.runtime import Registration

NAMESPACE = "openstack"
START_SECONDS = 0.3  # a FakePod is ready (a Job's: done) this long after it started
# Short waits: a step that never completes fails the apply (and the test) in seconds, not ten minutes.
TIMEOUTS = {"create": "20s", "update": "20s", "delete": "20s"}


class FakePod:
    """A pod as the lab's controllers, waits and reports read it (a test double for kubelet.PodRuntime)."""

    def __init__(self, name: str, workload: Workload, node: Node, index: int, revision: int):
        labels = dict((workload.template.get("metadata") or {}).get("labels") or {})
        self.plan = SimpleNamespace(name=name, index=index, host_network=True, labels=labels, synced_volumes=[])
        self.node, self.revision, self.job = node, revision, workload.runs_job
        self.phase, self.failure, self.restarts = "Pending", "", {"c": 0}
        self.terminating = False
        self.deletion: threading.Event | None = None
        self.deleted_at = ""
        self.image = workload.template["spec"]["containers"][0]["image"]
        self._started = 0.0

    def start(self) -> None:
        self.phase, self._started = "Running", time.monotonic()

    def _up(self) -> bool:
        return self.phase in ("Running", "Succeeded") and time.monotonic() > self._started + START_SECONDS

    @property
    def ready(self) -> bool:
        return not self.job and self._up()

    @property
    def done(self) -> bool:
        if self.job and self._up():
            self.phase = "Succeeded"
        return self.phase in ("Succeeded", "Failed")

    def stop(self) -> None:
        self.phase = "Stopped"

    def endpoint(self) -> Endpoint:
        ready = self.ready and not self.terminating  # as kubelet.PodRuntime's
        return Endpoint(self.plan.name, self.node.ip, ready, tuple(sorted(self.plan.labels.items())))


def k8s(kind: str, name: str, group: str, body: dict[str, Any], dependencies: list[str] | None = None,
        **options: Any) -> Registration:  # fmt: skip
    manifest = {"kind": kind, "metadata": {"name": name, "namespace": NAMESPACE}, **body}
    return Registration(
        urn=f"urn:pulumi:staging::openstack::kubernetes:{group}:{kind}::{name}", type=f"kubernetes:{group}:{kind}",
        name=name, parent="", custom=True, remote=False, dependencies=dependencies or [], inputs=manifest,
        revealed=manifest, custom_timeouts=TIMEOUTS, **options,
    )  # fmt: skip


def template(name: str, image: str) -> dict[str, Any]:
    return {"metadata": {"labels": {"app": name}}, "spec": {"containers": [{"name": "c", "image": image}]}}


def plan(version: int, keep_old: bool = True) -> Plan:
    """Version 2 changes the config Secret, the images of the API, the db-sync Job and the OnDelete agent,
    a Service port; drops `old-worker`; adds a ConfigMap."""
    image = f"quay.io/openstack.kolla/keystone:{version}"
    etc = k8s("Secret", "keystone-etc", "core/v1", {"stringData": {"keystone.conf": f"[DEFAULT]\nx = {version}\n"}})
    sync = k8s("Job", "keystone-db-sync", "batch/v1", {"spec": {"template": template("sync", image)}})
    strategy = {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 0, "maxSurge": 1}}
    api = k8s("Deployment", "keystone-api", "apps/v1", {"spec": {
        "replicas": 1, "selector": {"matchLabels": {"app": "keystone-api"}}, "strategy": strategy,
        "template": template("keystone-api", image)}})  # fmt: skip
    agent = k8s("DaemonSet", "agent", "apps/v1", {
        "metadata": {"name": "agent", "namespace": NAMESPACE, "annotations": {"pulumi.com/skipAwait": "true"}},
        "spec": {"selector": {"matchLabels": {"app": "agent"}}, "updateStrategy": {"type": "OnDelete"},
                 "template": template("agent", image)}})  # fmt: skip
    service = k8s("Service", "keystone-api", "core/v1", {"spec": {
        "selector": {"app": "keystone-api"}, "ports": [{"name": "api", "port": 5000 + version}]}})  # fmt: skip
    worker = k8s("Deployment", "old-worker", "apps/v1", {"spec": {
        "replicas": 1, "selector": {"matchLabels": {"app": "w"}}, "template": template("w", "w:1")}})  # fmt: skip
    extra = k8s("ConfigMap", "extra", "core/v1", {"data": {"a": "b"}})
    cache = k8s("StatefulSet", "cache", "apps/v1", {"spec": {
        "replicas": 2, "serviceName": "cache", "selector": {"matchLabels": {"app": "cache"}},
        "updateStrategy": {"type": "RollingUpdate"}, "template": template("cache", image)}})  # fmt: skip
    registrations = [etc, sync, api, agent, service, cache, *([worker] if version == 1 else [extra])]
    dependencies = {sync.urn: [etc.urn], api.urn: [etc.urn, sync.urn], service.urn: [api.urn]}
    if version == 1:
        dependencies[worker.urn] = [etc.urn]
    return Plan("staging", plan_of("staging").settings, registrations, dependencies)


@pytest.fixture
def cloud(tmp_path: Path) -> Iterator[Cloud]:
    cluster = Cluster(tmp_path, [Node("control-plane", 1, tmp_path / "cp", {}), Node("compute-1", 2, tmp_path / "c1",
                                                                                    {})])  # fmt: skip
    lines: list[str] = []
    found = Cloud(plan(1), cluster, ReleaseVenvs("2026.1", {"2026.1": tmp_path}), tmp_path, lines.append)
    found.proxy = SimpleNamespace(apply=lambda: None)  # type: ignore[assignment]  # no iptables here
    found.dns = SimpleNamespace(reload=lambda hosts: None, stop=lambda: None)  # type: ignore[assignment]

    def fake_pod(workload: Workload, node: Node, index: int, attempt: int = 0, revision: int | None = None) -> Any:
        revision = workload.revision if revision is None else revision
        name = found.pod_name(workload, node, index, attempt)
        return FakePod(name, Workload(workload.kind, workload.name, "", workload.template_of(revision), 1,
                                      job_status=workload.job_status), node, index, revision)  # fmt: skip

    found.pod = fake_pod  # type: ignore[method-assign]
    # The endpoints controller (tests/lab/cloud/deploy.py _sync_loop): a Service is done once it has Ready endpoints.
    threading.Thread(target=found._sync_loop, daemon=True).start()
    found.deploy()
    yield found
    found._stopping.set()


def test_apply_does_what_pulumi_up_does_and_what_against_predicted(cloud: Cloud) -> None:
    before = {w.name: [p.plan.name for p in w.pods] for w in cloud.workloads.values()}
    first_sync_run = cloud.workload("keystone-db-sync").job
    old, new = cloud.plan, plan(2)
    applied = apply(cloud, new)
    assert applied.error == ""
    assert {op: sorted(refs) for op, refs in applied.objects().items()} == {
        "replace": ["Job/keystone-db-sync", "Secret/keystone-etc"],
        "update": ["DaemonSet/agent", "Deployment/keystone-api", "Service/keystone-api", "StatefulSet/cache"],
        "delete": ["Deployment/old-worker"],
        "create": ["ConfigMap/extra"],
    }
    # The Job ran again, with the new image; the API rolled to the new image; the OnDelete agent kept its pod.
    sync = cloud.workload("keystone-db-sync")
    assert sync.job is not first_sync_run and sync.job is not None and sync.job.phase == "Complete"
    assert applied.jobs_run == {"Job/keystone-db-sync": "Complete"}
    api = cloud.workload("keystone-api")
    assert [p.image for p in api.active_pods] == ["quay.io/openstack.kolla/keystone:2"]  # type: ignore[attr-defined]
    assert api.active_pods[0].plan.name not in before["keystone-api"]
    assert set(applied.rolled) == {"Deployment/keystone-api", "StatefulSet/cache"}
    assert applied.rolled["Deployment/keystone-api"].deleted == before["keystone-api"]
    # A StatefulSet's pods are replaced one at a time, the highest ordinal first, each under its own name.
    assert applied.rolled["StatefulSet/cache"].deleted == ["cache-1", "cache-0"]
    assert applied.rolled["StatefulSet/cache"].started == ["cache-1", "cache-0"]
    assert sorted(p.plan.name for p in cloud.workload("cache").pods) == ["cache-0", "cache-1"]
    agent = cloud.workload("agent")
    assert [p.plan.name for p in agent.pods] == before["agent"] and agent.revision == 1 and agent.pods[0].revision == 0
    # The data and the Service as the new plan has them; the removed Deployment gone with its pods.
    assert cloud.objects[("Secret", "keystone-etc")] == {"keystone.conf": "[DEFAULT]\nx = 2\n"}
    assert cloud.table.service("keystone-api").ports[0].port == 5002
    assert "old-worker" not in {w.name for w in cloud.workloads.values()}
    # The engine's order: the Secret, then the Job it configures, then the API that waits for both.
    steps = {f"{t.kind}/{t.name}": t for t in applied.timings.values() if t.operation != "same"}
    assert steps["Job/keystone-db-sync"].created >= steps["Secret/keystone-etc"].done  # type: ignore[operator]
    assert steps["Deployment/keystone-api"].created >= steps["Job/keystone-db-sync"].done  # type: ignore[operator]
    assert steps["Deployment/old-worker"].operation == "delete"
    assert steps["Deployment/old-worker"].created >= max(t.done or 0 for t in steps.values() if t.operation != "delete")
    # What --against says of the same two plans is what happened.
    check = predicted_vs_actual(views.diff_result(plan_diff.view_of(old), new), applied, not_compared(cloud))
    assert check["pods_rolled"]["actual"] == ["Deployment/keystone-api", "StatefulSet/cache"]
    assert check["matches"], check


def test_a_deployments_roll_and_the_wait_end_while_its_old_pod_is_still_in_its_grace_period(cloud: Cloud) -> None:
    """Kubernetes' ReplicaSet counts no pod being deleted, so pulumi-kubernetes' await ends once the new pod is
    ready: an old nova-conductor sleeping through nova's graceful shutdown does not hold `pulumi up`. A
    StatefulSet's pod, whose successor takes its name, is waited for (the cache's, in the test above)."""
    api = cloud.workload("keystone-api")
    old_pod = api.pods[0]
    released = threading.Event()
    stopping: list[bool] = []

    def slow_stop() -> None:  # a process that takes its whole grace period
        stopping.append(True)
        released.wait(20)
        old_pod.phase = "Stopped"

    old_pod.stop = slow_stop  # type: ignore[method-assign]
    applied = apply(cloud, plan(2))
    assert applied.error == ""
    assert stopping == [True] and old_pod in api.pods and old_pod.terminating and old_pod.deleted_at
    assert old_pod not in api.active_pods and api.done
    assert applied.rolled["Deployment/keystone-api"].deleted == [old_pod.plan.name]
    # A second deleter (the Deployment's own deletion) waits for the first instead of stopping it again.
    second = threading.Thread(target=cloud.remove_pod, args=(api, old_pod))
    second.start()
    second.join(0.5)
    assert second.is_alive() and stopping == [True]
    released.set()
    second.join(5)
    assert not second.is_alive() and old_pod not in api.pods


def test_a_retained_object_replaced_fails_on_its_name(cloud: Cloud) -> None:
    new = plan(2)
    retained = next(r for r in cloud.plan.custom if r.k8s_name == "keystone-etc")
    retained.retain_on_delete = True
    applied = apply(cloud, new)
    assert "retained (retainOnDelete)" in applied.error
    assert applied.jobs_run == {}  # nothing after it began


def test_watchers_see_each_step_once_it_began_as_an_operators_watch_does(cloud: Cloud) -> None:
    seen: list[tuple[str, str]] = []
    data_then: list[str] = []

    def watch(r: Registration, step: Any) -> None:
        seen.append((step.op, step.ref))
        data_then.append(cloud.objects.get(("Secret", "keystone-etc"), {}).get("keystone.conf", ""))

    applied = apply(cloud, plan(2), watchers=[watch])
    assert applied.error == ""
    # Every step but the same ones and the deletes (done after the walk), each once it was done to the cluster.
    assert set(seen) == {
        ("replace", "Secret/keystone-etc"), ("replace", "Job/keystone-db-sync"), ("update", "Deployment/keystone-api"),
        ("update", "DaemonSet/agent"), ("update", "Service/keystone-api"), ("update", "StatefulSet/cache"),
        ("create", "ConfigMap/extra")}  # fmt: skip
    assert len(seen) == 7 and seen.index(("replace", "Secret/keystone-etc")) < seen.index(
        ("replace", "Job/keystone-db-sync"))  # fmt: skip
    assert data_then[seen.index(("replace", "Secret/keystone-etc"))] == "[DEFAULT]\nx = 2\n"


def test_a_deleted_pod_leaves_its_services_before_the_kubelet_stops_it(cloud: Cloud) -> None:
    api = cloud.workload("keystone-api")
    pod = api.pods[0]
    ready_at_stop: list[bool] = []
    pod.stop = lambda: ready_at_stop.append(  # type: ignore[method-assign]
        any(e.ready for e in cloud.table.endpoints.get("keystone-api", ()))
    )
    cloud.sync()
    assert any(e.ready for e in cloud.table.endpoints["keystone-api"])
    cloud.remove_pod(api, pod)
    assert ready_at_stop == [False]


def _with_backup(base: Plan) -> Plan:
    """`base` with the MariaDB and a one-time Backup of prod's upgrade, the db-sync Job after the Backup."""
    upgrading = plan_of("prod", upgrade={"from": "2025.2"})
    mariadb, backup = (upgrading.by_name(n, k) for n, k in (("mariadb", "MariaDB"), ("mariadb-backup-before-2026-1",
                                                                                     "Backup")))  # fmt: skip
    backup = dataclasses.replace(backup, custom_timeouts=TIMEOUTS)  # a copy: the plan is the session's
    sync = next(r for r in base.custom if r.k8s_name == "keystone-db-sync")
    dependencies = {**base.dependencies, backup.urn: [mariadb.urn], sync.urn: [*base.dependencies[sync.urn],
                                                                                backup.urn]}  # fmt: skip
    return Plan("staging", base.settings, [*base.custom, mariadb, backup], dependencies)


def test_a_backup_the_new_plan_adds_is_taken_and_awaited_before_what_waits_for_it(cloud: Cloud) -> None:
    """mariadb-operator's part played (tests/lab/cloud/backup_standin.py): the Backup's Job runs, and the engine
    waits until the Backup's status meets the plan's waitFor before the db-sync Job that waits for it."""
    cloud.cluster.node("control-plane").labels["openstack-control-plane"] = "enabled"  # prod's selector
    with_mariadb = _with_backup(plan(1))
    mariadb_only = Plan("staging", with_mariadb.settings, [r for r in with_mariadb.custom if r.kind != "Backup"],
                        with_mariadb.dependencies)  # fmt: skip
    assert apply(cloud, mariadb_only).error == ""
    applied = apply(cloud, _with_backup(plan(2)))
    assert applied.error == ""
    steps = {f"{t.kind}/{t.name}": t for t in applied.timings.values() if t.operation != "same"}
    backup = steps["Backup/mariadb-backup-before-2026-1"]
    assert backup.operation == "create" and backup.done is not None
    assert backup.done - backup.created >= START_SECONDS  # awaited until its Job's pod had completed
    assert steps["Job/keystone-db-sync"].created >= backup.done
    taken = cloud.workload("mariadb-backup-before-2026-1")
    assert taken.status()["conditions"][0]["reason"] == "JobComplete"
    assert "Job/mariadb-backup-before-2026-1" not in applied.jobs_run  # a Backup, not a Job of the plan


def _pod(reserved: dict[str, int]) -> Any:
    """A stand-in for the user's pod (tests/lab/cloud/userpod.py): Placement cannot run here."""
    return _Placement(reserved)


class _Placement:
    """The user's pod, answering the inventory script with what Placement would say."""

    def __init__(self, reserved: dict[str, int]) -> None:
        self.home = Path("/nonexistent")
        self.reserved = reserved

    def run(self, argv: list[str], **kwargs: Any) -> subprocess.CompletedProcess[str]:
        return subprocess.CompletedProcess(argv, 0, json.dumps(self.reserved), "")


def test_a_change_took_effect_when_every_node_of_the_group_reports_the_new_reserved_memory(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(apply_scenario, "INVENTORY_WAIT_SECONDS", 0.0)
    hosts = ["node-c1", "node-c2"]
    done = apply_scenario.took_effect(_pod({"node-c1": 1536, "node-c2.lab": 1536}), Path("python"), {}, hosts,
                                      1536)  # fmt: skip
    assert done["matches"], done
    stale = apply_scenario.took_effect(_pod({"node-c1": 1536, "node-c2": 2048}), Path("python"), {}, hosts, 1536)
    assert not stale["matches"]  # one node still reports the old value: the change has not taken effect there
    assert not apply_scenario.took_effect(_pod({"node-c1": 1536}), Path("python"), {}, hosts, 1536)["matches"]
