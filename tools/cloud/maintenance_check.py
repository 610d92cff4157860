"""nova-compute-maintenance against the real Nova of the running cloud, its Kubernetes side a double.

Run by tools/cloud/scenario.py once its server is ACTIVE on the one node. No API server can run
here, so the controller's Kubernetes API is tools/kubefake.py, holding exactly the RBAC the plan
grants its ServiceAccount (MAINTENANCE_RBAC); its Nova is the cloud's own, reached with the
Deployment's own credentials and settings (MAINTENANCE_ENV: its container's environment as the
kubelet resolves it). With the controller's loop running (every 2 s):

1. cordon the node: the real nova-compute service must be disabled, reason `cordoned`, within a minute;
2. uncordon: enabled again, within a minute;
3. an operator disables the service with a reason of their own, then cordon and uncordon: it stays disabled;
4. annotate `openstack.org/maintenance=requested`: refused, since no other host has room (there
   is none), said in the annotation and a Warning Event; the service ends enabled, the VM untouched.

Then, with the loop stopped, the live migration call itself: the controller's request for the VM
(Nova answers 202), the scheduler finds no other host, the server stays ACTIVE here with its
migration record in `error`, and the controller's decision for that outcome is `failed`.
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys
import threading
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

import openstack

from tools.kubefake import FakeKube, grants_for

# The controller's modules import each other as they lie side by side in the pod's /scripts.
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "components" / "scripts"))
import maintenance_plan as plan
from maintenance_kube import Kube
from maintenance_nova import Nova, SdkTransport
from nova_compute_maintenance import Config, Controller

LOOP_SECONDS = 2.0
WITHIN = 60.0  # the issue: a cordon reaches Nova within a minute
MIGRATION_TIMEOUT = 300.0
OPERATOR_REASON = "cloud test: an operator's own disable"


def _until(what: str, check: Callable[[], Any], timeout: float, interval: float = 0.5) -> tuple[Any, float]:
    started = time.monotonic()
    while True:
        found = check()
        if found:
            return found, round(time.monotonic() - started, 1)
        if time.monotonic() - started > timeout:
            raise TimeoutError(f"{what}: not after {timeout:.0f}s")
        time.sleep(interval)


def _service(admin: openstack.connection.Connection, host: str) -> Any:
    """The node's nova-compute service as the cloud admin sees it."""
    return next(iter(admin.compute.services(host=host, binary="nova-compute")))


def _state(service: Any) -> dict[str, Any]:
    return {"status": service.status, "reason": service.disabled_reason}


def check(admin: openstack.connection.Connection, facts: dict[str, Any]) -> None:
    server = facts.get("server") or {}
    found: dict[str, Any] = {"errors": {}}
    facts["maintenance"] = found
    if server.get("status") != "ACTIVE" or not server.get("host"):
        found["not_run"] = "no ACTIVE server to hold the node"
        return
    host, server_id = server["host"], server["id"]
    env = json.loads(os.environ["MAINTENANCE_ENV"])
    rbac = json.loads(os.environ["MAINTENANCE_RBAC"])
    config = dataclasses.replace(Config.from_env(env), interval=LOOP_SECONDS)
    nova = Nova(SdkTransport.connect(env))
    kube = FakeKube(grants=grants_for(rbac["objects"], rbac["namespace"], rbac["account"]))
    labels = dict(term.split("=", 1) for term in config.node_selector.split(","))
    kube.add_node(host, labels)
    log: list[str] = []
    with kube.serve():
        api = Kube(kube.url, lambda: kube.token, config.namespace, reporter="cloud-test")
        controller = Controller(api, nova, config, log=log.append)
        stop = threading.Event()
        loop = threading.Thread(target=controller.run, args=(stop,), daemon=True)
        loop.start()
        steps: list[tuple[str, Callable[[], dict[str, Any]]]] = [
            ("cordon", lambda: _cordon(admin, kube, host, True)),
            ("uncordon", lambda: _cordon(admin, kube, host, False)),
            ("operator_disable", lambda: _operator_disable(admin, kube, controller, host)),
            ("requested", lambda: _requested(admin, kube, host, server_id)),
        ]
        try:
            for name, step in steps:
                _run(found, name, step)
        finally:
            stop.set()
            loop.join(timeout=60)
        found["denied"] = kube.denied
        found["patched_only_annotations"] = all(
            set(body) == {"metadata"} and set(body["metadata"]["annotations"]) <= set(plan.ANNOTATIONS)
            for method, _, body in kube.requests
            if method == "PATCH"
        )
        found["events"] = [{"reason": e["reason"], "type": e["type"], "message": e["message"]} for e in kube.events]
        found["log"] = log[-20:]
    _run(found, "migration_attempt", lambda: _migration_attempt(nova, host, server_id))
    _leave_enabled(admin, host)


def _run(found: dict[str, Any], name: str, step: Callable[[], dict[str, Any]]) -> None:
    try:
        found[name] = step()
    except Exception as error:  # each step's failure is a finding of the report
        found["errors"][name] = f"{type(error).__name__}: {error}\n{traceback.format_exc()[-1200:]}"


def _cordon(admin: openstack.connection.Connection, kube: FakeKube, host: str, cordon: bool) -> dict[str, Any]:
    wanted = "disabled" if cordon else "enabled"
    kube.update_node(host, unschedulable=cordon)
    service, seconds = _until(
        f"nova-compute on {host} {wanted}",
        lambda: (s := _service(admin, host)).status == wanted and s,
        WITHIN,
    )
    return {**_state(service), "seconds": seconds}


def _passes(controller: Controller, count: int) -> None:
    start = controller.passes
    _until(f"{count} passes of the controller", lambda: controller.passes >= start + count, WITHIN)


def _operator_disable(
    admin: openstack.connection.Connection, kube: FakeKube, controller: Controller, host: str
) -> dict[str, Any]:
    admin.compute.disable_service(_service(admin, host), disabled_reason=OPERATOR_REASON)
    kube.update_node(host, unschedulable=True)
    _passes(controller, 2)
    kube.update_node(host, unschedulable=False)
    _passes(controller, 2)
    after = _state(_service(admin, host))
    admin.compute.enable_service(_service(admin, host))
    return {**after, "kept": after == {"status": "disabled", "reason": OPERATOR_REASON}}


def _requested(admin: openstack.connection.Connection, kube: FakeKube, host: str, server_id: str) -> dict[str, Any]:
    earlier = len(kube.events)
    kube.update_node(host, annotations={plan.PHASE: plan.Phase.REQUESTED.value})
    phase, seconds = _until(
        "the maintenance decided",
        lambda: (p := kube.annotations(host).get(plan.PHASE)) != plan.Phase.REQUESTED and p,
        WITHIN,
    )
    # The same pass enables the service again after a refusal.
    service, _ = _until(
        f"nova-compute on {host} enabled", lambda: (s := _service(admin, host)).status == "enabled" and s, 30
    )
    vm = admin.compute.get_server(server_id)
    events = [{"reason": e["reason"], "type": e["type"]} for e in kube.events[earlier:]]
    return {
        "phase": phase,
        "progress": kube.annotations(host).get(plan.PROGRESS),
        "seconds": seconds,
        "events": events,
        "service_status": service.status,
        "server_status": vm.status,
        "server_host": vm.compute_host,
    }


def _migration_attempt(nova: Nova, host: str, server_id: str) -> dict[str, Any]:
    [vm] = [s for s in nova.servers_on(host) if s.id == server_id]
    nova.live_migrate(vm)  # raises unless Nova answers 202
    busy = next((s for s in nova.servers_on(host) if s.id == server_id), vm)

    def settled() -> list[plan.Server] | None:
        servers = nova.servers_on(host)
        return servers if not any(s.id == server_id and s.busy for s in servers) else None

    servers, seconds = _until("the live migration ended", settled, MIGRATION_TIMEOUT, interval=2)
    here = next((s for s in servers if s.id == server_id), None)
    detail = nova.last_live_migration(here or vm)
    decision = plan.migration_step(servers, plan.State(instance=server_id), detail)
    return {
        "accepted": True,
        # 'migrating' while Nova works, None once the scheduler has already said no.
        "task_state_after_request": busy.task_state,
        "seconds": seconds,
        "still_here": here is not None,
        "status": here.status if here else None,
        "last_live_migration": detail,
        "decision": decision.phase.value,
        "decision_progress": decision.progress,
    }


def _leave_enabled(admin: openstack.connection.Connection, host: str) -> None:
    """Whatever failed above, the next steps of the cloud test need the service enabled."""
    service = _service(admin, host)
    if service.status != "enabled" and service.disabled_reason in (*plan.OWN_REASONS, OPERATOR_REASON):
        admin.compute.enable_service(service)
