"""Clients that call the cloud's APIs every second while something changes, and the verdict on their calls.

tests/lab/cloud/api_loop.py runs in two places: the laptop outside, through the gateway and the public
certificate (when the stack routes its public hosts through one), and the user's pod, on the
internal endpoints. Each call's outcome is a JSON line in `<prefix>-<client>.jsonl` of the run's
output. A failed call counts against a restart (a pod that went away and came back) when it
overlapped it, up to RESTART_GRACE_SECONDS after its successor was ready, and only a restart of
what the call needs (CALL_NEEDS: its API, Keystone that checks its token, their database and token
cache, and for the console Nova's RPC to the compute node), or of what held the same API's workers
(a call the restart caught, still in flight); the rest are `failed_outside_restarts`. Used by the
certificate renewal (tests/lab/cloud/rotation.py), the apply of a changed stack
(tests/lab/cloud/apply_scenario.py) and the upgrade (tests/lab/cloud/upgrade_scenario.py).
"""

from __future__ import annotations

import dataclasses
import json
import signal
import subprocess
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from components.mechanism.oslo import KEYSTONE, public_url
from tools.runtime import REPO

if TYPE_CHECKING:
    from tests.lab.cloud.deploy import Cloud
    from tests.lab.cloud.public_access import FrontDoor
    from tests.lab.cloud.userpod import UserPod

RESTART_GRACE_SECONDS = 10.0  # a failure this long after a restarted pod was ready still counts against it

# What each call of tests/lab/cloud/api_loop.py goes through: its API's workload, and the workloads a
# restart of which makes it fail (by name prefix: a Deployment's, a DaemonSet's per node group, a pod's).
# Every API checks the token with Keystone (keystonemiddleware, its cache in memcached) and reads MariaDB.
_TOKEN = ("keystone-api", "mariadb", "memcached")
CALL_API = {
    "token": "keystone-api",
    "image list": "glance-api",
    "server list": "nova-api",
    "console url": "nova-api",
    "network list": "neutron-server",
    "volume list": "cinder-api",
    "resource providers": "placement-api",
}
# The console URL is an RPC call of nova-api to the server's nova-compute over RabbitMQ, which asks
# libvirt for the domain's console (nova/compute/manager.py get_vnc_console); nova-compute and libvirt
# share one pod under hypervisorIsolation options 1 and 2 (compute-node).
CALL_NEEDS: dict[str, tuple[str, ...]] = {
    **{call: (api, *_TOKEN) for call, api in CALL_API.items()},
    "console url": ("nova-api", *_TOKEN, "rabbitmq", "nova-compute", "compute-node", "libvirt"),
}


def _restarted_name(restart: Restart) -> str:
    """The restarted workload's or pod's name, whether given as `Kind/name` or as a pod's name."""
    return restart.pod.rsplit("/", 1)[-1]


def needs(call: str, restart: Restart) -> bool:
    """Whether `call` goes through what `restart` restarted."""
    return _restarted_name(restart).startswith(CALL_NEEDS.get(call, ()))


@dataclass
class Restart:
    pod: str
    why: str
    started: float  # wall clock, as the clients stamp their calls
    ready_at: float | None = None

    def covers(self, start: float, end: float | None = None) -> bool:
        """Whether a call from `start` to `end` overlapped the restart (a call in flight when the pod
        went away fails because of it, though it started a moment before)."""
        until = (self.ready_at or time.time()) + RESTART_GRACE_SECONDS
        return start <= until and (start if end is None else end) >= self.started


@dataclass
class Client:
    name: str
    process: subprocess.Popen[bytes]
    output: Path

    def stop(self) -> list[dict[str, Any]]:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        calls = []
        for line in self.output.read_text().splitlines():
            try:
                calls.append({**json.loads(line), "client": self.name})
            except json.JSONDecodeError:
                continue  # a line cut by the stop
        return calls


def _client(cloud: Cloud, python: Path, name: str, command: Callable[[list[str]], list[str]],
            env: Mapping[str, str], server_id: str, prefix: str) -> Client:  # fmt: skip
    output = cloud.out / f"{prefix}-{name}.jsonl"
    argv = command([str(python), "-m", "tests.lab.cloud.api_loop", server_id])
    with output.open("wb") as out, (cloud.out / f"{prefix}-{name}.log").open("wb") as err:
        process = subprocess.Popen(argv, env=dict(env), cwd=REPO, stdout=out, stderr=err)
    return Client(name, process, output)


def start_clients(
    door: FrontDoor, cloud: Cloud, user: UserPod, python: Path, admin: Mapping[str, str], server_id: str,
    prefix: str = "api-loop",
) -> list[Client]:  # fmt: skip
    """The user's pod's client, and the laptop's where the stack has a public door."""
    base = {"PATH": f"{python.parent}:/usr/sbin:/usr/bin:/sbin:/bin", "PYTHONPATH": str(REPO),
            "HOME": str(user.home)}  # fmt: skip
    clients = [_client(cloud, python, "user-pod", user.command, {**base, **admin}, server_id, prefix)]
    if door.laptop is not None:
        laptop = door.laptop
        auth_url = public_url(cloud.plan.settings, KEYSTONE, "/v3")
        public = {**base, **admin, "HOME": str(laptop.home), "OS_INTERFACE": "public", "OS_AUTH_URL": auth_url,
                  **laptop.environment()}  # fmt: skip
        clients.append(_client(cloud, python, "laptop", laptop.command, public, server_id, prefix))
    return clients


def stop_all(clients: list[Client]) -> list[dict[str, Any]]:
    return [call for client in clients for call in client.stop()]


def judge(
    calls: list[dict[str, Any]], restarts: list[Restart], renewal_started: float, event: str = "renewal"
) -> dict[str, Any]:
    """The clients' calls: how many failed, before the event (a renewal, an apply: the clients themselves)
    and after, and which of those fell outside every restart made meanwhile."""
    failed = [c for c in calls if not c.get("ok")]
    lasting = [(r, _lasting(r, calls), _held_apis(r, calls)) for r in restarts]

    def excused(call: dict[str, Any]) -> bool:
        start, end = call["t"], call["t"] + call.get("seconds", 0.0)
        for restart, held, apis in lasting:
            if needs(call["call"], restart) and restart.covers(start, end):
                return True
            # A call the restart caught holds its API's workers until it ends: others of that API fail meanwhile.
            if CALL_API.get(call["call"]) in apis and held.covers(start, end):
                return True
        return False

    def ended_before(call: dict[str, Any]) -> bool:
        # The baseline is what had ended when the event began: a call under way then meets what
        # the event did (a restart a moment later) and is judged with the calls after it.
        return call["t"] + call.get("seconds", 0.0) < renewal_started

    before = [c for c in calls if ended_before(c)]
    outside = [c for c in failed if not ended_before(c) and not excused(c)]
    by_client: dict[str, dict[str, Any]] = {}
    for call in calls:
        counts = by_client.setdefault(call["client"], {"calls": 0, "failed": 0, "slowest_seconds": 0.0})
        counts["calls"] += 1
        counts["failed"] += 0 if call.get("ok") else 1
        counts["slowest_seconds"] = max(counts["slowest_seconds"], call.get("seconds", 0.0))
    return {
        "calls": len(calls),
        f"calls_before_{event}": len(before),
        f"failed_before_{event}": sum(1 for c in before if not c.get("ok")),
        "failed_calls": len(failed),
        "failed_outside_restarts": len(outside),
        "by_client": by_client,
        "failures": [{k: c.get(k) for k in ("client", "call", "status", "error", "t")} for c in failed[:20]],
        "failures_outside_restarts": [
            {k: c.get(k) for k in ("client", "call", "status", "error", "t")} for c in outside[:20]
        ],
    }


def _held_apis(restart: Restart, calls: list[dict[str, Any]]) -> set[str]:
    """The APIs whose workers a call of them, caught by the restart (it needs what restarted), held."""
    ready = restart.ready_at or time.time()
    return {
        CALL_API[c["call"]]
        for c in calls
        if c["call"] in CALL_API and restart.started <= c["t"] <= ready and needs(c["call"], restart)
    }


def _lasting(restart: Restart, calls: list[dict[str, Any]]) -> Restart:
    """A restart's effects last until the calls it caught have ended. A call made while it ran may hang on
    what it stopped (nova-api waits out rpc_response_timeout, 60 s, for a stopping nova-compute to answer a
    console URL), holding the API's workers: what fails meanwhile, its readiness probe among it, fails
    because of the restart (prod's lab, both compute nodes rolling at once)."""
    ready = restart.ready_at or time.time()
    caught = [c["t"] + c.get("seconds", 0.0) for c in calls if restart.started <= c["t"] <= ready]
    return dataclasses.replace(restart, ready_at=max([ready, *caught]))


def outages(calls: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per client, its longest outage: the longest run of consecutive failed calls of one API (one call
    name: `console url`, `image list`, ...), from the start of its first failed call to the end of its last.

    What a user of that API saw: every try failing, one a round. It is a lower bound (the API may have
    failed up to a round before the first failed call and after the last); a run broken by one answered
    call is two outages. Calls of different APIs do not join: the console URL failing while Glance answers
    is an outage of the console URL, not of the cloud."""
    found: dict[str, dict[str, Any]] = {}
    runs: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for call in sorted(calls, key=lambda c: c["t"]):
        client = found.setdefault(call["client"], {"calls": 0, "failed": 0, "longest_outage_s": 0.0, "longest": None})
        client["calls"] += 1
        key = (call["client"], call["call"])
        if call.get("ok"):
            runs.pop(key, None)
            continue
        client["failed"] += 1
        run = runs.setdefault(key, [])
        run.append(call)
        seconds = round(run[-1]["t"] + run[-1].get("seconds", 0.0) - run[0]["t"], 1)
        if client["longest"] is None or seconds > client["longest_outage_s"]:
            client["longest_outage_s"] = seconds
            client["longest"] = {"call": call["call"], "from": run[0]["t"], "to": run[-1]["t"] + run[-1].get(
                "seconds", 0.0), "failed_calls": len(run), "last_error": call.get("error", "")[:200]}  # fmt: skip
    return found
