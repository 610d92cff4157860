"""What a plan change does to running VMs: does it restart libvirt or Open vSwitch, and does that kill them?

Whether a libvirt restart kills its VMs is the topology's (README, Hypervisor isolation;
components/tables/roles.py): QEMU runs in the libvirt container's cgroup, except under
pod-per-service-host-pid, where libvirt moves itself and QEMU into a cgroup of the host
(host PID namespace), so they outlive the pod. Under all-in-one libvirt shares one pod with
OVS, nova-compute and the agent, so a change to any of them restarts it. Under the baremetal
options the host runs libvirt and OVS, and no pod holds them. With `compute.vmSafe` the
libvirt and OVS DaemonSets are OnDelete: nothing restarts until an operator deletes a pod.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from components.tables.roles import Topology

if TYPE_CHECKING:
    from tools.plan_diff import PlanView

HYPERVISOR = ("libvirt",)
DATAPATH = ("openvswitch-db", "openvswitch-vswitchd")
KILLS = "kills the VMs on each node whose libvirt pod restarts: QEMU runs in that pod's cgroup"
# What restarting each kind of pod does to the VMs of a node, per topology.
LIBVIRT_RESTART = {
    Topology.ALL_IN_ONE: KILLS + " (one pod holds libvirt, OVS, nova-compute and the agent)",
    Topology.BAREMETAL_HYPERVISOR_SHARED_POD: "no pod holds libvirt: the host runs it, VMs are not touched",
    Topology.BAREMETAL_HYPERVISOR: "no pod holds libvirt: the host runs it, VMs are not touched",
    Topology.POD_PER_SERVICE: KILLS,
    Topology.POD_PER_SERVICE_HOST_PID: (
        "keeps the VMs running: libvirt moved itself and QEMU out of the pod's cgroup (host PID namespace)"
    ),
}
OVS_RESTART = {
    Topology.ALL_IN_ONE: "restarts with libvirt, which kills the VMs (above)",
    Topology.BAREMETAL_HYPERVISOR_SHARED_POD: "no pod holds Open vSwitch: the host runs it",
    Topology.BAREMETAL_HYPERVISOR: "no pod holds Open vSwitch: the host runs it",
    Topology.POD_PER_SERVICE: (
        "VMs keep running; their traffic on that node stops until vswitchd is back and the OVS agent restored its flows"
    ),
}
OVS_RESTART[Topology.POD_PER_SERVICE_HOST_PID] = OVS_RESTART[Topology.POD_PER_SERVICE]


def _containers(obj: dict[str, Any]) -> set[str]:
    pod = ((obj["inputs"].get("spec") or {}).get("template") or {}).get("spec") or {}
    return {c["name"] for c in (*pod.get("initContainers", []), *pod.get("containers", []))}


def _holds(obj: dict[str, Any]) -> list[str]:
    names = _containers(obj)
    return [role for role in (*HYPERVISOR, *DATAPATH) if role in names]


def vm_impact(
    old: PlanView, new: PlanView, rolls: list[dict[str, Any]], removed: list[dict[str, Any]]
) -> dict[str, Any]:
    topology = Topology.parse(new.settings["hypervisorIsolation"])
    by_ref = {(o["kind"], o["name"]): o for o in new.objects.values()}
    old_by_ref = {(o["kind"], o["name"]): o for o in old.objects.values()}
    touched = []
    for roll in rolls:
        obj = by_ref.get((roll["kind"], roll["name"]))
        if roll["kind"] == "DaemonSet" and obj is not None and _holds(obj):
            touched.append(
                {
                    "name": roll["name"],
                    "holds": _holds(obj),
                    "restarts": roll["restarts"],
                    "why": "its pod template changes",
                }
            )
    for gone in removed:
        obj = old_by_ref.get((gone["kind"], gone["name"]))
        if gone["kind"] == "DaemonSet" and obj is not None and _holds(obj):
            touched.append(
                {"name": gone["name"], "holds": _holds(obj), "restarts": True, "why": "deleted, and its pods with it"}
            )
    libvirt = any(set(t["holds"]) & set(HYPERVISOR) for t in touched)
    ovs = any(set(t["holds"]) & set(DATAPATH) for t in touched)
    restarting = [t for t in touched if t["restarts"]]
    per_topology = {
        t.value: {
            "option": t.option,
            **({"libvirt": LIBVIRT_RESTART[t]} if libvirt else {}),
            **({"openvswitch": OVS_RESTART[t]} if ovs else {}),
        }
        for t in Topology
    }
    if not touched:
        verdict = "No libvirt or Open vSwitch pod template changes: running VMs are not touched."
    elif not restarting:
        verdict = (
            "libvirt/Open vSwitch templates change, but their DaemonSets are OnDelete (compute.vmSafe): "
            "`pulumi up` restarts no pod. Each node's pods take the new template when an operator deletes them, "
            "after moving its VMs away; then: " + _effect(topology, libvirt, ovs)
        )
    else:
        verdict = f"Under {topology.value} ({topology.option}): " + _effect(topology, libvirt, ovs)
    return {
        "topology": topology.value,
        "vm_safe": bool((new.settings.get("compute") or {}).get("vmSafe")),
        "touched": touched,
        "kills_vms": bool(restarting) and libvirt and "kills" in LIBVIRT_RESTART[topology],
        "verdict": verdict,
        "per_topology": per_topology,
    }


def _effect(topology: Topology, libvirt: bool, ovs: bool) -> str:
    effects = ([f"restarting libvirt {LIBVIRT_RESTART[topology]}"] if libvirt else []) + (
        [f"restarting Open vSwitch: {OVS_RESTART[topology]}"] if ovs else []
    )
    return "; ".join(effects) + "."
