"""VM-safe node pods are not awaited, and nothing that needs them starts before they serve.

OnDelete DaemonSets (libvirt, OVS under `compute.vmSafe`) carry `pulumi.com/skipAwait`, so a
template change does not hang `pulumi up`. Order then rests on their clients: each waits for
the socket it needs at start, and is itself awaited (see components/mechanism/kube.py, daemonset()).
"""

from __future__ import annotations

import shlex
from typing import Any

import pytest

from tests.conftest import plan_of
from tests.helpers import containers, name_of, objects, waits_for
from tools.plan import Plan
from tools.runtime import Registration

SKIP_AWAIT = "pulumi.com/skipAwait"
WORKLOAD_KINDS = {"Deployment", "DaemonSet", "StatefulSet", "Job", "CronJob"}
# Container of an OnDelete pod → (containers that talk to it, the socket they wait for).
# vswitchd: the agent programs it through OVSDB; neutron's agent init waits for vswitchd's
# OpenFlow connection before it connects to RabbitMQ, so its readiness implies vswitchd.
CLIENTS: dict[str, tuple[set[str], str]] = {
    "libvirt": ({"nova-compute"}, "/run/libvirt/libvirt-sock"),
    "openvswitch-db": ({"neutron-ovs-agent"}, "/run/openvswitch/db.sock"),
    "openvswitch-vswitchd": ({"neutron-ovs-agent"}, "/run/openvswitch/db.sock"),
}
DAEMON = {"nova-compute": "nova-compute", "neutron-ovs-agent": "neutron-openvswitch-agent"}
VM_SAFE: dict[str, dict[str, Any]] = {
    "prod": {},
    "staging-vm-safe": {"compute": {"vmSafe": True}},
    "all-in-one-vm-safe": {"hypervisorIsolation": "all-in-one", "compute": {"vmSafe": True}},
}
SEPARATE_PODS = ("prod", "staging-vm-safe")


def _plan(case: str) -> Plan:
    return plan_of("prod" if case == "prod" else "staging", **VM_SAFE[case])


def _on_delete(plan: Plan) -> dict[str, Registration]:
    daemonsets = objects(plan, "DaemonSet").items()
    return {n: r for n, r in daemonsets if r.inputs["spec"]["updateStrategy"]["type"] == "OnDelete"}


def _skips_await(r: Registration) -> bool:
    return (r.inputs["metadata"].get("annotations") or {}).get(SKIP_AWAIT) == "true"


def _awaited_clients(plan: Plan, served: str) -> set[str]:
    clients, _ = CLIENTS[served]
    return {
        n
        for n, r in objects(plan, "DaemonSet").items()
        if not _skips_await(r) and clients & {c["name"] for c in containers(r)}
    }


@pytest.mark.parametrize("case", [*VM_SAFE, "dev", "staging"])
def test_exactly_the_on_delete_daemonsets_skip_await(case: str) -> None:
    plan = _plan(case) if case in VM_SAFE else plan_of(case)
    on_delete = _on_delete(plan)
    assert bool(on_delete) is (case in VM_SAFE)
    for r in plan.custom:
        if r.kind in WORKLOAD_KINDS:
            assert _skips_await(r) is (r.k8s_name in on_delete and r.kind == "DaemonSet"), (r.kind, r.k8s_name)


def _start_line(script: str) -> list[str]:
    """The words of the line that execs the daemon, continuation lines joined."""
    text = script.replace("\\\n", " ")
    [line] = [line for line in text.splitlines() if line.strip().startswith("exec ")]
    return shlex.split(line)


def _script(plan: Plan, workload: Registration, container: dict[str, Any]) -> str:
    assert container["args"][0] == "bash", container["args"]
    path = container["args"][1]
    mount = next(m for m in container["volumeMounts"] if m["mountPath"] == path)
    volume = next(v for v in workload.inputs["spec"]["template"]["spec"]["volumes"] if v["name"] == mount["name"])
    return plan.by_name(volume["configMap"]["name"], "ConfigMap").inputs["data"][mount["subPath"]]


@pytest.mark.parametrize("case", list(VM_SAFE))
def test_clients_of_on_delete_pods_wait_for_their_sockets(case: str) -> None:
    plan = _plan(case)
    checked = 0
    for daemonset in _on_delete(plan).values():
        for served in (c["name"] for c in containers(daemonset)):
            if served not in CLIENTS:
                continue
            clients, socket = CLIENTS[served]
            for workload in objects(plan, "DaemonSet").values():
                for container in containers(workload):
                    if container["name"] not in clients:
                        continue
                    words = _start_line(_script(plan, workload, container))
                    assert words[:2] == ["exec", "/scripts/wait_for_sockets.sh"], (workload.k8s_name, words)
                    assert socket in words[3 : words.index("--")], (workload.k8s_name, served)
                    assert words[words.index("--") + 1] == DAEMON[container["name"]]
                    assert "/scripts/wait_for_sockets.sh" in {m["mountPath"] for m in container["volumeMounts"]}
                    checked += 1
    assert checked


@pytest.mark.parametrize("case", SEPARATE_PODS)
def test_what_waits_for_an_on_delete_pod_also_waits_for_an_awaited_client(case: str) -> None:
    plan = _plan(case)
    waiters = 0
    for name, daemonset in _on_delete(plan).items():
        served = {c["name"] for c in containers(daemonset)} & set(CLIENTS)
        for r in plan.custom:
            if r.kind in WORKLOAD_KINDS - {"CronJob"} and name in waits_for(plan, name_of(r)):
                waiters += 1
                for role in served:
                    assert waits_for(plan, name_of(r)) & _awaited_clients(plan, role), (r.k8s_name, name, role)
    assert waiters  # host discovery waits for the compute DaemonSets


def test_under_all_in_one_the_periodic_host_discovery_maps_what_the_first_run_missed() -> None:
    plan = _plan("all-in-one-vm-safe")
    assert _awaited_clients(plan, "libvirt") == set()  # nova-compute shares the OnDelete pod
    assert "compute-node" in waits_for(plan, "nova-cell-setup")
    assert objects(plan, "CronJob")["nova-cell-setup"].inputs["spec"]["schedule"] == "*/5 * * * *"
