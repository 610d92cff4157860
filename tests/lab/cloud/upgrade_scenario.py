"""A release upgrade of the running cloud, under load: the issue's proof (report.json's `upgrade`).

On prod (tests/lab/cloud/run.py UPGRADE_FROM: its topology keeps the VMs through a restart of libvirt, and
its two compute nodes hold vm1 and vm2), whose lab deploys the stack file at the release before its own
(the same file with `release` changed as tests/release_stack.py changes it, and this machine's
overrides), and once the user's servers run:
1. The prediction: tools/views.py `diff_result` of the running plan and the stack's own plan with
   `upgrade: {from: <the release before>}`, whose `upgrade.steps` are `--against`'s upgrade view
   (tools/upgrade_view.py), kept as `upgrade-diff.json`; and of that plan and the stack file as it is
   (`upgrade.from` removed), `after-upgrade-diff.json`.
2. Two clients call the APIs every second (tests/lab/cloud/api_clients.py) while tests/lab/cloud/apply.py does
   what `pulumi up` of the upgrade's plan does, then what the `pulumi up` that removes `upgrade.from`
   does (README: it rolls Nova's control plane, Cinder and nova-compute once more).
3. The verdict: each step of the upgrade view with when it began and ended and what happened; what
   changed before the last preflight check passed; the backup's dump (the Backup played as
   mariadb-operator plays it: tests/lab/cloud/backup_standin.py); the prediction against what happened, for
   both `pulumi up`s (tests/lab/cloud/prediction.py); the calls, failed ones set against the rollouts, and
   each client's longest outage; each VM's QEMU and console counter; and the rollback proven on the
   dump (tests/lab/cloud/rollback_check.py).
"""

from __future__ import annotations

import itertools
import json
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tests.lab.cloud import rollback_check
from tests.lab.cloud.api_clients import Restart, judge, outages, start_clients, stop_all
from tests.lab.cloud.apply import Applied, apply
from tests.lab.cloud.backup_standin import BACKUP_DIR
from tests.lab.cloud.deploy import POD_KINDS
from tests.lab.cloud.guest import ALIVE_INTERVAL_SECONDS
from tests.lab.cloud.prediction import not_compared, predicted_vs_actual
from tests.lab.cloud.vmsafety import alive_values, vm_signs
from tests.release_stack import release_overrides, write_stack_file
from tools import plan_diff, views
from tools.plan import Plan
from tools.runtime import stack_config

if TYPE_CHECKING:
    from tests.lab.cloud.deploy import Cloud
    from tests.lab.cloud.public_access import FrontDoor
    from tests.lab.cloud.userpod import UserPod

# The stacks whose lab deploys the release before their own and upgrades it (README, "The running cloud").
UPGRADE_FROM = {"prod": "2025.2"}
BASELINE_SECONDS = 10.0  # calls before the upgrade: the clients work at all
AFTER_SECONDS = 12.0  # calls after it, and one more line of each VM's console (every 10 s): the upgrade's minutes
# already gave the counter many new values, these only show the clients answered once it was done
PREFLIGHT = ("-upgrade-check-", "-prior-migrations-")


@dataclass(frozen=True)
class UpgradePlans:
    """The three plans of the proof, each planned as the running one is (this machine's overrides)."""

    previous: Plan  # the stack file at the release before: what the lab deploys
    upgrading: Plan  # the stack file with upgrade.from: the upgrade's `pulumi up`
    final: Plan  # the stack file as it is: the `pulumi up` that removes upgrade.from
    files: Mapping[str, str]  # which stack file each comes from


def upgrade_plans(stack: str, stack_file: Path, out: Path, plan_of: Callable[[Path], Plan]) -> UpgradePlans | None:
    """The plans of a stack whose lab proves an upgrade, their stack files written into `out`; None for others."""
    previous = UPGRADE_FROM.get(stack)
    if previous is None:
        return None
    overrides = release_overrides(stack_config(stack, stack_file), previous)
    before = write_stack_file(stack_file, overrides, out / f"Pulumi.{stack}.{previous}.yaml")
    upgrading = write_stack_file(stack_file, {"upgrade": {"from": previous}}, out / f"Pulumi.{stack}.upgrade.yaml")
    files = {"previous": str(before), "upgrading": str(upgrading), "final": str(stack_file)}
    return UpgradePlans(plan_of(before), plan_of(upgrading), plan_of(stack_file), files)


def _is_preflight(name: str) -> bool:
    return any(marker in name for marker in PREFLIGHT)


def _timing(applied: Applied, kind: str, name: str) -> Any:
    kinds = POD_KINDS if kind == "workload" else (kind,)
    return next((t for t in applied.timings.values() if t.name == name and t.kind in kinds), None)


def _outcome(step: Mapping[str, Any], applied: Applied, timing: Any, backup_status: Mapping[str, Any]) -> str:
    if timing is None or timing.operation == "same":
        return "nothing to do: the same as before"
    ref = f"{timing.kind}/{step['name']}"
    if step["kind"] == "Job":
        return applied.jobs_run.get(ref, "not run")
    if step["kind"] == "Backup":
        conditions = backup_status.get("conditions") or [{}]
        return f"Complete {conditions[0].get('status')}, reason {conditions[0].get('reason')}"
    if ref in applied.rolled:
        rolled = applied.rolled[ref]
        seconds = rolled.as_dict()["seconds"]
        return f"rolled: {len(rolled.deleted)} pod(s) replaced by {len(rolled.started)} in {seconds}s"
    if timing.operation == "update":
        return "template updated; its pods stay until deleted (OnDelete)"
    return str(timing.operation)


def step_records(
    listed: list[dict[str, Any]], applied: Applied, backup_status: Mapping[str, Any]
) -> list[dict[str, Any]]:
    """Each step of the upgrade view with its actual start and end (seconds since the `pulumi up` began)."""
    records = []
    for step in listed:
        timing = _timing(applied, step["kind"], step["name"])
        started = None if timing is None else round(timing.created, 1)
        ended = None if timing is None or timing.done is None else round(timing.done, 1)
        records.append({**step, "start_s": started, "end_s": ended,
                        "outcome": _outcome(step, applied, timing, backup_status)})  # fmt: skip
    return records


def changed_before_preflight(applied: Applied, plan: Plan) -> dict[str, Any]:
    """What the `pulumi up` changed before the last preflight check had passed, and whether a check mounts it."""
    checks = [t for t in applied.timings.values() if t.kind == "Job" and _is_preflight(t.name)]
    passed = max((t.done or float("inf") for t in checks), default=0.0)
    mounted = {
        (kind, volume[key][field])
        for r in plan.custom
        if r.kind == "Job" and _is_preflight(r.k8s_name or "")
        for volume in r.revealed["spec"]["template"]["spec"].get("volumes", [])
        for key, kind, field in (("secret", "Secret", "secretName"), ("configMap", "ConfigMap", "name"))
        if key in volume
    }
    early = [
        {
            "object": f"{t.kind}/{t.name}",
            "step": t.operation,
            "start_s": round(t.created, 1),
            "mounted_by_a_check": (t.kind, t.name) in mounted,
        }
        for t in sorted(applied.timings.values(), key=lambda t: t.created)
        if t.operation not in ("same", "delete") and t.created < passed and not _is_preflight(t.name)
    ]
    return {"checks": len(checks), "last_check_passed_s": round(passed, 1), "changed_before": early}


def dump_facts(cloud: Cloud, claim: str, taken_after: float) -> dict[str, Any]:
    """The dump the Backup left in its claim (the lab's provisioner: a directory of the cluster)."""
    directory = cloud.cluster.state / "claims" / claim
    dumps = sorted(p for p in directory.glob("backup.*.sql*") if p.stat().st_mtime >= taken_after)
    if not dumps:
        return {"claim": claim, "file": None}
    dump = dumps[-1]
    return {"claim": claim, "file": str(dump), "bytes": dump.stat().st_size, "path_in_pod": f"{BACKUP_DIR}/{dump.name}"}


def _vms(cloud: Cloud, servers: Sequence[Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    found = {}
    for server in servers:
        signs = vm_signs(cloud, server["host"], server["instance_name"], server["id"], deep=True)
        found[server["id"]] = {
            "name": server.get("name", server["id"]),
            "host": server["host"],
            **signs.as_dict(),
            "counter": alive_values(cloud, server["host"], server["id"]),
        }
    return found


# A guest prints an alive line every ALIVE_INTERVAL_SECONDS of its own clock. Through an upgrade no two
# lines may be further apart than this, and the guest's clock may not fall further behind the host's than
# LONGEST_LOSS_S plus LOSS_RATE of the time between the readings: a guest paused or stopped (a hung QEMU,
# a stop-and-copy) loses that time, while a kernel that calibrated its TSC under TCG on a loaded host may
# run a little slow without stopping. Both readings' last lines are up to one interval old.
LONGEST_GAP_S = 3 * ALIVE_INTERVAL_SECONDS
LONGEST_LOSS_S = 3 * ALIVE_INTERVAL_SECONDS
LOSS_RATE = 0.05


def _vm_verdict(before: dict[str, Any], after: dict[str, Any], event_at: float) -> dict[str, Any]:
    """The same QEMU, a console counter that went on (every value after the last one before is higher than
    the one before it, and there are new ones: no reboot, the guest counts seconds since boot), the console
    written after the event began on the host's clock, no gap in the counting over LONGEST_GAP_S, and the
    guest's clock no more than LONGEST_LOSS_S behind the host's between the two readings."""
    counted = list(after["counter"])
    newer = [v for v in counted if v > (before["counter"][-1] if before["counter"] else -1)]
    unbroken = bool(before["counter"]) and bool(newer) and counted == sorted(counted)
    gaps = [b - a for a, b in itertools.pairwise(counted)]
    largest_gap = max(gaps, default=None)
    guest_elapsed = counted[-1] - before["counter"][-1] if counted and before["counter"] else None
    lost = round(after["at"] - before["at"] - guest_elapsed, 1) if guest_elapsed is not None else None
    fresh = after["console_written_at"] is not None and after["console_written_at"] > event_at
    return {
        "host": before["host"],
        "qemu_pid_before": before["qemu_pid"],
        "qemu_pid_after": after["qemu_pid"],
        "alive_lines_before": before["alive_lines"],
        "alive_lines_after": after["alive_lines"],
        "counter_first": counted[0] if counted else None,
        "counter_last": counted[-1] if counted else None,
        "largest_gap_s": largest_gap,
        "guest_clock_lost_s": lost,
        "console_written_after_event": fresh,
        "signs_before": {k: before[k] for k in ("qemu_cpu_seconds", "domstate")},
        "signs_after": {k: after[k] for k in ("qemu_cpu_seconds", "domstate")},
        "counter_unbroken": unbroken,
        "survived": before["qemu_pid"] is not None
        and before["qemu_pid"] == after["qemu_pid"]
        and unbroken
        and fresh
        and largest_gap is not None
        and largest_gap <= LONGEST_GAP_S
        and lost is not None
        and lost <= LONGEST_LOSS_S + LOSS_RATE * (after["at"] - before["at"]),
    }


def _applied(applied: Applied | None) -> dict[str, Any]:
    return applied.as_dict() if applied is not None else {"not_run": "the upgrade's pulumi up failed first"}


def prove(
    door: FrontDoor,
    cloud: Cloud,
    user: UserPod,
    python: Path,
    admin: Mapping[str, str],
    servers: Sequence[Mapping[str, Any]],
    plans: UpgradePlans,
    venvs: Mapping[str, Path],
    log: Callable[[str], None],
) -> dict[str, Any]:
    """report.json's `upgrade`."""
    running = [s for s in servers if s.get("status") == "ACTIVE" and s.get("instance_name") and s.get("host")]
    if not running:
        return {"not_run": "the user's scenario left no running VM to watch through the upgrade"}
    upgrading, final = plans.upgrading, plans.final
    assert upgrading.settings.upgrade is not None
    previous, target = upgrading.settings.upgrade.from_release, upgrading.settings.release
    predicted = views.diff_result(plan_diff.view_of(cloud.plan), upgrading)
    predicted_after = views.diff_result(plan_diff.view_of(upgrading), final)
    (cloud.out / "upgrade-diff.json").write_text(json.dumps(predicted, indent=1) + "\n")
    (cloud.out / "after-upgrade-diff.json").write_text(json.dumps(predicted_after, indent=1) + "\n")
    skipped = not_compared(cloud)
    vms_before = _vms(cloud, running)
    clients = start_clients(door, cloud, user, python, admin, running[0]["id"], prefix="upgrade-api-loop")
    settled: Applied | None = None
    backup_status: dict[str, Any] = {}
    backup_name = next(s["name"] for s in predicted["upgrade"]["steps"] if s["kind"] == "Backup")
    claim = _claim_of(upgrading, backup_name)
    began = time.time()
    # The rollback's restore runs beside the second `pulumi up`, most of which is nova-compute's own stop.
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="rollback") as beside:
        try:
            time.sleep(BASELINE_SECONDS)
            began = time.time()
            upgraded = apply(cloud, upgrading, log)
            backup = next((w for w in list(cloud.workloads.values()) if w.kind == "Backup" and w.name == backup_name),
                          None)  # fmt: skip
            backup_status = backup.status() if backup is not None else {}
            upgrade_ended = time.time()
            dump = dump_facts(cloud, claim, began) if claim else {"file": None}
            dumped = Path(str(dump["file"])) if dump.get("file") else None
            restore = beside.submit(rollback_check.prove, cloud, dumped, venvs, previous, target, log)
            if not upgraded.error:
                settled = apply(cloud, final, log)
            time.sleep(AFTER_SECONDS)
        finally:
            calls = stop_all(clients)
        rollback = restore.result()
    vms_after = _vms(cloud, running)
    check = predicted_vs_actual(predicted, upgraded, {**skipped, **not_compared(cloud)})
    check_after = predicted_vs_actual(predicted_after, settled, not_compared(cloud)) if settled else None
    restarts = [Restart(ref, r.why, r.began, r.ended) for a in (upgraded, settled) if a for ref, r in a.rolled.items()]
    calls_seen = judge(calls, restarts, began, event="upgrade")
    per_client = outages(calls)
    longest: tuple[str | None, dict[str, Any]] = max(
        per_client.items(), key=lambda kv: kv[1]["longest_outage_s"], default=(None, {})
    )
    vms = {vm: _vm_verdict(vms_before[vm], vms_after[vm], began) for vm in vms_before}
    steps = step_records(predicted["upgrade"]["steps"], upgraded, backup_status)
    matches = check["matches"] and check_after is not None and check_after["matches"]
    result = {
        "from": previous,
        "to": target,
        "stack_files": dict(plans.files),
        "error": upgraded.error or (settled.error if settled else ""),
        "seconds": {"upgrade": round(upgrade_ended - began, 1), "after": settled and round(settled.seconds, 1)},
        "steps": steps,
        "then_rolls": predicted["upgrade"]["then_rolls"],
        "preflight": changed_before_preflight(upgraded, upgrading),
        "backup": {
            "name": backup_name,
            "stand_in": "mariadb-operator's Backup controller is played by the lab "
            "(tests/lab/cloud/backup_standin.py): the Job the operator makes for a one-time Backup (Debian's "
            "mariadb-dump of every database into the Backup's claim, gzip), and the status condition the plan's "
            "pulumi.com/waitFor reads",
            "status": backup_status,
            "dump": dump,
        },
        "rollback": rollback,
        "applied": _applied(upgraded),
        "applied_after": _applied(settled),
        "predicted_vs_actual": {"upgrade": check, "after_upgrade": check_after, "matches": matches},
        **calls_seen,
        "api_failed_calls": calls_seen["failed_calls"],
        "api_outages": per_client,
        "api_longest_outage_s": longest[1].get("longest_outage_s", 0.0),
        "api_longest_outage": {"client": longest[0], **(longest[1].get("longest") or {})},
        "vms": vms,
        "vm_survived": all(v["survived"] for v in vms.values()),
    }
    log(f"upgrade {previous} -> {target}: error {result['error'] or 'none'}, prediction matches {matches}, "
        f"calls {calls_seen['calls']}, failed {calls_seen['failed_calls']} ({calls_seen['failed_outside_restarts']} "
        f"outside the rollouts), longest outage {result['api_longest_outage_s']}s, VMs survived "
        f"{result['vm_survived']}, rollback {rollback.get('ok')}, {result['seconds']}")  # fmt: skip
    return result


def _claim_of(plan: Plan, backup: str) -> str | None:
    resource = plan.by_name(backup, "Backup").revealed
    return ((resource["spec"].get("storage") or {}).get("volume") or {}).get("persistentVolumeClaim", {}).get(
        "claimName")  # fmt: skip
