"""A release upgrade as data, and the Jobs and edges that make `pulumi up` follow it.

With `upgrade.from` set (components/settings/upgrade.py), the deploy graph gains, per service,
what the projects' own upgrade guides ask for (its recipe: components/cloud/upgrade_recipes.py), and
pulumi-kubernetes' await on Jobs and workloads (DESIGN.md) makes the order real:

1. preflight: `<service>-upgrade-check-<to>` Jobs (`*-status upgrade check` of the new code;
   `keystone-manage db_sync --check` and `glance-manage db check` of the previous code, which must
   find its own schema complete; neutron's pending offline migrations) and
   `<service>-prior-migrations-<to>` (the previous release's online data migrations, run to the
   end with the previous code). They wait for nothing that changes; everything below waits for them.
2. `mariadb-backup-before-<to>`: a one-time Backup of every database, after every preflight Job.
3. expand: each `<service>-db-sync` (keystone's and glance's `--expand`, neutron's `--expand`;
   nova's, placement's and cinder's `db sync` only add) after the backup and after the service
   before it in CONTROL_PLANE_ORDER has rolled; keystone and glance then `<service>-db-migrate-<to>`.
4. the service's workloads roll (Deployments are awaited until rolled out); in nova the
   conductors and schedulers before the APIs.
5. contract: `<service>-db-contract-<to>` after every control-plane workload of the service.
6. online data migrations: `<service>-online-migrations-<to>` after the service's workloads
   (nova's after the compute nodes too).
7. compute nodes last: the compute spec's pods after the last control-plane service.

Nova's and Cinder's services cache the RPC versions of the oldest services they saw (Nova's
computes, through `[upgrade_levels] compute = auto`) until they restart, and so keep speaking the
previous release's RPC after the upgrade: their pods carry `openstack.org/upgrade-from` while
`upgrade.from` is set, so the `pulumi up` that removes it rolls them once more, as nova's guide
asks (a SIGHUP once every service runs the new code) and kolla-ansible does (it restarts them:
ansible/nova.yml "Reload ... to remove RPC version pin", roles/cinder/tasks/reload.yml). That
includes nova-compute, which calls other computes (migrations) through the same capped client:
kolla-ansible restarts it too (roles/nova-cell/tasks/reload.yml, a restart rather than a SIGHUP,
which left nova-compute unable to start instances). Its pods are marked wherever nova-compute
runs apart from the VMs (every topology but all-in-one); under all-in-one its pod holds libvirt,
and a roll would kill the node's VMs or, under `compute.vmSafe`, wait for an operator forever:
there it drops the cap at the node's next maintenance (README, Release upgrades).

The Jobs of the upgrade carry the target release in their name: a completed one is not run
again by the next `pulumi up` (same name, same spec), so a failed upgrade resumes where it
stopped, and the next release's upgrade gets Jobs of its own. kolla-ansible orders the same
steps in ansible/roles/<service>/tasks/upgrade.yml (nova: upgrade check, db sync, conductors,
cell services, APIs, online data migrations: ansible/nova.yml); nova's guide is
doc/source/admin/upgrades.rst.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from components.cloud.upgrade_recipes import CONTROL_PLANE_ORDER, RECIPES, Check, Recipe
from components.mechanism.spec import Process, ServiceSpec, Step
from components.mechanism.workload import env
from components.nodes.compute_pods import compute_daemonsets
from components.settings import releases
from components.settings.model import Settings
from components.tables.roles import NOVA_COMPUTE

COMPUTE = "compute"  # the spec of the compute nodes' pods, upgraded last
GATE = "upgrade_gate.sh"
PHASES = ("preflight", "backup", "expand", "migrate", "roll", "contract", "online migrations", "compute nodes")

# On the pod templates of the processes that cache RPC versions, during an upgrade only: the
# `pulumi up` that removes `upgrade.from` changes their template, which rolls them.
UPGRADE_FROM_ANNOTATION = "openstack.org/upgrade-from"


@dataclass(frozen=True)
class UpgradeStep:
    """One step of the upgrade as a user reads it: what runs or rolls, and what it touches."""

    phase: str
    kind: str
    name: str
    service: str
    touches: str


def suffix(release: str) -> str:
    """A release in an object name: 2026.1 → 2026-1 (Kubernetes names take no dots in Job names' pods)."""
    return release.replace(".", "-")


def job_name(service: str, what: str, settings: Settings) -> str:
    return f"{service}-{what}-{suffix(settings.release)}"


def backup_name(settings: Settings) -> str:
    return f"mariadb-backup-before-{suffix(settings.release)}"


def _chain(specs: tuple[ServiceSpec, ...]) -> tuple[ServiceSpec, ...]:
    by_name = {spec.name: spec for spec in specs}
    return tuple(by_name[name] for name in CONTROL_PLANE_ORDER if name in by_name)


def control_plane(spec: ServiceSpec) -> tuple[str, ...]:
    """The service's workloads that are no node pods: what rolls in its turn."""
    return tuple(p.object_name for p in spec.processes if p.node_pod is None)


def _workloads(spec: ServiceSpec) -> tuple[str, ...]:
    """Every workload of the service: its control plane, then its pods on storage or network nodes."""
    return control_plane(spec) + tuple(p.object_name for p in spec.processes if p.node_pod is not None)


def check_jobs(specs: tuple[ServiceSpec, ...], settings: Settings) -> tuple[str, ...]:
    return tuple(job_name(s.name, c.job, settings) for s in _chain(specs) for c in RECIPES[s.name].checks)


def _db_sync(spec: ServiceSpec) -> Step:
    return next(step for step in spec.steps if step.name == f"{spec.name}-db-sync")


def _job(template: Step, name: str, command: tuple[str, ...], needs: tuple[str, ...], purpose: str) -> Step:
    """A Job of the upgrade, with the db-sync Job's image, config files and volumes."""
    return dataclasses.replace(
        template,
        name=name,
        command=command,
        needs=needs,
        scripts=(),
        env=(),
        purpose=purpose,
        schedule=None,
        api_access=(),  # nothing of the upgrade talks to the Kubernetes API
        moved_from=None,  # a Job of its own, never an older one under another parent
    )


def _check_step(template: Step, check: Check, settings: Settings, service: str) -> Step:
    assert settings.upgrade is not None
    releases = {"from": settings.upgrade.from_release, "to": settings.release}
    step = _job(
        template,
        job_name(service, check.job, settings),
        ("bash", f"/scripts/{GATE}", *check.command),
        (),
        f"waits for the preflight check {job_name(service, check.job, settings)} (nothing changes before it passes)",
    )
    return dataclasses.replace(
        step,
        scripts=(GATE,),
        env=(
            env("UPGRADE_OK_CODES", " ".join(map(str, check.ok_codes))),
            env("UPGRADE_ADVICE", check.advice.format(**releases)),
        ),
        release=settings.upgrade.from_release if check.prior else None,
    )


def _tier_of(recipe: Recipe) -> Callable[[str], int]:
    """A process name → its tier in the recipe's roll order (0: the first, and any process it does not name)."""
    tiers = {name: index for index, names in enumerate(recipe.tiers) for name in names}
    return lambda name: tiers.get(name, 0)


def _upgraded(
    spec: ServiceSpec, before: tuple[str, ...], settings: Settings, compute_pods: tuple[str, ...]
) -> ServiceSpec:
    """The service's spec during an upgrade: its Jobs of the upgrade added, its edges reordered."""
    recipe, name = RECIPES[spec.name], spec.name
    sync = _db_sync(spec)
    rolled = control_plane(spec)
    steps: list[Step] = [_check_step(sync, check, settings, name) for check in recipe.checks]
    for step in spec.steps:
        if step is sync:
            # The expand: after the backup and after the service before it has rolled.
            step = dataclasses.replace(
                step, command=recipe.expand or step.command, needs=(*step.needs, backup_name(settings), *before)
            )
        steps.append(step)
    migrate = job_name(name, "db-migrate", settings)
    if recipe.migrate:
        steps.append(_job(sync, migrate, recipe.migrate, (sync.name,), f"needs the data that {migrate} moves"))
    if recipe.contract:
        contract = job_name(name, "db-contract", settings)
        steps.append(_job(sync, contract, recipe.contract, rolled, f"waits for {contract} to drop the old schema"))
    if recipe.online:
        online = job_name(name, "online-migrations", settings)
        # Once every service runs the new code (nova's guide; kolla-ansible's roles/cinder/tasks/
        # upgrade.yml runs cinder's after reload.yml restarted every Cinder service): Cinder's
        # volume and backup pods included.
        after = _workloads(spec) + (compute_pods if name == "nova" else ())
        steps.append(_job(sync, online, recipe.online, after, f"waits for {online} to finish"))
    assert settings.upgrade is not None
    pinned = {UPGRADE_FROM_ANNOTATION: settings.upgrade.from_release} if recipe.caches_rpc_versions else {}
    tier = _tier_of(recipe)
    processes = tuple(
        dataclasses.replace(
            p,
            needs=(
                *p.needs,
                *((migrate,) if recipe.migrate and p.node_pod is None else ()),
                *(q.object_name for q in spec.processes if tier(q.name) < tier(p.name)),
            ),
            pod_annotations={**p.pod_annotations, **pinned},
        )
        for p in spec.processes
    )
    return dataclasses.replace(spec, steps=tuple(steps), processes=processes)


def apply(specs: tuple[ServiceSpec, ...], settings: Settings) -> tuple[ServiceSpec, ...]:
    """The specs of the stack during an upgrade (unchanged without `upgrade`)."""
    if settings.upgrade is None:
        return specs
    chain = _chain(specs)
    before: dict[str, tuple[str, ...]] = {}
    for previous, spec in itertools.pairwise(chain):
        before[spec.name] = control_plane(previous)
    compute_pods = compute_daemonsets(settings) if any(s.name == COMPUTE for s in specs) else ()
    last = control_plane(chain[-1])
    upgraded = []
    for spec in specs:
        if spec.name in RECIPES:
            spec = _upgraded(spec, before.get(spec.name, ()), settings, compute_pods)
        elif spec.name == COMPUTE:
            pinned = {UPGRADE_FROM_ANNOTATION: settings.upgrade.from_release}
            processes = tuple(
                dataclasses.replace(
                    p,
                    needs=(*p.needs, *last),
                    pod_annotations={**p.pod_annotations, **(pinned if _restartable_compute(p) else {})},
                )
                for p in spec.processes
            )
            spec = dataclasses.replace(spec, processes=processes)
        upgraded.append(spec)
    return tuple(upgraded)


def steps(specs: tuple[ServiceSpec, ...], settings: Settings) -> Iterator[UpgradeStep]:
    """The upgrade in the order it happens: phase by phase, each phase in the control plane's order."""
    if settings.upgrade is None:
        return
    prior, chain = settings.upgrade.from_release, _chain(specs)
    for spec in chain:
        for check in RECIPES[spec.name].checks:
            code = f"{prior}'s code" if check.prior else f"{settings.release}'s code"
            touches = f"reads the {spec.name} database ({code}: {_shown(check.command)})"
            if check.job == "prior-migrations":
                touches = f"finishes {prior}'s online data migrations in the {spec.name} database"
            yield UpgradeStep("preflight", "Job", job_name(spec.name, check.job, settings), spec.name, touches)
    yield UpgradeStep("backup", "Backup", backup_name(settings), "mariadb", "dumps every database (the rollback)")
    for spec in chain:
        recipe = RECIPES[spec.name]
        yield UpgradeStep("expand", "Job", f"{spec.name}-db-sync", spec.name, _expand_says(spec, recipe))
        if recipe.migrate:
            touches = f"moves data to {settings.release}'s columns in the {spec.name} database"
            yield UpgradeStep("migrate", "Job", job_name(spec.name, "db-migrate", settings), spec.name, touches)
        # In the guide's order: nova's APIs after its conductors, cinder's API last.
        tier, process_of = _tier_of(recipe), {p.object_name: p.name for p in spec.processes}
        for workload in sorted(_workloads(spec), key=lambda w: tier(process_of[w])):
            yield UpgradeStep(
                "roll", "workload", workload, spec.name, f"pods of {workload} replaced by {settings.release}'s"
            )
        if recipe.contract:
            touches = f"drops what only {prior} used from the {spec.name} database"
            yield UpgradeStep("contract", "Job", job_name(spec.name, "db-contract", settings), spec.name, touches)
    # Every workload of the compute spec: the compute nodes' pods, the network nodes' Open vSwitch,
    # nova-compute-maintenance; all wait for the last control-plane service (apply).
    for process in next((s.processes for s in specs if s.name == COMPUTE), ()):
        kind = process.node_kind
        where = f"pods on the {kind.value} nodes" if kind else "its pods"
        yield UpgradeStep(
            "compute nodes", "workload", process.object_name, COMPUTE, f"{where} replaced (VMs: see Running VMs)"
        )
    for spec in chain:
        if RECIPES[spec.name].online:
            touches = f"rewrites rows of the {spec.name} database into {settings.release}'s format"
            yield UpgradeStep(
                "online migrations", "Job", job_name(spec.name, "online-migrations", settings), spec.name, touches
            )


def _restartable_compute(process: Process) -> bool:
    """A pod with nova-compute in it that holds no VMs: replacing it restarts nova-compute only."""
    pod = process.node_pod
    return pod is not None and NOVA_COMPUTE in pod.roles and not pod.holds_vms_or_datapath


def rolled_after(specs: tuple[ServiceSpec, ...], settings: Settings) -> tuple[str, ...]:
    """The workloads that the `pulumi up` removing `upgrade.from` rolls: those caching RPC versions,
    and the control plane of services given an option in the previous release's spelling meanwhile
    (components/settings/releases.py)."""
    if settings.upgrade is None:
        return ()
    control = tuple(p.object_name for s in _chain(specs) if RECIPES[s.name].caches_rpc_versions for p in s.processes)
    respelt = releases.respelt_after_upgrade(settings)
    control += tuple(name for s in _chain(specs) if s.name in respelt for name in control_plane(s))
    computes = tuple(p.object_name for s in specs if s.name == COMPUTE for p in s.processes if _restartable_compute(p))
    return control + computes


def _expand_says(spec: ServiceSpec, recipe: Recipe) -> str:
    if recipe.expand:
        return f"adds {spec.name}'s new tables and columns (expand; the running release keeps working)"
    return (
        f"migrates the {spec.name} schema in place (its schema migrations only add: the running release keeps working)"
    )


def _shown(command: tuple[str, ...]) -> str:
    """A command without its --config-file arguments, as a user would recognise it."""
    words, skip = [], False
    for word in command:
        if skip or word == "--config-file":
            skip = not skip
            continue
        words.append(word)
    return " ".join(words)
