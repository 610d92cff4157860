"""What nova-compute-maintenance decides: given what a node and Nova say, what to do next.

Pure functions over plain values, no I/O: nova_compute_maintenance.py reads the Kubernetes API
and Nova, asks these functions, and carries out the answer. Everything the controller must
remember between passes (and across its own restarts) lives in the node's annotations:

- `openstack.org/maintenance`: the phase. An operator writes `requested`; the controller writes
  `migrating`, `restarting`, then `done`, or `refused` / `failed`.
- `openstack.org/maintenance-progress`: what it is doing, for people.
- `openstack.org/maintenance-state`: its own bookkeeping (JSON).

Standard library only: the script runs in the kolla-toolbox image.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from enum import StrEnum

PHASE = "openstack.org/maintenance"
PROGRESS = "openstack.org/maintenance-progress"
STATE = "openstack.org/maintenance-state"
ANNOTATIONS = (PHASE, PROGRESS, STATE)

# The reasons this controller disables a compute service with, and so the only ones it re-enables.
# The maintenance reason names the annotation: an operator's own "maintenance" is not mistaken for it.
CORDONED = "cordoned"
MAINTENANCE = PHASE
OWN_REASONS = (CORDONED, MAINTENANCE)
# Nova live-migrates only these (nova/compute/api.py, live_migrate: vm_states ACTIVE and PAUSED).
LIVE_MIGRATABLE = ("ACTIVE", "PAUSED")
# Running guests Nova cannot live-migrate (nova/compute/api.py: live_migrate checks vm_state ACTIVE or
# PAUSED): a rescued server runs its rescue image, a resized one waits on this node for its owner to confirm
# or revert. Left here, the restart of the node's libvirt would take them down, so a maintenance ends
# before it restarts anything, and says what resolves each one.
STAY_RUNNING = {
    "RESCUE": "unrescue it: `openstack server unrescue {id}`",
    "VERIFY_RESIZE": "confirm or revert its resize: `openstack server resize confirm {id}` (or `resize revert`)",
}
# Room is compared first by memory, then CPUs, then disk: what runs out first on most clouds.
ORDER = ("MEMORY_MB", "VCPU", "DISK_GB")


class Phase(StrEnum):
    REQUESTED = "requested"
    MIGRATING = "migrating"
    RESTARTING = "restarting"
    DONE = "done"
    REFUSED = "refused"
    FAILED = "failed"


# The controller works on a node in these phases.
WORKING = frozenset({Phase.REQUESTED, Phase.MIGRATING, Phase.RESTARTING})
# The node's compute service stays disabled in these: no new VM may land there. A failed
# maintenance keeps it disabled until an operator looks (requests again, or removes the annotation).
HOLDING = WORKING | {Phase.FAILED}


@dataclass(frozen=True)
class State:
    """The controller's bookkeeping for one maintenance of one node."""

    instance: str | None = None  # the server being live-migrated
    migrated: int = 0  # servers moved away so far
    old_pods: tuple[str, ...] = ()  # uids of the pods deleted to restart
    components: tuple[str, ...] = ()  # their app.kubernetes.io/component
    since: float | None = None  # when they were deleted (seconds since the epoch)
    busy_since: float | None = None  # when the controller began waiting for Nova to finish a task

    def dump(self) -> str:
        return json.dumps({k: v for k, v in asdict(self).items() if v not in (None, 0, ())}, sort_keys=True)

    @classmethod
    def parse(cls, text: str | None) -> State:
        """What an annotation holds; anything unreadable is a fresh start."""
        try:
            data = json.loads(text or "{}")
            return cls(
                instance=data.get("instance"),
                migrated=int(data.get("migrated", 0)),
                old_pods=tuple(data.get("old_pods", ())),
                components=tuple(data.get("components", ())),
                since=data.get("since"),
                busy_since=data.get("busy_since"),
            )
        except (ValueError, TypeError, AttributeError):
            return cls()


@dataclass(frozen=True)
class Node:
    name: str
    uid: str
    unschedulable: bool  # cordoned
    annotations: Mapping[str, str] = field(default_factory=dict)
    resource_version: str = ""
    hostname: str = ""  # its kubernetes.io/hostname label

    @property
    def phase(self) -> Phase | None:
        try:
            return Phase(self.annotations.get(PHASE, ""))
        except ValueError:
            return None  # no maintenance, or a value nobody here wrote

    @property
    def state(self) -> State:
        return State.parse(self.annotations.get(STATE))


@dataclass(frozen=True)
class Service:
    """A nova-compute service as GET /os-services (microversion 2.53) shows it."""

    id: str
    host: str
    enabled: bool
    reason: str | None = None
    up: bool = True


@dataclass(frozen=True)
class Server:
    id: str
    name: str
    status: str
    task_state: str | None = None

    @property
    def busy(self) -> bool:
        """Nova is doing something to it (a migration sets task_state 'migrating' before the API answers)."""
        return self.task_state is not None or self.status == "MIGRATING"

    @property
    def movable(self) -> bool:
        return self.status in LIVE_MIGRATABLE

    def label(self) -> str:
        return f"{self.name} ({self.id})" if self.name else self.id


@dataclass(frozen=True)
class Pod:
    name: str
    uid: str
    component: str
    ready: bool
    deleting: bool = False


@dataclass(frozen=True)
class Need:
    """What one server holds on its node in Placement, and so must find elsewhere."""

    server: str
    resources: Mapping[str, int]


@dataclass(frozen=True)
class Room:
    """What another compute host can still take, per resource class (Placement)."""

    host: str
    free: Mapping[str, int]
    max_unit: Mapping[str, int] = field(default_factory=dict)

    def fits(self, need: Need) -> bool:
        return all(
            amount <= self.free.get(rc, 0) and amount <= self.max_unit.get(rc, amount)
            for rc, amount in need.resources.items()
        )

    def minus(self, need: Need) -> Room:
        free = {rc: self.free.get(rc, 0) - need.resources.get(rc, 0) for rc in {*self.free, *need.resources}}
        return Room(self.host, free, self.max_unit)


@dataclass(frozen=True)
class Event:
    reason: str
    message: str
    warning: bool = False


@dataclass(frozen=True)
class Step:
    """The node's next phase and what to do to get there."""

    phase: Phase
    progress: str
    state: State
    migrate: Server | None = None  # live-migrate this server (then the step holds)
    delete: tuple[Pod, ...] = ()  # delete these pods
    event: Event | None = None


@dataclass(frozen=True)
class ServiceChange:
    enable: bool
    reason: str | None = None


def service_of(node: Node, services: Sequence[Service]) -> Service | None:
    """The node's nova-compute service. nova-compute's host is its hostname (Nova's default
    `host`, the pod shares the node's), which is the node's name unless the kubelet was told
    otherwise; then the kubernetes.io/hostname label names it."""
    by_host = {s.host: s for s in services}
    return by_host.get(node.name) or by_host.get(node.hostname)


def service_change(unschedulable: bool, phase: Phase | None, service: Service | None) -> ServiceChange | None:
    """Disabled while cordoned or under maintenance; re-enabled only if this controller disabled it."""
    if service is None:
        return None
    hold = unschedulable or phase in HOLDING
    if hold and service.enabled:
        return ServiceChange(enable=False, reason=CORDONED if unschedulable else MAINTENANCE)
    if not hold and not service.enabled and service.reason in OWN_REASONS:
        return ServiceChange(enable=True)
    return None


def room(host: str, inventories: Mapping[str, Mapping[str, float]], usages: Mapping[str, int]) -> Room:
    """A host's room from its Placement inventories and usages: capacity is (total - reserved)
    times allocation_ratio, as Placement computes it."""
    free, max_unit = {}, {}
    for rc, inventory in inventories.items():
        capacity = int((inventory["total"] - inventory.get("reserved", 0)) * inventory.get("allocation_ratio", 1.0))
        free[rc] = capacity - int(usages.get(rc, 0))
        max_unit[rc] = int(inventory.get("max_unit", capacity))
    return Room(host, free, max_unit)


def _size(need: Need) -> tuple[int, ...]:
    return tuple(need.resources.get(rc, 0) for rc in ORDER)


def _shown(resources: Mapping[str, int]) -> str:
    return ", ".join(f"{rc} {amount}" for rc, amount in sorted(resources.items())) or "nothing"


def no_room(needs: Sequence[Need], rooms: Sequence[Room]) -> str | None:
    """Why the servers cannot all move to the other hosts, or None when they can.

    Largest first, each to the host with the most memory left that fits it. Nova's scheduler
    places them for real (its filters may say no where room is enough); this check only
    refuses a maintenance that cannot end.
    """
    left = list(rooms)
    for need in sorted(needs, key=_size, reverse=True):
        fitting = [r for r in left if r.fits(need)]
        if not fitting:
            if not rooms:
                return f"no other compute host is enabled and up to take {need.server} ({_shown(need.resources)})"
            hosts = "; ".join(f"{r.host}: {_shown(r.free)}" for r in left)
            return f"no other compute host has room for {need.server} ({_shown(need.resources)}); left for it: {hosts}"
        best = max(fitting, key=lambda r: (r.free.get("MEMORY_MB", 0), r.host))
        left[left.index(best)] = best.minus(need)
    return None


def stuck_running(servers: Sequence[Server]) -> str | None:
    """Why the running guests Nova cannot move (STAY_RUNNING) keep the node from its maintenance, if any."""
    found = [s for s in servers if s.status in STAY_RUNNING]
    if not found:
        return None
    said = "; ".join(f"{s.label()} is {s.status}: {STAY_RUNNING[s.status].format(id=s.id)}" for s in found)
    return f"running instance(s) Nova cannot live-migrate, which a restart of the node's libvirt would stop: {said}"


def requested_step(servers: Sequence[Server], needs: Sequence[Need], rooms: Sequence[Room]) -> Step:
    """A new maintenance: refused unless every running server has somewhere to go."""
    why = stuck_running(servers) or no_room(needs, rooms)
    if why:
        return Step(
            Phase.REFUSED,
            f"refused: {why}",
            State(),
            event=Event("MaintenanceRefused", f"maintenance refused: {why}", warning=True),
        )
    movable = sum(s.movable for s in servers)
    message = f"{movable} running instance(s) to live-migrate; the other hosts have room"
    return Step(Phase.MIGRATING, message, State(), event=Event("MaintenanceStarted", message))


def in_flight(servers: Sequence[Server], state: State) -> Server | None:
    """The server this controller is migrating, while it is still on the node."""
    return next((s for s in servers if s.id == state.instance), None)


@dataclass(frozen=True)
class Unfinished:
    """The last live migration of the server in flight, which Nova still has in progress."""

    id: int
    status: str


def _busy_too_long(busy: Sequence[Server], state: State, now: float, task_timeout: float) -> Step | None:
    """A task of Nova's that does not end within `task_timeout`: the maintenance fails, naming each server."""
    since = state.busy_since if state.busy_since is not None else now
    if now - since <= task_timeout:
        return None
    said = ", ".join(f"{s.label()} ({s.status}, task {s.task_state or 'none'})" for s in busy)
    why = f"Nova has not finished with {said} {now - since:.0f}s after this controller began to wait"
    hint = "see `openstack server show <id>` and `openstack server event list <id>`; request the maintenance again"
    return Step(Phase.FAILED, f"failed: {why}", state, event=Event("MaintenanceFailed", f"{why}; {hint}", warning=True))


def _waiting(state: State, now: float) -> State:
    """`state` with the start of a wait for Nova kept, or begun now."""
    return replace(state, busy_since=state.busy_since if state.busy_since is not None else now)


def migration_step(
    servers: Sequence[Server],
    state: State,
    detail: str = "",
    unfinished: Unfinished | None = None,
    now: float = 0.0,
    timeout: float = 0.0,
    task_timeout: float = float("inf"),
) -> Step:
    """One move at a time: wait for the one in flight, then start the next, then restart pods.

    `detail` is what Nova says of the server in flight: its migration's progress while busy,
    its last live migration once it is not. `unfinished` is its live migration still in progress
    once the server left the node: the destination takes it (its host, ACTIVE, no task state)
    before the source is done with it (nova/compute/manager.py _post_live_migration: the source's
    resource update and the migration's `completed` come after post_live_migration_at_destination;
    the record says `running` until then), and a libvirt restart on the source in between puts the
    server into ERROR ("too late to rollback", _do_live_migration). A record that stays in progress
    past `timeout` (a source that died there: nothing in Nova ends it) fails the maintenance, and so does
    a server Nova stays busy with (a task state that never clears) past `task_timeout`.
    """
    current = in_flight(servers, state)
    if current is None and state.instance and unfinished is not None:
        since = state.since if state.since is not None else now
        moving = f"live migration {unfinished.id} of {state.instance}"
        if now - since > timeout:
            why = f"Nova's {moving} is still {unfinished.status} {now - since:.0f}s after the server left this node"
            hint = f"see `openstack server migration list --server {state.instance}`"
            event = Event("MaintenanceFailed", f"{why}; {hint}", warning=True)
            return Step(Phase.FAILED, f"failed: {why}", state, event=event)
        waiting = f"waiting for Nova to finish its {moving} on this node ({unfinished.status})"
        return Step(Phase.MIGRATING, waiting, State(state.instance, state.migrated, since=since))
    if current is not None:
        if current.busy:
            failed = _busy_too_long([current], state, now, task_timeout)
            if failed is not None:
                return failed
            total = state.migrated + sum(s.movable or s.busy for s in servers)
            progress = f"moving {current.label()} ({state.migrated + 1} of {total})"
            return Step(Phase.MIGRATING, progress + (f": {detail}" if detail else ""), _waiting(state, now))
        why = f"live migration of {current.label()} ended with it still on this node (status {current.status})"
        why += f"; {detail}" if detail else ""
        return Step(
            Phase.FAILED,
            f"failed: {why}",
            state,
            event=Event("MaintenanceFailed", f"{why}; see `openstack server event list {current.id}`", warning=True),
        )
    done = State(migrated=state.migrated + (1 if state.instance else 0))
    busy = [s for s in servers if s.busy]
    if busy:
        # A wait for these began in an earlier pass, unless that pass was waiting on the server in flight.
        held = replace(done, busy_since=state.busy_since if state.instance is None else None)
        failed = _busy_too_long(busy, held, now, task_timeout)
        if failed is not None:
            return failed
        others = ", ".join(f"{s.label()} ({s.task_state or s.status})" for s in busy)
        return Step(Phase.MIGRATING, f"waiting for Nova to finish with {others}", _waiting(held, now))
    movable = sorted((s for s in servers if s.movable), key=lambda s: (s.name, s.id))
    if movable:
        target = movable[0]
        progress = f"moving {target.label()} ({done.migrated + 1} of {done.migrated + len(movable)})"
        return Step(
            Phase.MIGRATING,
            progress,
            State(instance=target.id, migrated=done.migrated),
            migrate=target,
            event=Event("MigratingInstance", f"live-migrating {target.label()} to another host"),
        )
    stuck = stuck_running(servers)
    if stuck:  # rescued or resized meanwhile: the restart below would stop them
        return Step(Phase.FAILED, f"failed: {stuck}", done, event=Event("MaintenanceFailed", stuck, warning=True))
    staying = [s.label() for s in servers]
    message = f"{done.migrated} instance(s) moved away"
    if staying:
        message += f"; not running, so they stay here: {', '.join(staying)}"
    event = Event("InstancesMoved", message)
    return Step(Phase.RESTARTING, message + "; restarting the node's pods", done, event=event)


def migration_refused(server: Server, error: str, state: State) -> Step:
    """Nova refused to start a live migration."""
    why = f"Nova refused to live-migrate {server.label()}: {error}"
    return Step(Phase.FAILED, f"failed: {why}", state, event=Event("MaintenanceFailed", why, warning=True))


def restart_step(pods: Sequence[Pod], state: State, components: Sequence[str], now: float, timeout: float) -> Step:
    """Delete the node's hypervisor, Open vSwitch and agent pods once, so their DaemonSets start
    them again from their current templates (OnDelete updates), and wait until they are Ready."""
    if state.since is None:
        old = tuple(p for p in pods if p.component in components)
        if not old:
            return _done(state, "no pod to restart")
        names = sorted({p.component for p in old})
        restarted = State(
            migrated=state.migrated, old_pods=tuple(p.uid for p in old), components=tuple(names), since=now
        )
        message = f"deleted the pods of {', '.join(names)}; waiting for their new pods to be Ready"
        return Step(
            Phase.RESTARTING, message, restarted, delete=old, event=Event("RestartingPods", message.split(";")[0])
        )
    waiting = [
        c
        for c in state.components
        if not any(p.component == c and p.uid not in state.old_pods and p.ready and not p.deleting for p in pods)
    ]
    if not waiting:
        return _done(state, f"{', '.join(state.components)} restarted from their current templates")
    if now - state.since > timeout:
        why = f"the new pods of {', '.join(waiting)} were not Ready {timeout:.0f}s after the old ones were deleted"
        return Step(Phase.FAILED, f"failed: {why}", state, event=Event("MaintenanceFailed", why, warning=True))
    return Step(Phase.RESTARTING, f"waiting for the new pods of {', '.join(waiting)} to be Ready", state)


def _done(state: State, restarted: str) -> Step:
    message = f"{state.migrated} instance(s) moved away; {restarted}"
    return Step(Phase.DONE, message, State(migrated=state.migrated), event=Event("MaintenanceDone", message))
