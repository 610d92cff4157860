"""Node pods built from the role table pass every rule under their own topology, and fail
under a topology that does not have them: the pack and the program read one table."""

from __future__ import annotations

import pytest

from components.tables.roles import NodePod, Role, Topology, node_pods

from .builders import everything, node_daemonset, stack_config

CASES = [(topology, pod) for topology in Topology for pod in node_pods(topology)]
PRIVILEGE_RULES = {"privileged-containers", "host-namespaces", "host-path-volumes", "added-capabilities"}


@pytest.mark.parametrize(("topology", "pod"), CASES, ids=[f"{t.option}-{p.name}" for t, p in CASES])
@pytest.mark.parametrize("vm_safe", [False, True], ids=["rolling", "vm-safe"])
def test_every_node_pod_passes_every_rule_under_its_topology(topology: Topology, pod: NodePod, vm_safe: bool) -> None:
    config = stack_config(topology, vm_safe=vm_safe)  # every rule mandatory, hygiene too
    assert everything(node_daemonset(pod, vm_safe=vm_safe), config) == []


def asks_no_more(pod: NodePod, target: Topology) -> bool:
    """Whether the target topology has a node pod of the same labels granting all `pod` asks:
    then the pod holds fewer privileges than allowed there, which the pack has no reason to stop."""
    granted = next((p for p in node_pods(target) if (p.service, p.name) == (pod.service, pod.name)), None)
    if granted is None:
        return False
    by_image = {role.image: role for role in granted.roles}
    return all(_covers(by_image.get(role.image), role) for role in pod.roles)


def _covers(grant: Role | None, role: Role) -> bool:
    if grant is None:
        return False
    flags = ("privileged", "host_network", "host_pid", "host_ipc")
    return (
        all(getattr(grant, f) or not getattr(role, f) for f in flags)
        and set(role.capabilities) <= set(grant.capabilities)
        and set(role.host_paths) <= set(grant.host_paths)
    )


MOVES = [(pod, source, target) for source, pod in CASES for target in Topology if pod not in node_pods(target)]


@pytest.mark.parametrize(
    ("pod", "source", "target"), MOVES, ids=[f"{p.name}-{s.option}-to-{t.option}" for p, s, t in MOVES]
)
def test_a_node_pod_moved_to_a_topology_without_it_fails(pod: NodePod, source: Topology, target: Topology) -> None:
    violations = everything(node_daemonset(pod), stack_config(target))
    if asks_no_more(pod, target):
        # Option 2's compute-node under option 1, option 4's libvirt under option 5: fewer
        # containers or privileges than the target's own pod, so nothing is unlocked.
        assert violations == []
    else:
        assert {v.policy for v in violations} & PRIVILEGE_RULES, f"{pod.name} of {source} passed under {target}"
        assert all(v.enforcement == "mandatory" for v in violations)


def test_moves_cover_every_topology() -> None:
    """The table differs between all five options, so every option has pods that must fail elsewhere."""
    failing = [(s, t) for pod, s, t in MOVES if not asks_no_more(pod, t)]
    assert {source for source, _target in failing} == set(Topology)
    assert {target for _source, target in failing} == set(Topology)


def test_libvirt_of_option_5_under_option_4_loses_exactly_host_pid_and_its_extra_host_paths() -> None:
    def libvirt(topology: Topology) -> NodePod:
        return next(p for p in node_pods(topology) if p.name == "libvirt")

    option5, option4 = libvirt(Topology.POD_PER_SERVICE_HOST_PID), libvirt(Topology.POD_PER_SERVICE)
    extra = [g.path for g in option5.roles[0].host_paths if g not in option4.roles[0].host_paths]
    assert extra, "option 5's libvirt needs host paths that option 4's does not (cgroups, systemd)"
    violations = everything(node_daemonset(option5), stack_config(Topology.POD_PER_SERVICE))
    assert [v.message.split(": ")[2].split("=")[0] for v in violations if v.policy == "host-namespaces"] == [
        "spec.template.spec.hostPID"
    ]
    paths = [v.message for v in violations if v.policy == "host-path-volumes"]
    for path in extra:  # the volume and the container's mount of each
        assert sum(f'hostPath.path="{path}"' in m or f"is hostPath {path};" in m for m in paths) == 2
    assert len(paths) == 2 * len(extra)
    assert {v.policy for v in violations} == {"host-namespaces", "host-path-volumes"}
