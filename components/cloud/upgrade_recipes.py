"""What each service's upgrade runs besides rolling its workloads: its preflight checks, its
expand, migrate and contract commands, its online data migrations, as data.

components/cloud/upgrade.py turns these recipes into Jobs and edges of the deploy graph; the commands
are the projects' own (each `*-manage` and `*-status` tool), ordered as their upgrade guides and
kolla-ansible's ansible/roles/<service>/tasks/upgrade.yml order them.
"""

from __future__ import annotations

from dataclasses import dataclass

from components.services import cinder, glance, keystone, neutron

# The control plane in the order the guides upgrade it: Keystone first (every service
# authenticates with it), Placement before any Nova service (nova's guide), Nova, Neutron, Cinder.
CONTROL_PLANE_ORDER = ("keystone", "glance", "placement", "nova", "neutron", "cinder")
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
    # The service's processes in the order its guide rolls them, tier by tier: each tier's workloads wait
    # for every workload of the tiers before it. Processes in no tier roll with the first.
    tiers: tuple[tuple[str, ...], ...] = ()
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
        tiers=(("nova-conductor", "nova-scheduler"), ("nova-api", "nova-metadata")),
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
        # Cinder's guide (doc/source/admin/upgrades.rst): "The assumed service upgrade order is
        # cinder-scheduler, cinder-volume, cinder-backup and finally cinder-api" (the API last, so it
        # fails fast on new features while older services remain). Every backend's volume pods are one tier.
        tiers=(("cinder-scheduler",), ("cinder-volume",), ("cinder-backup",), ("cinder-api",)),
    ),
}
