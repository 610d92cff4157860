"""Moving VMs off a compute node for real: by nova-compute-maintenance, and by the README's drain procedure.

Run by tests/lab/cloud/scenario.py with its servers ACTIVE on the lab's compute nodes, as the cloud's
administrator (Nova, and the Kubernetes API through tests/lab/cloud/kubectl.py). The controller runs
in its own pod of the plan, against the lab's API server:

1. `kubectl annotate node <a> openstack.org/maintenance=requested`: the controller disables the
   node's compute service, live-migrates its servers to the other node one by one, deletes the
   node's OnDelete pods (libvirt, Open vSwitch, the agent) so their DaemonSets start them again
   from their current templates, waits for them Ready, and writes `done`; the service is enabled.
   The moved guest keeps counting: its console's seconds-since-boot go on past where they were.
2. The README's procedure by hand on the other node: cordon (the controller disables its service,
   `cordoned`), live-migrate each server with `openstack server migrate --live-migration` (the
   SDK's call), delete the node's libvirt and Open vSwitch pods, `kubectl drain --ignore-daemonsets`
   (nothing to evict: every pod there is a DaemonSet's), uncordon: the service is enabled again.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import openstack

from tests.lab.cloud.guest import parse_console
from tests.lab.cloud.kubectl import Kubectl

PHASE = "openstack.org/maintenance"  # components/scripts/maintenance_plan.py
PROGRESS = "openstack.org/maintenance-progress"
MAINTENANCE_TIMEOUT = 900.0
MIGRATION_TIMEOUT = 600.0
# The node's pods a maintenance restarts (the controller's RESTART_COMPONENTS under options 4 and 5).
RESTARTED = ("libvirt", "openvswitch-db", "openvswitch-vswitchd", "neutron-ovs-agent")


def _until(what: str, check: Callable[[], Any], timeout: float, interval: float = 2.0) -> tuple[Any, float]:
    started = time.monotonic()
    while True:
        found = check()
        if found:
            return found, round(time.monotonic() - started, 1)
        if time.monotonic() - started > timeout:
            raise TimeoutError(f"{what}: not after {timeout:.0f}s")
        time.sleep(interval)


def _service(conn: openstack.connection.Connection, host: str) -> Any:
    return next(iter(conn.compute.services(host=host, binary="nova-compute")))


def _last_migration(conn: openstack.connection.Connection, server_id: str) -> str:
    """The status of the server's last live migration (`openstack server migration list --server`)."""
    found = list(conn.compute.migrations(server_id=server_id, migration_type="live-migration"))
    return max(found, key=lambda m: m.id).status if found else ""


def _alive(conn: openstack.connection.Connection, server_id: str) -> tuple[int, ...]:
    return parse_console(conn.compute.get_server_console_output(server_id)["output"]).alive_values


def _counter_kept(before: tuple[int, ...], after: tuple[int, ...]) -> bool:
    """The guest went on counting: later lines exist, every one past the last before, none going back."""
    if not before or not after:
        return False
    newer = [v for v in after if v > before[-1]]
    return bool(newer) and list(newer) == sorted(newer)


def _restartable_pods(kube: Kubectl, node: str) -> dict[str, str]:
    """The node's pods a maintenance restarts: component → pod name."""
    found = {}
    for pod in kube.pods(node=node):
        component = pod["metadata"]["labels"].get("app.kubernetes.io/component", "")
        if component in RESTARTED:
            found[component] = pod["metadata"]["name"]
    return found


def by_controller(
    conn: openstack.connection.Connection, kube: Kubectl, node: str, other: str, server_id: str
) -> dict[str, Any]:
    """Step 1: a maintenance the controller carries out."""
    alive_before = _alive(conn, server_id)
    pods_before = _restartable_pods(kube, node)
    started = time.monotonic()
    kube.annotate(node, {PHASE: "requested"})

    def ended() -> str | None:
        phase = kube.node(node)["metadata"]["annotations"].get(PHASE)
        return phase if phase in ("done", "failed", "refused") else None

    phase, seconds = _until(f"the maintenance of {node}", ended, MAINTENANCE_TIMEOUT, interval=3)
    annotations = kube.node(node)["metadata"]["annotations"]
    server = conn.compute.get_server(server_id)
    # The guest's console after the move is the destination's: wait for two more alive lines.
    time.sleep(25)
    alive_after = _alive(conn, server_id)
    pods_after = _restartable_pods(kube, node)
    ready = {p["metadata"]["name"]: p["status"]["conditions"][0]["status"] == "True" for p in kube.pods(node=node)}
    service = _service(conn, node)
    return {
        "phase": phase,
        "progress": annotations.get(PROGRESS),
        "seconds": seconds,
        "from": node,
        "to": server.compute_host,
        "server_status": server.status,
        "alive_before": alive_before[-3:],
        "alive_after": alive_after[:3],
        "vm_survived": server.status == "ACTIVE" and server.compute_host == other
        and _counter_kept(alive_before, alive_after),
        "pods_before": pods_before,
        "pods_after": pods_after,
        "pods_restarted": bool(pods_before) and all(pods_after.get(c) not in (None, n) for c, n in pods_before.items()),
        "pods_ready": all(ready.get(n, False) for n in pods_after.values()),
        "service_status": service.status,
        "total_seconds": round(time.monotonic() - started, 1),
    }  # fmt: skip


def by_hand(conn: openstack.connection.Connection, kube: Kubectl, node: str, other: str) -> dict[str, Any]:
    """Step 2: the README's drain procedure, step by step."""
    steps: dict[str, Any] = {}
    kube.cordon(node)
    service, steps["cordon_disabled_after"] = _until(
        f"nova-compute on {node} disabled", lambda: (s := _service(conn, node)).status == "disabled" and s, 60
    )
    steps["disabled_reason"] = service.disabled_reason
    moved = []
    for server in conn.compute.servers(all_projects=True, compute_host=node):
        before = _alive(conn, server.id)
        conn.compute.live_migrate_server(server, host=None, block_migration="auto")

        def arrived(server_id: str = server.id) -> Any:
            found = conn.compute.get_server(server_id)
            return found if found.status == "ACTIVE" and found.compute_host == other else None

        found, seconds = _until(f"{server.name} on {other}", arrived, MIGRATION_TIMEOUT, interval=3)

        # The README's step: the source is done with it only once its migration is `completed`.
        def completed(server_id: str = server.id) -> bool:
            return _last_migration(conn, server_id) == "completed"

        _until(f"{server.name}'s migration completed", completed, MIGRATION_TIMEOUT, interval=2)
        time.sleep(25)
        moved.append({"server": server.name, "to": found.compute_host, "seconds": seconds,
                      "counter_kept": _counter_kept(before, _alive(conn, server.id))})  # fmt: skip
    steps["migrated"] = moved
    deleted = list(_restartable_pods(kube, node).values())
    for name in deleted:
        kube.delete_pod(name)
    steps["deleted_pods"] = deleted

    def replaced() -> bool:
        pods = {p["metadata"]["name"]: p for p in kube.pods(node=node)}
        fresh = _restartable_pods(kube, node)
        return (
            len(fresh) == len(deleted)
            and not set(fresh.values()) & set(deleted)
            and all(pods[n]["status"]["conditions"][0]["status"] == "True" for n in fresh.values())
        )

    _, steps["pods_ready_after"] = _until(f"{node}'s pods Ready again", replaced, 300, interval=3)
    # `kubectl drain --ignore-daemonsets` evicts what is not a DaemonSet's: on a compute node, nothing.
    steps["drain_would_evict"] = [
        p["metadata"]["name"] for p in kube.pods(node=node)
        if not any(o["kind"] == "DaemonSet" for o in p["metadata"].get("ownerReferences", []))
    ]  # fmt: skip
    kube.cordon(node, False)
    service, steps["uncordon_enabled_after"] = _until(
        f"nova-compute on {node} enabled", lambda: (s := _service(conn, node)).status == "enabled" and s, 60
    )
    steps["service_status"] = service.status
    return steps
