"""nova-compute-maintenance's passes, its I/O included, against two test doubles over HTTP.

The Kubernetes API is tests/doubles/kubefake.py (no API server can run here), holding RBAC to exactly
what the prod plan's Roles and ClusterRole grant the controller's ServiceAccount; Nova and
Placement are tests/maintenance/fakenova.py (why: its docstring). The controller's own pod runs
against the real Nova in the cloud lab (tests/lab/cloud/migration_check.py): a maintenance that
live-migrates the node's servers to the other compute node.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

import pytest
from maintenance_kube import Kube, KubeError
from maintenance_nova import Nova
from maintenance_plan import ANNOTATIONS, MAINTENANCE, PHASE, PROGRESS, STATE, Phase
from nova_compute_maintenance import Config, Controller, serve_health

from components.nodes.maintenance import NAME
from tests.conftest import plan_of
from tests.doubles.kubefake import FakeKube, Grant, grants_for

from .fakenova import FakeNova, HttpTransport

NAMESPACE = "openstack"
COMPUTE = {"openstack-compute-node": "enabled"}
RESTARTED = ("libvirt", "openvswitch-db", "openvswitch-vswitchd", "neutron-ovs-agent")
NODE_PODS = (*RESTARTED, "nova-compute", "iscsid")
RBAC = ("ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding")


@pytest.fixture(scope="module")
def grants() -> set[Grant]:
    return grants_for([r.inputs for r in plan_of("prod").custom if r.kind in RBAC], NAMESPACE, NAME)


@dataclass
class World:
    kube: FakeKube
    nova: FakeNova
    controller: Controller
    now: list[float] = field(default_factory=lambda: [1000.0])
    log: list[str] = field(default_factory=list)

    def passes(self, count: int = 1) -> None:
        for _ in range(count):
            self.controller.reconcile()

    def until(self, node: str, *phases: Phase, limit: int = 30) -> list[str]:
        """Passes until the node's phase is one of `phases`; every phase seen on the way."""
        seen: list[str] = []
        for _ in range(limit):
            self.passes()
            phase = self.kube.annotations(node).get(PHASE, "")
            if not seen or seen[-1] != phase:
                seen.append(phase)
            if phase in phases:
                return seen
        raise AssertionError(f"{node} never reached {phases}: {seen}; log: {self.log[-5:]}")

    def service(self, host: str) -> tuple[bool, str | None]:
        return self.nova.hosts[host].enabled, self.nova.hosts[host].reason

    def pod_uids(self, node: str) -> dict[str, str]:
        return {p["metadata"]["labels"]["app.kubernetes.io/component"]: p["metadata"]["uid"]
                for p in self.kube.pods.values() if p["spec"]["nodeName"] == node}  # fmt: skip

    def event_reasons(self, node: str) -> list[str]:
        return [e["reason"] for e in self.kube.events if e["involvedObject"]["name"] == node]


@pytest.fixture
def world(grants: set[Grant]) -> Iterator[World]:
    with FakeKube(grants=grants).serve() as kube, FakeNova().serve() as nova:
        for name in ("n1", "n2"):
            kube.add_node(name, COMPUTE)
            nova.add_host(name)
            for component in NODE_PODS:
                labels = {"app.kubernetes.io/component": component, "app.kubernetes.io/part-of": "openstack"}
                kube.add_pod(NAMESPACE, f"{component}-{name}", name, labels)
        kube.add_node("control", {"openstack-control-plane": "enabled"})
        config = Config(NAMESPACE, "openstack-compute-node=enabled", RESTARTED, interval=0.01, restart_timeout=600)
        found = World(kube, nova, None)  # type: ignore[arg-type]
        found.controller = Controller(
            Kube(kube.url, lambda: kube.token, NAMESPACE),
            Nova(HttpTransport(nova.url)),
            config,
            clock=lambda: found.now[0],
            log=found.log.append,
        )
        yield found
        # Whatever a test did: nothing the RBAC of the plan forbids, and only the controller's annotations patched.
        assert kube.denied == []
        for method, _, body in kube.requests:
            if method == "PATCH":
                assert set(body) == {"metadata"} and set(body["metadata"]) == {"resourceVersion", "annotations"}
                assert set(body["metadata"]["annotations"]) <= set(ANNOTATIONS)


def test_cordon_disables_the_compute_service_and_uncordon_enables_it(world: World) -> None:
    world.passes()
    assert world.service("n1") == (True, None)
    world.kube.update_node("n1", unschedulable=True)
    world.passes()
    assert world.service("n1") == (False, "cordoned") and world.service("n2") == (True, None)
    world.passes()  # nothing more to do
    world.kube.update_node("n1", unschedulable=False)
    world.passes()
    assert world.service("n1") == (True, None)
    assert world.event_reasons("n1") == ["ComputeServiceDisabled", "ComputeServiceEnabled"]
    event = world.kube.events[0]
    assert event["metadata"]["namespace"] == "default" and event["involvedObject"]["uid"]
    assert event["message"] == "nova-compute on n1 disabled, reason 'cordoned'" and event["type"] == "Normal"


def test_a_disable_the_controller_did_not_make_is_kept(world: World) -> None:
    world.nova.hosts["n1"].enabled, world.nova.hosts["n1"].reason = False, "hardware check"
    world.kube.update_node("n1", unschedulable=True)
    world.passes()
    world.kube.update_node("n1", unschedulable=False)
    world.passes()
    assert world.service("n1") == (False, "hardware check")
    assert world.kube.events == []


def test_maintenance_moves_the_running_servers_away_then_restarts_the_nodes_pods(world: World) -> None:
    nova = world.nova
    moving = [nova.add_server(name, "n1") for name in ("vm-b", "vm-a")]
    stopped = nova.add_server("vm-off", "n1", status="SHUTOFF")
    elsewhere = nova.add_server("vm-other", "n2")
    before = {node: world.pod_uids(node) for node in ("n1", "n2")}
    world.kube.update_node("n1", annotations={PHASE: "requested"})
    world.passes()
    assert world.service("n1") == (False, MAINTENANCE)
    seen = world.until("n1", Phase.DONE, Phase.FAILED)
    assert seen == ["migrating", "restarting", "done"]
    hosts = {s.name: s.host for s in nova.servers.values()}
    assert hosts == {"vm-a": "n2", "vm-b": "n2", "vm-off": "n1", "vm-other": "n2"}
    assert nova.most_in_flight == 1  # one at a time
    migrated = [body for method, path, body in nova.requests if method == "POST"]
    assert migrated == [{"os-migrateLive": {"host": None, "block_migration": "auto"}}] * 2
    assert stopped.host == "n1" and elsewhere.host == "n2" and all(s.status == "ACTIVE" for s in moving)
    # The node's libvirt, OVS and agent pods were replaced; nova-compute, iscsid and n2's pods were not.
    after = world.pod_uids("n1")
    assert {c for c in NODE_PODS if after[c] != before["n1"][c]} == set(RESTARTED)
    assert world.pod_uids("n2") == before["n2"]
    annotations = world.kube.annotations("n1")
    assert annotations[PROGRESS] == (
        "2 instance(s) moved away; libvirt, neutron-ovs-agent, openvswitch-db, openvswitch-vswitchd "
        "restarted from their current templates"
    )
    assert annotations[STATE] == '{"migrated": 2}'
    assert world.service("n1") == (True, None)  # done: VMs may land here again
    assert world.event_reasons("n1") == [
        "ComputeServiceDisabled",
        "MaintenanceStarted",
        "MigratingInstance",
        "MigratingInstance",
        "InstancesMoved",
        "RestartingPods",
        "MaintenanceDone",
        "ComputeServiceEnabled",
    ]
    # Done stays done: no second round of migrations or restarts.
    world.passes(2)
    assert world.pod_uids("n1") == after and len([r for r in nova.requests if r[0] == "POST"]) == 2


def test_progress_is_reported_while_a_server_moves(world: World) -> None:
    world.nova.ticks_per_migration = 4
    server = world.nova.add_server("vm1", "n1")
    world.kube.update_node("n1", annotations={PHASE: "requested"})
    world.passes(2)
    annotations = world.kube.annotations("n1")
    assert annotations[PHASE] == "migrating"
    copied = "migration running, 50% of 1024 MiB of memory copied"
    assert annotations[PROGRESS] == f"moving vm1 ({server.id}) (1 of 1): {copied}"


def test_the_nodes_pods_stay_until_nova_has_finished_the_migration_on_the_source(world: World) -> None:
    """The server is the destination's while its source is still finishing (the record still `running`):
    restarting the source's libvirt then would put it into ERROR, as a CI run of the lab showed."""
    nova = world.nova
    nova.source_finishing_ticks = 4
    server = nova.add_server("vm1", "n1")
    before = world.pod_uids("n1")
    world.kube.update_node("n1", annotations={PHASE: "requested"})
    waited = []
    for _ in range(30):
        world.passes()
        progress = world.kube.annotations("n1").get(PROGRESS, "")
        if "n1" in nova.finishing_on:
            assert world.pod_uids("n1") == before, "a pod restarted while Nova was finishing on the source"
            if server.host == "n2" and "waiting for Nova to finish" in progress:
                waited.append(progress)
        if world.kube.annotations("n1").get(PHASE) == Phase.DONE.value:
            break
    assert waited and f"its live migration 1 of {server.id} on this node (running)" in waited[0], waited
    assert world.kube.annotations("n1")[PHASE] == Phase.DONE.value
    assert world.pod_uids("n1") != before and nova.migrations[-1]["status"] == "completed"


def test_a_migration_nova_never_finishes_on_the_source_fails_the_maintenance_after_the_timeout(world: World) -> None:
    """A source that died between the destination taking the server and `completed`: nothing in Nova ends
    that record, so the controller stops waiting after its timeout, and restarts nothing."""
    nova = world.nova
    nova.source_finishing_ticks = 10**6
    server = nova.add_server("vm1", "n1")
    before = world.pod_uids("n1")
    world.kube.update_node("n1", annotations={PHASE: "requested"})
    world.passes(6)
    assert server.host == "n2" and world.kube.annotations("n1")[PHASE] == Phase.MIGRATING.value
    world.now[0] += 601  # the config's restart_timeout is 600 s
    assert world.until("n1", Phase.FAILED)[-1] == Phase.FAILED.value
    progress = world.kube.annotations("n1")[PROGRESS]
    assert progress.startswith(f"failed: Nova's live migration 1 of {server.id} is still running 601s after"), progress
    assert world.pod_uids("n1") == before and world.service("n1") == (False, MAINTENANCE)


def test_a_node_cordoned_and_done_keeps_its_service_disabled_until_uncordoned(world: World) -> None:
    world.kube.update_node("n1", unschedulable=True, annotations={PHASE: "requested"})
    world.until("n1", Phase.DONE)
    assert world.service("n1") == (False, "cordoned")
    world.kube.update_node("n1", unschedulable=False)
    world.passes()
    assert world.service("n1") == (True, None)


def test_without_room_elsewhere_the_maintenance_is_refused(world: World) -> None:
    world.nova.add_server("big", "n1", resources={"MEMORY_MB": 6000, "VCPU": 2, "DISK_GB": 10})
    world.nova.add_server("filler", "n2", resources={"MEMORY_MB": 4000, "VCPU": 2, "DISK_GB": 10})
    before = world.pod_uids("n1")
    world.kube.update_node("n1", annotations={PHASE: "requested"})
    world.passes()
    annotations = world.kube.annotations("n1")
    assert annotations[PHASE] == "refused"
    assert annotations[PROGRESS].startswith("refused: no other compute host has room for big (")
    assert "MEMORY_MB 6000" in annotations[PROGRESS]
    assert "n2: DISK_GB 90, MEMORY_MB 3680, VCPU 30" in annotations[PROGRESS]
    assert not [r for r in world.nova.requests if r[0] == "POST"] and world.pod_uids("n1") == before
    assert world.service("n1") == (True, None)  # disabled while it checked, enabled again
    refusal = next(e for e in world.kube.events if e["reason"] == "MaintenanceRefused")
    assert refusal["type"] == "Warning" and refusal["message"].startswith("maintenance refused: no other compute host")


def test_a_disabled_or_down_host_has_no_room_to_offer(world: World) -> None:
    world.nova.add_server("vm1", "n1")
    world.nova.hosts["n2"].up = False
    world.kube.update_node("n1", annotations={PHASE: "requested"})
    world.passes()
    assert world.kube.annotations("n1")[PROGRESS].startswith("refused: no other compute host is enabled and up")


def test_a_failed_migration_stops_the_maintenance_and_keeps_the_service_disabled(world: World) -> None:
    bad = world.nova.add_server("vm-bad", "n1")
    world.nova.add_server("vm-good", "n1")
    world.nova.failing.add(bad.id)
    before = world.pod_uids("n1")
    world.kube.update_node("n1", annotations={PHASE: "requested"})
    world.until("n1", Phase.FAILED)
    progress = world.kube.annotations("n1")[PROGRESS]
    assert progress.startswith(f"failed: live migration of vm-bad ({bad.id}) ended with it still on this node")
    assert progress.endswith("its last live migration, from n1, is error")
    assert world.pod_uids("n1") == before and world.service("n1") == (False, MAINTENANCE)
    world.passes(2)
    assert world.kube.annotations("n1")[PHASE] == "failed"  # it waits for an operator
    # Requested again once the cause is gone: it starts over and ends.
    world.nova.failing.clear()
    world.kube.update_node("n1", annotations={PHASE: "requested"})
    assert world.until("n1", Phase.DONE)[-1] == "done"
    assert {s.host for s in world.nova.servers.values()} == {"n2"}


def test_a_migration_nova_refuses_fails_the_maintenance(world: World) -> None:
    server = world.nova.add_server("vm1", "n1")
    world.nova.refusing.add(server.id)
    world.kube.update_node("n1", annotations={PHASE: "requested"})
    world.until("n1", Phase.FAILED)
    assert "Nova refused to live-migrate vm1" in world.kube.annotations("n1")[PROGRESS]
    assert "409" in world.kube.annotations("n1")[PROGRESS]


def test_pods_that_never_come_back_fail_the_maintenance_after_the_timeout(world: World) -> None:
    world.kube.ready_after_lists = 10**6
    world.kube.update_node("n1", annotations={PHASE: "requested"})
    world.until("n1", Phase.RESTARTING)
    world.passes(2)
    assert world.kube.annotations("n1")[PHASE] == "restarting"
    world.now[0] += 601
    world.passes()
    assert world.kube.annotations("n1")[PHASE] == "failed"
    assert "were not Ready 600s after" in world.kube.annotations("n1")[PROGRESS]


def test_a_restarted_controller_carries_on_from_the_annotations(world: World, grants: set[Grant]) -> None:
    world.nova.ticks_per_migration = 3
    world.nova.add_server("vm1", "n1")
    world.nova.add_server("vm2", "n1")
    world.kube.update_node("n1", annotations={PHASE: "requested"})
    world.passes(2)
    assert world.kube.annotations("n1")[PHASE] == "migrating"
    old = world.controller
    fresh = Nova(HttpTransport(world.nova.url))
    world.controller = Controller(old.kube, fresh, old.config, old.clock, world.log.append)
    world.until("n1", Phase.DONE)
    assert world.nova.most_in_flight == 1 and len([r for r in world.nova.requests if r[0] == "POST"]) == 2


def test_removing_the_request_clears_the_annotations_and_enables_the_service(world: World) -> None:
    world.nova.add_server("vm1", "n1")
    world.nova.ticks_per_migration = 100
    world.kube.update_node("n1", annotations={PHASE: "requested"})
    world.passes(2)
    world.kube.update_node("n1", annotations={PHASE: None})
    world.passes()
    assert not set(world.kube.annotations("n1")) & set(ANNOTATIONS)
    assert world.service("n1") == (True, None)


def test_an_operators_newer_annotation_is_never_overwritten(world: World) -> None:
    [node] = [n for n in world.controller.kube.compute_nodes("openstack-compute-node=enabled") if n.name == "n1"]
    world.kube.update_node("n1", annotations={PHASE: "requested"})  # after the controller read the node
    with pytest.raises(KubeError) as conflict:
        world.controller.kube.annotate(node, {PHASE: "done"})
    assert conflict.value.status == 409 and world.kube.annotations("n1")[PHASE] == "requested"


def test_events_that_cannot_be_written_do_not_stop_a_maintenance(world: World) -> None:
    world.kube.grants = {g for g in world.kube.grants or () if g[1] != "events"}
    world.nova.add_server("vm1", "n1")
    world.kube.update_node("n1", annotations={PHASE: "requested"})
    world.until("n1", Phase.DONE)
    assert world.kube.events == [] and any("not recorded" in line for line in world.log)
    world.kube.denied.clear()  # refused on purpose here


def test_a_wrong_token_is_refused() -> None:
    with FakeKube().serve() as kube:
        with pytest.raises(KubeError) as refused:
            Kube(kube.url, lambda: "stolen", NAMESPACE).compute_nodes("a=b")
        assert refused.value.status == 401


def test_health_answers_while_passes_come() -> None:
    import urllib.error
    import urllib.request

    controller = Controller(None, None, Config(NAMESPACE, "a=b", ()))  # type: ignore[arg-type]
    server = serve_health(controller, 0)
    url = f"http://127.0.0.1:{server.server_address[1]}/healthz"
    try:
        with urllib.request.urlopen(url, timeout=5) as answer:
            assert answer.status == 200
        controller.last_pass -= 10_000
        with pytest.raises(urllib.error.HTTPError) as stale:
            urllib.request.urlopen(url, timeout=5)
        assert stale.value.code == 503
    finally:
        server.shutdown()
