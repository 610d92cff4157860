"""The upgrade proof's own reasoning (tests/lab/cloud/upgrade_scenario.py, api_clients.outages, run.merged_facts),
on records made here: the lab run that feeds it real ones is tests/cloud's."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from tests.conftest import plan_of
from tests.lab.cloud.api_clients import outages
from tests.lab.cloud.apply import Applied, Rolled
from tests.lab.cloud.deploy import Timing
from tests.lab.cloud.run import merged_facts
from tests.lab.cloud.upgrade_scenario import _vm_verdict, changed_before_preflight, step_records, upgrade_plans
from tools.plan import Plan
from tools.runtime import stack_file

UPGRADING = plan_of("prod", upgrade={"from": "2025.2"})


def test_the_lab_deploys_the_release_before_and_upgrades_with_the_stack_files_own_plan(tmp_path: Path) -> None:
    planned: dict[str, Any] = {}

    def plan_of_file(path: Path) -> Plan:
        planned[path.name] = yaml.safe_load(path.read_text())["config"]
        return UPGRADING  # what is planned from each file is the runner's business (tests/lab/cloud/run.py)

    plans = upgrade_plans("prod", stack_file("prod"), tmp_path, plan_of_file)
    assert plans is not None
    assert planned["Pulumi.prod.2025.2.yaml"]["openstack:release"] == "2025.2"
    assert "openstack:upgrade" not in planned["Pulumi.prod.2025.2.yaml"]
    upgrading = planned["Pulumi.prod.upgrade.yaml"]
    assert upgrading["openstack:upgrade"] == {"from": "2025.2"} and upgrading["openstack:release"] == "2026.1"
    assert planned["Pulumi.prod.yaml"] == yaml.safe_load(stack_file("prod").read_text())["config"]
    # Every other setting as the stack file has it.
    assert {k: v for k, v in upgrading.items() if k != "openstack:upgrade"} == planned["Pulumi.prod.yaml"]
    assert upgrade_plans("staging", stack_file("staging"), tmp_path, plan_of_file) is None


def _applied(*timings: Timing, jobs: dict[str, str] | None = None, rolled: dict[str, Rolled] | None = None) -> Applied:
    applied = Applied({})
    applied.timings = {f"{t.kind}/{t.name}": t for t in timings}
    applied.jobs_run = jobs or {}
    applied.rolled = rolled or {}
    return applied


def test_what_changed_before_the_last_check_passed_is_listed_with_whether_a_check_mounts_it() -> None:
    applied = _applied(
        Timing("ConfigMap", "nova-bin", 0.0, 0.1, operation="replace"),
        Timing("Job", "nova-upgrade-check-2026-1", 0.2, 30.0),
        Timing("Job", "cinder-prior-migrations-2026-1", 0.2, 41.0),
        Timing("StatefulSet", "memcached", 12.0, 50.0, operation="update"),  # a change the checks did not wait for
        Timing("Job", "keystone-db-sync", 45.0, 60.0, operation="replace"),
        Timing("Secret", "keystone-etc", 0.0, 0.0, operation="same"),
    )
    found = changed_before_preflight(applied, UPGRADING)
    assert found["checks"] == 2 and found["last_check_passed_s"] == 41.0
    assert found["changed_before"] == [
        {"object": "ConfigMap/nova-bin", "step": "replace", "start_s": 0.0, "mounted_by_a_check": True},
        {"object": "StatefulSet/memcached", "step": "update", "start_s": 12.0, "mounted_by_a_check": False},
    ]


def test_each_step_gets_its_time_and_outcome() -> None:
    listed = [
        {"phase": "preflight", "kind": "Job", "name": "nova-upgrade-check-2026-1"},
        {"phase": "roll", "kind": "workload", "name": "nova-api"},
        {"phase": "compute nodes", "kind": "workload", "name": "libvirt-kvm-general"},
        {"phase": "backup", "kind": "Backup", "name": "mariadb-backup-before-2026-1"},
    ]
    rolled = Rolled("Deployment/nova-api", "its template changed", 100.0, 130.0, ["old"], ["new"])
    applied = _applied(
        Timing("Job", "nova-upgrade-check-2026-1", 0.5, 30.0),
        Timing("Deployment", "nova-api", 200.0, 230.5, operation="update"),
        Timing("DaemonSet", "libvirt-kvm-general", 300.0, 300.0, operation="update"),
        Timing("Backup", "mariadb-backup-before-2026-1", 41.0, 52.0),
        jobs={"Job/nova-upgrade-check-2026-1": "Complete"},
        rolled={"Deployment/nova-api": rolled},
    )
    status = {"conditions": [{"type": "Complete", "status": "True", "reason": "JobComplete"}]}
    records = {r["name"]: r for r in step_records(listed, applied, status)}
    assert records["nova-upgrade-check-2026-1"] == {**listed[0], "start_s": 0.5, "end_s": 30.0,
                                                   "outcome": "Complete"}  # fmt: skip
    assert records["nova-api"]["outcome"] == "rolled: 1 pod(s) replaced by 1 in 30.0s"
    assert records["libvirt-kvm-general"]["outcome"].endswith("(OnDelete)")
    assert records["mariadb-backup-before-2026-1"]["outcome"] == "Complete True, reason JobComplete"


def _reading(at: float, pid: int, lines: int, counter: tuple[int, ...], written_at: float) -> dict[str, Any]:
    signs = {"qemu_cpu_seconds": 0.4, "domstate": "running (migrated)"}
    return {"host": "node-c1", "at": at, "qemu_pid": pid, "alive_lines": lines, "counter": counter,
            "console_written_at": written_at, **signs}  # fmt: skip


def test_a_vm_survived_when_its_qemu_is_the_same_and_its_counter_went_on() -> None:
    event = 1000.0
    before = _reading(995.0, 10, 3, (10, 20, 30), 990.0)
    went_on = _reading(1058.0, 10, 6, (10, 20, 30, 40, 50, 71, 81, 91), 1055.0)
    verdict = _vm_verdict(before, went_on, event)
    assert verdict["survived"] and verdict["largest_gap_s"] == 21 and verdict["guest_clock_lost_s"] == 2.0
    rebooted = {**went_on, "counter": (10, 20, 30, 5, 15)}  # a new boot counts from zero again
    assert not _vm_verdict(before, rebooted, event)["survived"]
    assert not _vm_verdict(before, {**went_on, "qemu_pid": 11}, event)["survived"]
    assert not _vm_verdict(before, {**went_on, "counter": (10, 20, 30)}, event)["survived"]  # it stopped printing
    # The log last written before the event: what it holds is old, whatever it says.
    assert not _vm_verdict(before, {**went_on, "console_written_at": 999.0}, event)["survived"]
    # 40 s without a line of the guest's own clock.
    assert not _vm_verdict(before, {**went_on, "counter": (10, 20, 30, 40, 81, 91)}, event)["survived"]
    # 63 s of the host's clock and 61 of the guest's; stopped for 100 s more, the guest falls behind.
    assert not _vm_verdict(before, {**went_on, "at": 1158.0}, event)["survived"]


def _call(client: str, call: str, t: float, ok: bool) -> dict[str, Any]:
    return {"client": client, "call": call, "t": t, "ok": ok, "seconds": 0.5, "error": "" if ok else "HTTP 503"}


def test_an_outage_is_the_longest_run_of_one_apis_failed_calls_of_one_client() -> None:
    calls = [
        _call("laptop", "image list", 0, True), _call("laptop", "console url", 0.5, False),
        _call("laptop", "image list", 1, True), _call("laptop", "console url", 1.5, False),
        _call("laptop", "console url", 2.5, False), _call("laptop", "console url", 3.5, True),
        _call("laptop", "console url", 4.5, False),
        _call("user-pod", "token", 0, False), _call("user-pod", "token", 1, True),
    ]  # fmt: skip
    found = outages(calls)
    # The console URL failed three times in a row while Glance answered: 0.5 s to 3.0 s.
    assert found["laptop"]["longest_outage_s"] == 2.5
    assert found["laptop"]["longest"]["call"] == "console url" and found["laptop"]["longest"]["failed_calls"] == 3
    assert found["laptop"]["failed"] == 4 and found["laptop"]["calls"] == 7
    assert found["user-pod"]["longest_outage_s"] == 0.5


def test_facts_after_an_upgrade_join_those_before() -> None:
    first = {"server": {"id": "a", "host": "node-c1", "dhcp_lease": True}, "errors": {}, "seconds": {"server": 60}}
    later = {"server": {"id": "a", "host": "node-c2"}, "errors": {"ceph": "x"}, "seconds": {"ceph": 90}}
    assert merged_facts(first, later) == {
        "server": {"id": "a", "host": "node-c2", "dhcp_lease": True},
        "errors": {"ceph": "x"},
        "seconds": {"server": 60, "ceph": 90},
    }
