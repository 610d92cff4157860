"""nova-compute-maintenance's decisions, as pure functions: given what a node and Nova say, what next."""

from __future__ import annotations

import pytest
from maintenance_plan import (
    CORDONED,
    MAINTENANCE,
    Need,
    Node,
    Phase,
    Pod,
    Room,
    Server,
    Service,
    ServiceChange,
    State,
    migration_refused,
    migration_step,
    no_room,
    requested_step,
    restart_step,
    room,
    service_change,
    service_of,
)

ENABLED = Service("s1", "n1", enabled=True)


def disabled(reason: str | None) -> Service:
    return Service("s1", "n1", enabled=False, reason=reason)


@pytest.mark.parametrize(
    ("unschedulable", "phase", "service", "change"),
    [
        # Cordon and uncordon.
        (True, None, ENABLED, ServiceChange(enable=False, reason=CORDONED)),
        (False, None, disabled(CORDONED), ServiceChange(enable=True)),
        (True, None, disabled(CORDONED), None),
        (False, None, ENABLED, None),
        # Someone else's disable is theirs: an operator's, nova-compute's own (AUTO: ...), its preStop hook's.
        (False, None, disabled("hardware check"), None),
        (False, None, disabled("AUTO: Connection to libvirt lost: 1"), None),
        (False, None, disabled("disabled by the nova-compute pod while it stopped"), None),
        (False, None, disabled(None), None),
        (False, None, disabled("maintenance"), None),  # an operator's word, not the controller's reason
        (True, None, disabled("hardware check"), None),
        # Maintenance holds the service disabled until it is done or refused; a failure keeps it so.
        (False, Phase.REQUESTED, ENABLED, ServiceChange(enable=False, reason=MAINTENANCE)),
        (False, Phase.MIGRATING, ENABLED, ServiceChange(enable=False, reason=MAINTENANCE)),
        (False, Phase.RESTARTING, disabled(MAINTENANCE), None),
        (False, Phase.FAILED, disabled(MAINTENANCE), None),
        (False, Phase.DONE, disabled(MAINTENANCE), ServiceChange(enable=True)),
        (False, Phase.REFUSED, disabled(MAINTENANCE), ServiceChange(enable=True)),
        # Cordoned and done: it stays disabled until the uncordon, whichever reason disabled it.
        (True, Phase.DONE, disabled(MAINTENANCE), None),
        (True, Phase.REQUESTED, ENABLED, ServiceChange(enable=False, reason=CORDONED)),
        (False, None, None, None),
    ],
)
def test_the_service_follows_the_node(
    unschedulable: bool, phase: Phase | None, service: Service | None, change: ServiceChange | None
) -> None:
    assert service_change(unschedulable, phase, service) == change


def test_a_nodes_service_is_found_by_its_name_or_its_hostname_label() -> None:
    services = [Service("a", "n1", True), Service("b", "n2.example.com", True)]
    assert service_of(Node("n1", "u", False), services) == services[0]
    assert service_of(Node("n2", "u", False, hostname="n2.example.com"), services) == services[1]
    assert service_of(Node("n3", "u", False, hostname="n3"), services) is None


def test_unknown_annotations_and_state_are_read_as_nothing() -> None:
    node = Node("n1", "u", False, {"openstack.org/maintenance": "please", "openstack.org/maintenance-state": "{"})
    assert node.phase is None and node.state == State()
    state = State(instance="x", migrated=2, old_pods=("a",), components=("libvirt",), since=5.0)
    assert State.parse(state.dump()) == state


def test_room_is_placements_capacity_less_its_usage() -> None:
    inventories = {
        "VCPU": {"total": 8, "reserved": 0, "allocation_ratio": 4.0, "max_unit": 8},
        "MEMORY_MB": {"total": 8192, "reserved": 512, "allocation_ratio": 1.5, "max_unit": 8192},
    }
    found = room("n2", inventories, {"VCPU": 30, "MEMORY_MB": 1000})
    assert found.free == {"VCPU": 2, "MEMORY_MB": 10520} and found.max_unit == {"VCPU": 8, "MEMORY_MB": 8192}


def need(name: str, memory: int, vcpus: int = 1) -> Need:
    return Need(name, {"MEMORY_MB": memory, "VCPU": vcpus})


def test_servers_fit_when_every_one_finds_a_host_largest_first() -> None:
    rooms = [Room("n2", {"MEMORY_MB": 3000, "VCPU": 8}), Room("n3", {"MEMORY_MB": 2000, "VCPU": 8})]
    assert no_room([need("a", 1000), need("b", 2000), need("c", 2000)], rooms) is None
    # 2000 + 2000 + 1500 do not fit into 3000 + 2000, whatever the order.
    why = no_room([need("a", 1500), need("b", 2000), need("c", 2000)], rooms)
    assert why == (
        "no other compute host has room for a (MEMORY_MB 1500, VCPU 1); "
        "left for it: n2: MEMORY_MB 1000, VCPU 7; n3: MEMORY_MB 0, VCPU 7"
    )


def test_a_server_larger_than_a_hosts_max_unit_does_not_fit_there() -> None:
    rooms = [Room("n2", {"MEMORY_MB": 10000, "VCPU": 64}, {"VCPU": 4})]
    assert no_room([need("big", 1000, vcpus=8)], rooms) is not None
    assert no_room([need("small", 1000, vcpus=4)], rooms) is None


def test_a_resource_class_the_host_lacks_does_not_fit() -> None:
    assert no_room([Need("gpu", {"VGPU": 1})], [Room("n2", {"MEMORY_MB": 10000})]) is not None


def test_without_another_host_a_maintenance_is_refused_and_says_so() -> None:
    servers = [Server("1", "vm1", "ACTIVE")]
    step = requested_step(servers, [need("vm1 (1)", 128)], [])
    assert step.phase is Phase.REFUSED
    assert step.progress == "refused: no other compute host is enabled and up to take vm1 (1) (MEMORY_MB 128, VCPU 1)"
    assert step.event is not None and step.event.warning and step.event.reason == "MaintenanceRefused"
    assert not step.migrate and not step.delete


def test_an_empty_node_needs_no_room() -> None:
    step = requested_step([Server("1", "off", "SHUTOFF")], [], [])
    assert step.phase is Phase.MIGRATING and step.state == State()


def test_migrations_go_one_at_a_time_running_servers_only() -> None:
    servers = [Server("2", "vm2", "ACTIVE"), Server("1", "vm1", "PAUSED"), Server("3", "off", "SHUTOFF")]
    first = migration_step(servers, State())
    assert first.migrate == servers[1] and first.state == State(instance="1")
    assert first.progress == "moving vm1 (1) (1 of 2)"
    moving = [Server("2", "vm2", "ACTIVE"), Server("1", "vm1", "MIGRATING", "migrating"), servers[2]]
    step = migration_step(moving, first.state, "migration running, 50% of 1024 MiB of memory copied")
    assert step.migrate is None and step.phase is Phase.MIGRATING
    assert step.progress == "moving vm1 (1) (1 of 2): migration running, 50% of 1024 MiB of memory copied"
    second = migration_step([servers[0], servers[2]], first.state)  # vm1 left the node
    assert second.migrate == servers[0] and second.state == State(instance="2", migrated=1)
    last = migration_step([servers[2]], second.state)
    assert last.phase is Phase.RESTARTING and last.state == State(migrated=2)
    assert "2 instance(s) moved away; not running, so they stay here: off (3)" in last.progress


def test_a_server_nova_is_busy_with_is_waited_for() -> None:
    servers = [Server("1", "vm1", "ACTIVE", "resize_prep"), Server("2", "vm2", "ACTIVE")]
    step = migration_step(servers, State())
    assert step.migrate is None and step.phase is Phase.MIGRATING and "vm1 (1) (resize_prep)" in step.progress


def test_a_migration_that_ends_with_the_server_still_here_fails_the_maintenance() -> None:
    servers = [Server("1", "vm1", "ACTIVE")]
    step = migration_step(servers, State(instance="1"), "its last live migration, from n1, is error")
    assert step.phase is Phase.FAILED and step.migrate is None
    assert step.progress.startswith("failed: live migration of vm1 (1) ended with it still on this node")
    assert "is error" in step.progress and step.event is not None and step.event.warning
    refused = migration_refused(servers[0], "409: Cannot 'os-migrateLive'", State())
    assert refused.phase is Phase.FAILED and "Nova refused" in refused.progress


COMPONENTS = ("libvirt", "openvswitch-db", "neutron-ovs-agent")


def pods(*specs: tuple[str, str, bool]) -> list[Pod]:
    return [Pod(f"{component}-{uid}", uid, component, ready) for component, uid, ready in specs]


def test_restart_deletes_the_listed_pods_once_then_waits_for_their_successors() -> None:
    on_node = pods(("libvirt", "a", True), ("openvswitch-db", "b", True), ("nova-compute", "c", True))
    first = restart_step(on_node, State(migrated=3), COMPONENTS, now=100.0, timeout=60)
    assert [p.uid for p in first.delete] == ["a", "b"] and first.phase is Phase.RESTARTING
    assert first.state == State(migrated=3, old_pods=("a", "b"), components=("libvirt", "openvswitch-db"), since=100.0)
    # The old libvirt pod is still going, the new OVSDB pod not ready yet.
    waiting = restart_step(
        pods(("libvirt", "a", True), ("openvswitch-db", "d", False)), first.state, COMPONENTS, 120.0, 60
    )
    assert not waiting.delete and waiting.phase is Phase.RESTARTING
    assert waiting.progress == "waiting for the new pods of libvirt, openvswitch-db to be Ready"
    done = restart_step(pods(("libvirt", "e", True), ("openvswitch-db", "d", True)), first.state, COMPONENTS, 130, 60)
    assert done.phase is Phase.DONE and done.state == State(migrated=3)
    assert done.progress == "3 instance(s) moved away; libvirt, openvswitch-db restarted from their current templates"
    late = restart_step(pods(("libvirt", "e", True)), first.state, COMPONENTS, 161.0, 60)
    assert late.phase is Phase.FAILED and "openvswitch-db" in late.progress


def test_a_pod_being_deleted_is_not_its_own_successor() -> None:
    state = State(old_pods=("a",), components=("libvirt",), since=0.0)
    going = [Pod("libvirt-x", "x", "libvirt", ready=True, deleting=True)]
    assert restart_step(going, state, COMPONENTS, 1.0, 60).phase is Phase.RESTARTING


def test_nothing_to_restart_is_done() -> None:
    step = restart_step(pods(("nova-compute", "c", True)), State(), COMPONENTS, 0.0, 60)
    assert step.phase is Phase.DONE and not step.delete


def test_a_task_of_novas_that_never_ends_fails_the_maintenance_naming_the_server() -> None:
    stuck = [Server("1", "vm1", "ACTIVE", "resize_prep"), Server("2", "vm2", "ACTIVE")]
    first = migration_step(stuck, State(), now=1000.0, task_timeout=600.0)
    assert first.phase is Phase.MIGRATING and first.state.busy_since == 1000.0
    later = migration_step(stuck, first.state, now=1500.0, task_timeout=600.0)
    assert later.phase is Phase.MIGRATING and later.state.busy_since == 1000.0  # the same wait, not a new one
    failed = migration_step(stuck, later.state, now=1601.0, task_timeout=600.0)
    assert failed.phase is Phase.FAILED and failed.migrate is None
    assert "vm1 (1) (ACTIVE, task resize_prep)" in failed.progress and "601s" in failed.progress
    assert failed.event is not None and failed.event.warning and "openstack server show" in failed.event.message


def test_a_live_migration_in_flight_is_waited_for_within_the_task_bound() -> None:
    moving = [Server("1", "vm1", "MIGRATING", "migrating")]
    step = migration_step(moving, State(instance="1"), "50% copied", now=10.0, task_timeout=100.0)
    assert step.phase is Phase.MIGRATING and step.state.busy_since == 10.0
    assert migration_step(moving, step.state, now=109.0, task_timeout=100.0).phase is Phase.MIGRATING
    failed = migration_step(moving, step.state, now=111.0, task_timeout=100.0)
    assert failed.phase is Phase.FAILED and "vm1 (1) (MIGRATING, task migrating)" in failed.progress
    # Its next move starts its own wait: the bound is per task, not per maintenance.
    moved = migration_step([Server("2", "vm2", "ACTIVE")], step.state, now=500.0, task_timeout=100.0)
    assert moved.migrate is not None and moved.state.busy_since is None


@pytest.mark.parametrize(
    ("status", "resolves"),
    [("RESCUE", "openstack server unrescue 1"), ("VERIFY_RESIZE", "openstack server resize confirm 1")],
)
def test_a_running_guest_nova_cannot_move_refuses_the_maintenance_and_says_what_resolves_it(
    status: str, resolves: str
) -> None:
    servers = [Server("1", "vm1", status), Server("2", "vm2", "ACTIVE")]
    step = requested_step(servers, [need("vm2 (2)", 128)], [Room("n2", {"MEMORY_MB": 4096, "VCPU": 4})])
    assert step.phase is Phase.REFUSED and f"vm1 (1) is {status}" in step.progress and resolves in step.progress
    assert step.event is not None and step.event.warning
    # Rescued or resized while the others moved: it fails before any pod is restarted.
    late = migration_step(servers[:1], State(migrated=1))
    assert late.phase is Phase.FAILED and not late.delete and resolves in late.progress
