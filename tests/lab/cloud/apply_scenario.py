"""An everyday change applied to the running cloud under load, and checked against `--against`'s prediction.

report.json's `apply`, on staging (tests/lab/cloud/run.py), after the certificate renewal and before
the libvirt restart, while the user's VM runs:
1. The stack file is changed as its user would change it: `reservedHostMemoryMb` of the first compute
   node group 512 MiB lower, which is nova.conf's `[DEFAULT] reserved_host_memory_mb` on the group's
   compute nodes (components/services/compute.py). It is written beside the report
   (`Pulumi.<stack>.applied.yaml`) and planned with the same machine overrides as the running plan.
2. The prediction: tools/views.py `diff_result` of the running plan and the new one, the code that
   writes diff.json (kept as `apply-diff.json`).
3. Two clients call the APIs every second (tests/lab/cloud/api_clients.py), from the laptop through the
   gateway and from the user's pod; tests/lab/cloud/apply.py does what `pulumi up` of the new plan does.
4. The verdict: the pods that rolled and the Jobs that ran against the prediction
   (tests/lab/cloud/prediction.py), the failed calls against the rollouts' windows, and the VM: alive
   (the same QEMU, its console still counting) exactly when the prediction's `vms.kills_vms` says so.
5. The change took effect, not only rolled: Placement's MEMORY_MB inventory of each compute node reports
   the new `reserved` (nova-compute reports reserved_host_memory_mb there when it starts and every minute).
"""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from components.settings.model import SettingsError
from tests.lab.cloud.api_clients import Restart, judge, start_clients, stop_all
from tests.lab.cloud.apply import apply
from tests.lab.cloud.prediction import not_compared, predicted_vs_actual
from tests.lab.cloud.vmsafety import survived, vm_signs
from tools import plan_diff, views
from tools.plan import Plan

if TYPE_CHECKING:
    from tests.lab.cloud.deploy import Cloud
    from tests.lab.cloud.public_access import FrontDoor
    from tests.lab.cloud.userpod import UserPod

BASELINE_SECONDS = 10.0  # calls before the apply: the clients work at all
AFTER_SECONDS = 15.0  # calls after it, and time for the VM's console to print again (every 10 s)
COMPUTE_KEY = "openstack:compute"
SETTING = "compute.nodeGroups[0].reservedHostMemoryMb"
STEP_MB = 512
DEFAULT_RESERVED_MB = 2048  # components/settings/model.py NodeGroup.reserved_host_memory_mb
# nova-compute reports its inventory at start and then every update_resources_interval (60 s by default).
INVENTORY_WAIT_SECONDS = 180.0
# Run in the user's pod with the admin's OS_* variables: each resource provider's MEMORY_MB `reserved`.
RESERVED_SCRIPT = """
import json, openstack
placement = openstack.connect().placement
providers = placement.get("/resource_providers").json()["resource_providers"]
found = {}
for provider in providers:
    inventories = placement.get(f"/resource_providers/{provider['uuid']}/inventories").json()["inventories"]
    if "MEMORY_MB" in inventories:
        found[provider["name"]] = inventories["MEMORY_MB"]["reserved"]
print(json.dumps(found))
"""


def reserved_memory(user: UserPod, python: Path, admin: Mapping[str, str]) -> dict[str, int]:
    """Placement's MEMORY_MB reserved of each compute node (its resource provider's name is the host's)."""
    env = {"PATH": f"{python.parent}:/usr/bin:/bin", "HOME": str(user.home), **admin}
    done = user.run([str(python), "-c", RESERVED_SCRIPT], env=env, capture_output=True, timeout=120)
    if done.returncode != 0:
        raise RuntimeError(f"placement inventories: {done.stderr[-500:]}")
    return dict(json.loads(done.stdout))


def compute_hosts(cloud: Cloud) -> list[str]:
    """The nodes of the first compute node group, the one the change is made to (Nova's host is the node's name)."""
    settings = cloud.plan.settings
    selector = {**settings.node_selectors.compute, **settings.compute.node_groups[0].node_selector}
    return sorted(node.name for node in cloud.cluster.labelled(selector))


def took_effect(user: UserPod, python: Path, admin: Mapping[str, str], hosts: list[str], after: int) -> dict[str, Any]:
    """Whether every compute node of the group reports the new reserved memory within INVENTORY_WAIT_SECONDS."""
    deadline = time.monotonic() + INVENTORY_WAIT_SECONDS
    while True:
        seen: dict[str, Any]
        try:
            seen = dict(reserved_memory(user, python, admin))
        except (RuntimeError, ValueError, subprocess.TimeoutExpired) as error:
            seen = {"error": str(error)[:300]}
        # A provider is named by its hypervisor's hostname: the node's name, or a name under it.
        of_host = {host: [v for name, v in seen.items() if name.split(".")[0] == host] for host in hosts}
        matches = bool(hosts) and all(found == [after] for found in of_host.values())
        if matches or time.monotonic() > deadline:
            return {"placement_reserved_mb": seen, "expected_mb": after, "hosts": hosts, "matches": matches}
        time.sleep(10)


def changed_stack_file(stack_file: Path, out: Path) -> tuple[Path, dict[str, Any]]:
    """The stack file with its first node group's reserved host memory 512 MiB lower (higher when it
    reserves less than that), written into `out`; and what changed."""
    document = yaml.safe_load(stack_file.read_text())
    config = document["config"]
    compute = dict(config.get(COMPUTE_KEY) or {})
    groups = [dict(g) for g in compute.get("nodeGroups") or [{"name": "default"}]]
    before = int(groups[0].get("reservedHostMemoryMb", DEFAULT_RESERVED_MB))
    after = before - STEP_MB if before >= STEP_MB else before + STEP_MB
    groups[0]["reservedHostMemoryMb"] = after
    compute["nodeGroups"] = groups
    document["config"] = {**config, COMPUTE_KEY: compute}
    path = out / stack_file.name.replace(".yaml", ".applied.yaml")
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    return path, {"setting": SETTING, "before": before, "after": after, "stack_file": str(path),
                  "nova_conf": "[DEFAULT] reserved_host_memory_mb of the group's compute nodes"}  # fmt: skip


def prove(
    door: FrontDoor,
    cloud: Cloud,
    user: UserPod,
    python: Path,
    admin: Mapping[str, str],
    server: Mapping[str, Any],
    stack_file: Path,
    plan_of: Callable[[Path], Plan],
    log: Callable[[str], None],
) -> dict[str, Any]:
    """report.json's `apply`. `plan_of` plans a stack file as the running plan was planned (this machine's
    overrides included)."""
    if server.get("status") != "ACTIVE" or not server.get("instance_name"):
        return {"not_run": "the user's scenario left no running VM to watch through the apply"}
    path, change = changed_stack_file(stack_file, cloud.out)
    try:
        new = plan_of(path)
    except (SettingsError, ValueError) as error:
        return {"ok": False, "change": change, "error": f"the changed stack does not plan: {error}"}
    diff = views.diff_result(plan_diff.view_of(cloud.plan), new)
    (cloud.out / "apply-diff.json").write_text(json.dumps(diff, indent=1) + "\n")
    skipped = not_compared(cloud)
    host, instance, server_id = server["host"], server["instance_name"], server["id"]
    signs_before = vm_signs(cloud, host, instance, server_id, deep=True)
    clients = start_clients(door, cloud, user, python, admin, server_id, prefix="apply-api-loop")
    try:
        time.sleep(BASELINE_SECONDS)
        began = time.time()
        applied = apply(cloud, new, log)
        time.sleep(AFTER_SECONDS)
    finally:
        calls = stop_all(clients)
    signs_after = vm_signs(cloud, host, instance, server_id, deep=True)
    vm_survived = survived(signs_before, signs_after, began)
    effect = took_effect(user, python, admin, compute_hosts(cloud), change["after"])
    expected = not diff["vms"]["kills_vms"]
    check = predicted_vs_actual(diff, applied, {**skipped, **not_compared(cloud)})
    restarts = [Restart(ref, r.why, r.began, r.ended) for ref, r in applied.rolled.items()]
    calls_seen = judge(calls, restarts, began, event="apply")
    ok = (
        not applied.error
        and check["matches"]
        and calls_seen["calls_before_apply"] > 0
        and calls_seen["failed_before_apply"] == 0
        and calls_seen["failed_outside_restarts"] == 0
        and vm_survived == expected
        and effect["matches"]
    )
    log(f"apply: {change['setting']} {change['before']} -> {change['after']}: rolled {sorted(applied.rolled)}, "
        f"jobs {sorted(applied.jobs_run)}, prediction matches {check['matches']}, calls {calls_seen['calls']}, "
        f"failed {calls_seen['failed_calls']} ({calls_seen['failed_outside_restarts']} outside the rollouts), "
        f"VM survived {vm_survived} (expected {expected}), {applied.seconds:.0f}s")  # fmt: skip
    return {
        "ok": ok,
        "change": change,
        **applied.as_dict(),
        "predicted_vs_actual": check,
        **calls_seen,
        "took_effect": effect,
        "vm_survived": vm_survived,
        "vm_expected_to_survive": expected,
        "vm_verdict": diff["vms"]["verdict"],
        "vm": {"before": signs_before.as_dict(), "after": signs_after.as_dict()},
    }
