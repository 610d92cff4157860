"""A release upgrade as data, and the Jobs and edges that make `pulumi up` follow it.

With `upgrade.from` set (components/upgrade_settings.py), the deploy graph gains, per service,
what the projects' own upgrade guides ask for, and pulumi-kubernetes' await on Jobs and
workloads (DESIGN.md) makes the order real:

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
ansible/nova.yml "Reload ... to remove RPC version pin", roles/cinder/tasks/reload.yml).

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
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field

from components import cinder, glance, keystone, neutron
from components.compute_pods import compute_daemonsets
from components.settings import Settings
from components.spec import ServiceSpec, Step
from components.workload import env

# The control plane in the order the guides upgrade it: Keystone first (every service
# authenticates with it), Placement before any Nova service (nova's guide), Nova, Neutron, Cinder.
CONTROL_PLANE_ORDER = ("keystone", "glance", "placement", "nova", "neutron", "cinder")
COMPUTE = "compute"  # the spec of the compute nodes' pods, upgraded last
GATE = "upgrade_gate.sh"
PHASES = ("preflight", "backup", "expand", "migrate", "roll", "contract", "online migrations", "compute nodes")
NOVA_CONF = "/etc/nova/nova.conf"
PLACEMENT_MANAGE = ("placement-manage", "--config-file", "/etc/placement/placement.conf")
# neutron-db-sync's arguments: the server's neutron.conf and ML2 file.
NEUTRON_MANAGE = (
    "neutron-db-manage",
    "--config-file",
    f"{neutron.CONFIG_DIR}/neutron.conf",
    "--config-file",
    neutron.ML2_CONF,
)


@dataclass(frozen=True)
class Check:
    """A preflight command: any exit code outside `ok_codes` stops the upgrade before any change."""

    job: str  # the Job's name between the service and the release: upgrade-check, prior-migrations
    command: tuple[str, ...]
    prior: bool  # runs the previous release's code: what that release must have finished
    ok_codes: tuple[int, ...]
    advice: str  # what the operator does when it fails; {from} and {to} are the releases


@dataclass(frozen=True)
class Recipe:
    """What one service's upgrade runs besides rolling its workloads."""

    checks: tuple[Check, ...]
    expand: tuple[str, ...] | None = None  # db-sync's command during an upgrade; None: it only adds
    migrate: tuple[str, ...] | None = None
    contract: tuple[str, ...] | None = None
    online: tuple[str, ...] | None = None
    # Workloads of the service rolled before another one (process → what it waits for).
    first: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    # Its processes cache the RPC versions of the oldest services until they restart.
    caches_rpc_versions: bool = False


def _status(tool: str, service: str) -> Check:
    # Exit 1 is a warning (oslo.upgradecheck); kolla-ansible's nova upgrade check passes on 0 and 1.
    return Check(
        "upgrade-check",
        (tool, "upgrade", "check"),
        prior=False,
        ok_codes=(0, 1),
        advice=f"{tool} found what {service} of {{to}} cannot run with: fix what its output names, then pulumi up",
    )


def _prior_migrations(command: tuple[str, ...], service: str) -> Check:
    return Check(
        "prior-migrations",
        command,
        prior=True,
        ok_codes=(0,),
        advice=f"{service}'s online data migrations of {{from}} do not complete: fix the rows its output "
        "names (an upgrade needs them done), then pulumi up",
    )


def _schema_complete(command: tuple[str, ...], service: str, sync: str) -> Check:
    """The previous release's own check that its schema is complete (expand, migrate and contract)."""
    return Check(
        "upgrade-check",
        command,
        prior=True,
        ok_codes=(0,),
        advice=f"{service}'s schema is not {{from}}'s complete schema: finish that release's "
        f"`{sync}` (or set upgrade.from to the release the cloud runs)",
    )


RECIPES: dict[str, Recipe] = {
    "keystone": Recipe(
        # Exit 0: the schema is at {from}'s expand and contract heads; 2 and 4: an unfinished upgrade.
        checks=(_schema_complete((*keystone.MANAGE, "db_sync", "--check"), "keystone", "keystone-manage db_sync"),),
        expand=(*keystone.MANAGE, "db_sync", "--expand"),
        migrate=(*keystone.MANAGE, "db_sync", "--migrate"),
        # keystone-manage: --contract "after all keystone nodes are running the new release".
        contract=(*keystone.MANAGE, "db_sync", "--contract"),
    ),
    "glance": Recipe(
        # glance-manage db check: 0 up to date, 3/4/5 expand, migrate or contract pending.
        checks=(_schema_complete((*glance.MANAGE, "db", "check"), "glance", "glance-manage db sync"),),
        expand=(*glance.MANAGE, "db", "expand"),
        migrate=(*glance.MANAGE, "db", "migrate"),
        contract=(*glance.MANAGE, "db", "contract"),
    ),
    "placement": Recipe(
        checks=(
            _status("placement-status", "placement"),
            _prior_migrations((*PLACEMENT_MANAGE, "db", "online_data_migrations"), "placement"),
        ),
        online=(*PLACEMENT_MANAGE, "db", "online_data_migrations"),
    ),
    "nova": Recipe(
        checks=(
            _status("nova-status", "nova"),
            _prior_migrations(("nova-manage", "--config-file", NOVA_CONF, "db", "online_data_migrations"), "nova"),
        ),
        online=("nova-manage", "--config-file", NOVA_CONF, "db", "online_data_migrations"),
        # Nova's guide: "It is safest to start nova-conductor first and nova-api last".
        # nova/compute/rpcapi.py: LAST_VERSION and _ROUTER, found once per process (`auto`).
        caches_rpc_versions=True,
        first={
            "nova-api": ("nova-conductor", "nova-scheduler"),
            "nova-metadata": ("nova-conductor", "nova-scheduler"),
        },
    ),
    "neutron": Recipe(
        # True (exit 1) when a contract migration of {to} is not applied: neutron then needs every
        # neutron-server stopped for the contract, which this program does not automate.
        checks=(
            Check(
                "upgrade-check",
                (*NEUTRON_MANAGE, "has_offline_migrations"),
                prior=False,
                ok_codes=(0,),
                advice="neutron's upgrade to {to} has offline (contract) migrations, which need every "
                "neutron-server stopped: scale neutron-server to 0, run `neutron-db-manage upgrade --contract` "
                "with {to}'s image, then pulumi up",
            ),
        ),
        expand=(*NEUTRON_MANAGE, "upgrade", "--expand"),
        contract=(*NEUTRON_MANAGE, "upgrade", "--contract"),
    ),
    "cinder": Recipe(
        checks=(
            _status("cinder-status", "cinder"),
            _prior_migrations((*cinder.MANAGE, "db", "online_data_migrations"), "cinder"),
        ),
        online=(*cinder.MANAGE, "db", "online_data_migrations"),
        # cinder/rpc.py: LAST_RPC_VERSIONS and LAST_OBJ_VERSIONS, found once per process and binary.
        caches_rpc_versions=True,
    ),
}

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
        template, name=name, command=command, needs=needs, scripts=(), env=(), purpose=purpose, schedule=None
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
    processes = tuple(
        dataclasses.replace(
            p,
            needs=(
                *p.needs,
                *((migrate,) if recipe.migrate and p.node_pod is None else ()),
                *recipe.first.get(p.name, ()),
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
            processes = tuple(dataclasses.replace(p, needs=(*p.needs, *last)) for p in spec.processes)
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
        # Those that wait for others of the service (nova's APIs) last.
        for workload in sorted(_workloads(spec), key=lambda w: w in recipe.first):
            yield UpgradeStep(
                "roll", "workload", workload, spec.name, f"pods of {workload} replaced by {settings.release}'s"
            )
        if recipe.contract:
            touches = f"drops what only {prior} used from the {spec.name} database"
            yield UpgradeStep("contract", "Job", job_name(spec.name, "db-contract", settings), spec.name, touches)
    for pod in compute_daemonsets(settings) if any(s.name == COMPUTE for s in specs) else ():
        yield UpgradeStep("compute nodes", "DaemonSet", pod, COMPUTE, "the compute nodes' pods (VMs: see Running VMs)")
    for spec in chain:
        if RECIPES[spec.name].online:
            touches = f"rewrites rows of the {spec.name} database into {settings.release}'s format"
            yield UpgradeStep(
                "online migrations", "Job", job_name(spec.name, "online-migrations", settings), spec.name, touches
            )


def rolled_after(specs: tuple[ServiceSpec, ...], settings: Settings) -> tuple[str, ...]:
    """The workloads that the `pulumi up` removing `upgrade.from` rolls: those caching RPC versions."""
    if settings.upgrade is None:
        return ()
    return tuple(p.object_name for s in _chain(specs) if RECIPES[s.name].caches_rpc_versions for p in s.processes)


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
