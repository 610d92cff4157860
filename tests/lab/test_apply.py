"""The lab's `pulumi up` of a new plan (tests/lab/cloud/apply.py): the engine's steps and their order, the waits,
the controllers after an update, and the check of `--against`'s prediction (tests/lab/cloud/prediction.py).

The running cloud itself only runs in tests/cloud; here the objects are small hand-made registrations, the
walk runs with a stand-in for the cloud's workloads, and the controller against a test double of the
lab's pods (no kubelet in a unit test).
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import yaml

from tests.conftest import plan_of
from tests.lab.cloud.apply import Applied, Controller, Rolled
from tests.lab.cloud.apply_scenario import changed_stack_file
from tests.lab.cloud.deploy import Cloud, DeployFailedError, Timing, Workload
from tests.lab.cloud.engine import delete_order, engine_steps, step_of
from tests.lab.cloud.prediction import compared, predicted_vs_actual
from tools import plan_diff, views
from tools.runtime import Registration, stack_config, stack_file

TYPES = {"Deployment": "apps/v1", "DaemonSet": "apps/v1", "StatefulSet": "apps/v1", "Job": "batch/v1"}


def reg(kind: str, name: str, body: dict[str, Any] | None = None, **options: Any) -> Registration:
    manifest = {"kind": kind, "metadata": {"name": name, "namespace": "openstack"}, **(body or {})}
    group = TYPES.get(kind, "core/v1")
    return Registration(
        urn=f"urn:pulumi:lab::openstack::kubernetes:{group}:{kind}::{name}", type=f"kubernetes:{group}:{kind}",
        name=name, parent="", custom=True, remote=False, dependencies=[], inputs=manifest, revealed=manifest,
        **options,
    )  # fmt: skip


def workload(kind: str, name: str, image: str = "a:1", replicas: int = 1, **spec: Any) -> Registration:
    template = {"metadata": {"labels": {"app": name}}, "spec": {"containers": [{"name": "c", "image": image}]}}
    return reg(kind, name, {"spec": {"replicas": replicas, "selector": {"app": name}, "template": template, **spec}})


def secret(name: str, value: str, **options: Any) -> Registration:
    return reg("Secret", name, {"stringData": {"key": value}}, **options)


def test_the_engine_replaces_what_cannot_change_in_place_and_updates_the_rest() -> None:
    old = [
        secret("etc", "a"), workload("Deployment", "api"), workload("Job", "db-sync"), workload("Job", "once"),
        reg("ConfigMap", "bin", {"data": {"x": "1"}}), reg("Service", "api", {"spec": {"ports": [{"port": 80}]}}),
        secret("fernet-keys", "k1", ignore_changes=["stringData"]), workload("Deployment", "gone"),
    ]  # fmt: skip
    new = [
        secret("etc", "b"), workload("Deployment", "api", image="a:2", replicas=2), workload("Job", "db-sync", "a:2"),
        workload("Job", "once", completions=2), reg("ConfigMap", "bin", {"data": {"x": "1"}}),
        reg("Service", "api", {"spec": {"ports": [{"port": 81}]}}, replace_on_changes=["spec.ports"]),
        secret("fernet-keys", "k2", ignore_changes=["stringData"]), workload("Job", "new-job"),
    ]  # fmt: skip
    steps = {s.ref: s for s in engine_steps(old, new).values()}
    assert {ref: s.op for ref, s in steps.items()} == {
        "Secret/etc": "replace",  # data: pulumi-kubernetes replaces a Secret whose data changes
        "Deployment/api": "update",
        "Job/db-sync": "replace",  # a Job's template is immutable: replaced, so it runs again
        "Job/once": "replace",  # completions too, though its template is the same
        "ConfigMap/bin": "same",
        "Service/api": "replace",  # its replaceOnChanges
        "Secret/fernet-keys": "same",  # ignoreChanges: the engine diffs the old value
        "Deployment/gone": "delete",
        "Job/new-job": "create",
    }
    assert steps["Deployment/api"].template and "spec.replicas" in steps["Deployment/api"].fields
    assert steps["Job/once"].forced == ("spec.completions",) and not steps["Job/once"].template
    assert steps["Secret/etc"].forced == ("stringData.key",)


def test_a_replicas_change_alone_leaves_the_template() -> None:
    step = step_of(workload("StatefulSet", "mc"), workload("StatefulSet", "mc", replicas=3))
    assert (step.op, step.template, step.fields) == ("update", False, ("spec.replicas",))


def test_removed_objects_are_deleted_dependents_first() -> None:
    api, config, account = workload("Deployment", "api"), secret("etc", "a"), reg("ServiceAccount", "api")
    dependencies = {api.urn: [config.urn, account.urn], config.urn: [account.urn]}
    ordered = delete_order([account, config, api], dependencies)
    assert [r.name for r in ordered] == ["api", "etc", "api"] and ordered[-1].kind == "ServiceAccount"


def walker(failures: dict[str, Any] | None = None) -> SimpleNamespace:
    """What Cloud.walk reads of the cloud besides its arguments: the workloads (for failed pods)."""
    return SimpleNamespace(workloads=failures or {}, _why_waiting=lambda r: "still waiting")


def test_each_step_begins_once_the_steps_it_depends_on_are_done() -> None:
    config, job, api = secret("etc", "a"), workload("Job", "db-sync"), workload("Deployment", "api")
    dependencies = {job.urn: [config.urn], api.urn: [job.urn, config.urn]}
    begun: list[str] = []
    done_at = {config.urn: 0, job.urn: 2, api.urn: 1}  # polls after its begin until it is done
    polls: dict[str, int] = {}

    def done(r: Registration) -> bool:
        polls[r.urn] = polls.get(r.urn, 0) + 1
        return polls[r.urn] > done_at[r.urn]

    timings: dict[str, Timing] = {}
    operations = {config.urn: "replace", job.urn: "replace", api.urn: "update"}
    Cloud.walk(walker(), [api, job, config], dependencies, lambda r: begun.append(r.name), done, timings, operations)  # type: ignore[arg-type]
    assert begun == ["etc", "db-sync", "api"]
    assert timings[api.urn].created >= timings[job.urn].done  # type: ignore[operator]
    assert timings[api.urn].operation == "update" and timings[job.urn].operation == "replace"


def test_an_update_that_never_completes_fails_after_its_update_timeout() -> None:
    api = reg("Deployment", "api", {"spec": {}}, custom_timeouts={"create": "1h", "update": "1s"})
    started = time.monotonic()
    with pytest.raises(DeployFailedError, match=r"stops waiting after 1s \(update begun"):
        Cloud.walk(walker(), [api], {}, lambda r: None, lambda r: False, {}, {api.urn: "update"})  # type: ignore[arg-type]
    assert time.monotonic() - started < 5


@dataclass
class FakePod:
    """A lab pod as a controller reads it (a test double: no kubelet here); ready once `ready_at` passed."""

    name: str
    index: int
    node_name: str
    revision: int
    ready_at: float = 0.0
    terminating: bool = False

    @property
    def plan(self) -> SimpleNamespace:
        return SimpleNamespace(name=self.name, index=self.index)

    @property
    def node(self) -> SimpleNamespace:
        return SimpleNamespace(name=self.node_name)

    @property
    def ready(self) -> bool:
        return time.monotonic() >= self.ready_at


@dataclass
class FakeLab:
    """The cloud's pod operations the controller calls, with a log of them."""

    events: list[str] = field(default_factory=list)
    cluster: SimpleNamespace = field(default_factory=lambda: SimpleNamespace(node=lambda name: SimpleNamespace(
        name=name)))  # fmt: skip

    def log(self, line: str) -> None:
        self.events.append(line)

    def remove_pod(self, w: Workload, pod: FakePod) -> None:
        w.pods.remove(pod)  # type: ignore[arg-type]
        self.events.append(f"delete {pod.name}")

    def start_successor(self, w: Workload, index: int, node: Any, revision: int) -> FakePod:
        ready_at = time.monotonic() + 0.3
        pod = FakePod(f"{w.name}-{len(self.events)}", index, node.name if node else "", revision, ready_at)
        w.pods.append(pod)  # type: ignore[arg-type]
        self.events.append(f"create on {pod.node_name} at revision {revision}")
        return pod


def daemonset(strategy: dict[str, Any], nodes: list[str]) -> Workload:
    w = Workload("DaemonSet", "nova-compute", "urn", {}, len(nodes), strategy=strategy, revision=1, started=True)
    w.nodes = [SimpleNamespace(name=n) for n in nodes]  # type: ignore[misc]
    w.pods = [FakePod(f"old-{n}", 0, n, 0) for n in nodes]  # type: ignore[misc]
    return w


def test_the_controller_rolls_a_daemonset_node_by_node_and_records_it() -> None:
    lab, w = FakeLab(), daemonset({"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1}}, ["c1", "c2"])
    record = Rolled("DaemonSet/nova-compute", "template", time.time())
    controller = Controller(lab, w, record, threading.Event())  # type: ignore[arg-type]
    controller.start()
    controller.join(20)
    assert not controller.is_alive() and not controller.error
    assert lab.events == ["delete old-c1", "create on c1 at revision 1", "delete old-c2", "create on c2 at revision 1"]
    assert record.deleted == ["old-c1", "old-c2"] and len(record.started) == 2 and record.ended is not None
    assert w.done  # every pod of the new template and ready: pulumi-kubernetes stops waiting


def test_a_daemonsets_max_unavailable_nodes_stop_their_pods_side_by_side() -> None:
    """compute.agentsMaxUnavailable in the lab: each kubelet stops its node's pod at once, as on a cluster; a
    nova-compute that takes 160 s to stop costs a batch of nodes 160 s, not 160 s a node."""
    stopping: list[tuple[str, float, float]] = []

    class SlowLab(FakeLab):
        def remove_pod(self, w: Workload, pod: FakePod) -> None:
            began = time.monotonic()
            time.sleep(0.5)
            stopping.append((pod.name, began, time.monotonic()))
            super().remove_pod(w, pod)

    lab = SlowLab()
    w = daemonset({"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 2}}, ["c1", "c2"])
    controller = Controller(lab, w, None, threading.Event())  # type: ignore[arg-type]
    controller.start()
    controller.join(20)
    assert not controller.is_alive() and not controller.error and w.done
    (_, _, first_ended), (_, second_began, _) = sorted(stopping, key=lambda s: s[1])
    assert second_began < first_ended, stopping  # overlapping, not one after the other
    assert sorted(e for e in lab.events if e.startswith("create")) == [f"create on {n} at revision 1" for n in
                                                                      ("c1", "c2")]  # fmt: skip


def test_on_delete_leaves_the_pods_and_pulumi_waits_for_them_unless_skip_await() -> None:
    lab, w = FakeLab(), daemonset({"type": "OnDelete"}, ["c1"])
    controller = Controller(lab, w, None, threading.Event())  # type: ignore[arg-type]
    controller.start()
    controller.join(5)
    assert lab.events == [] and not controller.is_alive()
    assert not w.done  # kstatus: an OnDelete DaemonSet is current only once its pods are replaced
    w.skip_await = True  # the plan's OnDelete DaemonSets carry pulumi.com/skipAwait
    assert w.done


def test_an_on_delete_statefulset_is_done_when_ready_after_an_update() -> None:
    w = Workload("StatefulSet", "mc", "urn", {}, 1, strategy={"type": "OnDelete"}, revision=1, started=True)
    w.pods = [FakePod("mc-0", 0, "cp", 0)]  # type: ignore[list-item]
    assert w.done  # statefulset.go: after an OnDelete update, ready replicas only
    w.strategy = {"type": "RollingUpdate"}
    assert not w.done


def test_the_comparison_names_what_is_missing_and_unexpected() -> None:
    found = compared(["DaemonSet/a", "Deployment/b", "DaemonSet/iscsid"], ["DaemonSet/a", "Deployment/c"],
                     {"DaemonSet/iscsid": "no kernel module"})  # fmt: skip
    assert found == {"predicted": ["DaemonSet/a", "Deployment/b"], "actual": ["DaemonSet/a", "Deployment/c"],
                     "missing": ["Deployment/b"], "unexpected": ["Deployment/c"]}  # fmt: skip


def test_a_roll_predicted_for_an_on_delete_workload_is_no_roll() -> None:
    diff = {
        "rolls": [{"kind": "DaemonSet", "name": "libvirt", "restarts": False},
                  {"kind": "DaemonSet", "name": "nova-compute", "restarts": True}],
        "jobs": [{"kind": "CronJob", "name": "purge"}, {"kind": "Job", "name": "db-sync"}],
        "replaced": [{"kind": "Job", "name": "db-sync"}],
    }  # fmt: skip
    applied = Applied({}, jobs_run={"Job/db-sync": "Complete"})
    applied.rolled["DaemonSet/nova-compute"] = Rolled("DaemonSet/nova-compute", "t", 0.0, deleted=["x"])
    check = predicted_vs_actual(diff, applied, {})
    assert check["pods_rolled"]["predicted"] == ["DaemonSet/nova-compute"]  # libvirt is OnDelete
    assert check["jobs_run"]["predicted"] == ["Job/db-sync"]  # a CronJob's change runs nothing now
    assert check["objects_replaced"]["missing"] == ["Job/db-sync"]  # the engine replaced nothing here
    assert not check["matches"]


def test_the_scenarios_change_is_one_setting_of_the_stack_file(tmp_path: Path) -> None:
    path, change = changed_stack_file(stack_file("staging"), tmp_path)
    before, after = stack_config("staging"), stack_config("staging", path)
    assert {k for k in before.keys() | after.keys() if before.get(k) != after.get(k)} == {"openstack:compute"}
    assert (change["before"], change["after"]) == (2048, 1536)
    assert '"reservedHostMemoryMb": 1536' in after["openstack:compute"]


def test_the_engine_and_the_prediction_agree_on_the_scenarios_change(tmp_path: Path) -> None:
    """Offline, what the lab run compares after applying: the engine's steps for the scenario's change
    on staging roll what diff.json says rolls, and replace what it says is replaced."""
    path, _ = changed_stack_file(stack_file("staging"), tmp_path)
    old = plan_of("staging")
    new = plan_of("staging", compute=yaml.safe_load(path.read_text())["config"]["openstack:compute"])
    steps = engine_steps(old.custom, new.custom)
    diff = views.diff_result(plan_diff.view_of(old), new)
    by_ref = {f"{r.kind}/{r.k8s_name}": r for r in new.custom}
    rolling = {
        s.ref for s in steps.values()
        if s.op == "update" and s.template
        and (by_ref[s.ref].revealed["spec"].get("updateStrategy") or {}).get("type") != "OnDelete"
    }  # fmt: skip
    assert rolling == {f"{r['kind']}/{r['name']}" for r in diff["rolls"] if r["restarts"]} == {"DaemonSet/nova-compute"}
    assert {s.ref for s in steps.values() if s.op == "replace"} == {f"Secret/{o['name']}" for o in diff["replaced"]}
    assert not diff["jobs"] and not diff["vms"]["kills_vms"]
