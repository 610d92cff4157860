"""A release upgrade (`upgrade.from`): the jumps allowed, and the order `pulumi up` follows."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from components.cloud import upgrade, upgrade_recipes
from components.mechanism.inifile import parse_ini
from components.nodes.compute_pods import compute_daemonsets
from components.settings import upgrade as upgrade_settings
from tests.conftest import plan_of, release_plan
from tests.helpers import containers, name_of, objects, settings_problems, unknown_fields
from tests.lab.cloud.engine import engine_steps
from tests.test_backup import _schema as backup_schema
from tests.test_plan_diff import stack_settings
from tools import plan as plan_tool
from tools import plan_diff
from tools.plan import Plan
from tools.plan_configs import object_key
from tools.runtime import REPO

FROM = {"from": "2025.2"}
# prod has every service (cinder too), HA and a named compute node group (DaemonSets suffixed with it).
STACK = "prod"


@pytest.fixture(scope="module")
def plan() -> Plan:
    return plan_of(STACK, upgrade=FROM)


def _engine_ancestors(plan: Plan, name: str) -> set[str]:
    """Every object `name` waits for in the engine's dependencies (depends_on), by Kubernetes name."""
    by_urn = {r.urn: r for r in plan.custom}
    urn = next(
        r.urn for r in plan.custom if r.k8s_name == name and r.kind in ("Job", "Deployment", "DaemonSet", "Backup")
    )
    return {name_of(by_urn[u]) for u in plan.ancestors(urn) if by_urn[u].k8s_name}


def test_sources_follow_the_slurp_cadence() -> None:
    assert upgrade_settings.sources("2026.1") == ("2025.2", "2025.1")  # N-1, and skip-level from the SLURP
    assert upgrade_settings.sources("2025.2") == ("2025.1",)  # not a SLURP: N-1 only
    assert upgrade_settings.sources("2024.1") == ()


@pytest.mark.parametrize("source", ["2025.2", "2025.1"])
def test_supported_jumps_are_accepted(source: str) -> None:
    plan = plan_of("dev", upgrade={"from": source})
    assert plan.settings.upgrade is not None and plan.settings.upgrade.from_release == source


@pytest.mark.parametrize("source", ["2024.2", "2024.1", "2026.1", "2027.1"])
def test_other_jumps_are_refused_naming_the_key_and_what_is_allowed(source: str) -> None:
    problems = settings_problems({**stack_settings("dev"), "upgrade": {"from": source}})
    [found] = [p for p in problems if p.startswith("openstack:upgrade.from:")]
    assert "2025.2 or 2025.1" in found


@pytest.mark.parametrize(
    ("value", "key", "says"),
    [
        ("2025.2", "openstack:upgrade", "an object whose `from` names the release the cloud runs"),
        ({"form": "2025.2"}, "openstack:upgrade", "needs `from`"),
        ({"from": 2025.2}, "openstack:upgrade.from", "a release in quotes, e.g. '2025.2'"),
        ({"from": None}, "openstack:upgrade.from", "the release the cloud runs, in quotes"),
    ],
)
def test_a_malformed_upgrade_says_what_it_takes(value: Any, key: str, says: str) -> None:
    [found] = settings_problems({**stack_settings("dev"), "upgrade": value})
    assert found.startswith(f"{key}: ") and says in found


def test_tools_plan_refuses_a_malformed_upgrade_before_any_resource(tmp_path: Path) -> None:
    document = yaml.safe_load((REPO / "stacks" / "Pulumi.dev.yaml").read_text())
    document["config"]["openstack:upgrade"] = {"from": 2025.2}
    path = tmp_path / "Pulumi.dev.yaml"
    path.write_text(yaml.safe_dump(document))
    out = tmp_path / "plan"
    assert plan_tool.main(["--stack", "dev", "--stack-file", str(path), "--out", str(out)]) == 2
    assert not (out / "plan.json").exists()


def test_an_upgrade_needs_the_backup_it_rolls_back_to() -> None:
    problems = settings_problems({**stack_settings("dev"), "upgrade": FROM, "backup": {"enabled": False}})
    assert any(p.startswith("openstack:backup.enabled:") and "upgrade.from" in p for p in problems)


def test_no_upgrade_no_upgrade_objects() -> None:
    names = {r.k8s_name for r in plan_of(STACK).custom}
    assert not {n for n in names if n and n.endswith("-2026-1")}
    assert (
        objects(plan_of(STACK), "Job")["keystone-db-sync"].inputs["spec"]["template"]["spec"]["containers"][0]["args"][
            -1
        ]
        == "db_sync"
    )


def test_every_preflight_check_comes_before_the_backup_and_the_backup_before_every_migration(plan: Plan) -> None:
    checks = {
        f"{service}-{job}-2026-1"
        for service, recipe in upgrade_recipes.RECIPES.items()
        for job in {c.job for c in recipe.checks}
    }
    backup = "mariadb-backup-before-2026-1"
    assert checks <= _engine_ancestors(plan, backup)
    for service in upgrade_recipes.CONTROL_PLANE_ORDER:
        assert backup in _engine_ancestors(plan, f"{service}-db-sync"), service
    # Nothing of the upgrade waits before the checks: they wait for no Job or workload.
    for check in checks:
        assert not {n for n in _engine_ancestors(plan, check) if n.endswith("-db-sync")}, check


def _checks(plan: Plan) -> set[str]:
    return {r.k8s_name for r in plan.custom if r.kind == "Job" and r.k8s_name and r.k8s_name.endswith(
        ("-upgrade-check-2026-1", "-prior-migrations-2026-1"))}  # fmt: skip


def test_nothing_runs_or_rolls_before_every_preflight_check_passed(plan: Plan) -> None:
    """Not only the upgrade's steps: a new release changes every image, so without the gate the bootstrap
    Jobs would run again and memcached and Horizon roll while the checks still run."""
    checks = _checks(plan)
    assert len(checks) == 9
    by_urn = {r.urn: r for r in plan.custom}
    for r in plan.custom:
        if r.kind not in ("Job", "CronJob", "Deployment", "DaemonSet", "StatefulSet") or r.k8s_name in checks:
            continue
        waits = {by_urn[u].k8s_name for u in plan.ancestors(r.urn) if u in by_urn}
        assert checks <= waits, (r.kind, r.k8s_name, sorted(checks - waits))


def test_what_an_upgrade_from_2025_2_changes_before_the_checks_is_what_the_checks_mount(plan: Plan) -> None:
    """The engine's steps from a cloud of 2025.2 to the upgrade's plan: every object that changes before
    the checks passed is a config object a check mounts (its script, the files its command reads)."""
    before = release_plan(STACK, "2025.2")
    steps = engine_steps(before.custom, plan.custom)
    checks = {r.urn for r in plan.custom if r.k8s_name in _checks(plan)}
    mounted = {
        (volume.get("secret") or {}).get("secretName") or (volume.get("configMap") or {}).get("name")
        for r in plan.custom
        if r.urn in checks
        for volume in r.inputs["spec"]["template"]["spec"].get("volumes", [])
    }
    early = {}
    for r in plan.custom:
        step = steps[object_key(r.urn)]
        if step.op != "same" and r.urn not in checks and not checks <= plan.ancestors(r.urn):
            early[step.ref] = step.fields
    assert early, "a release change with no config object changed before the checks: the test sees nothing"
    assert {ref.split("/")[0] for ref in early} <= {"Secret", "ConfigMap"}, early
    assert {ref.split("/")[1] for ref in early} <= mounted, early


# The services' order, written here rather than taken from the code under test: Keystone first (every
# service authenticates through it; keystone's upgrade guide), then the image service, placement before
# nova (nova's guide: placement is upgraded first), nova, neutron, cinder, as kolla-ansible's site.yml
# runs their roles.
DOCUMENTED_ORDER = ("keystone", "glance", "placement", "nova", "neutron", "cinder")


def test_control_plane_upgrades_service_by_service_in_the_documented_order(plan: Plan) -> None:
    order = DOCUMENTED_ORDER
    firsts = {"keystone": "keystone-api", "glance": "glance-api", "placement": "placement-api", "nova": "nova-api"}
    firsts |= {"neutron": "neutron-server"}
    for before, after in itertools.pairwise(order):
        assert firsts[before] in _engine_ancestors(plan, f"{after}-db-sync"), (before, after)


def test_conductors_before_apis(plan: Plan) -> None:
    for api in ("nova-api", "nova-metadata"):
        assert {"nova-conductor", "nova-scheduler"} <= _engine_ancestors(plan, api)


def test_cinder_rolls_scheduler_volume_backup_then_api(plan: Plan) -> None:
    """Cinder's upgrade guide (doc/source/admin/upgrades.rst): "cinder-scheduler, cinder-volume,
    cinder-backup and finally cinder-api"."""
    guide = ("cinder-scheduler", "cinder-volume", "cinder-backup", "cinder-api")
    for earlier, later in itertools.combinations(guide, 2):
        assert earlier in _engine_ancestors(plan, later), (earlier, later)
    listed = [
        s.name for s in upgrade.steps(plan.graph.specs, plan.settings) if s.phase == "roll" and s.service == "cinder"
    ]
    assert [name for name in listed if name in guide] == list(guide)


def test_without_an_upgrade_cinder_services_wait_for_none_of_each_other() -> None:
    plan = plan_of(STACK)
    for earlier, later in itertools.permutations(
        ("cinder-scheduler", "cinder-volume", "cinder-backup", "cinder-api"), 2
    ):
        assert earlier not in _engine_ancestors(plan, later), (earlier, later)


def test_expand_migrate_then_contract_after_the_service_rolled(plan: Plan) -> None:
    jobs = objects(plan, "Job")
    args = {name: next(containers(job))["args"] for name, job in jobs.items()}
    assert args["keystone-db-sync"][-2:] == ["db_sync", "--expand"]
    assert args["keystone-db-migrate-2026-1"][-2:] == ["db_sync", "--migrate"]
    assert args["keystone-db-contract-2026-1"][-2:] == ["db_sync", "--contract"]
    assert args["glance-db-sync"][-2:] == ["db", "expand"]
    assert args["neutron-db-sync"][-2:] == ["upgrade", "--expand"]
    assert "keystone-db-migrate-2026-1" in _engine_ancestors(plan, "keystone-api")
    for service, workloads in {
        "keystone": {"keystone-api"},
        "glance": {"glance-api"},
        "neutron": {"neutron-server"},
    }.items():
        assert workloads <= _engine_ancestors(plan, f"{service}-db-contract-2026-1"), service


def test_compute_nodes_last_and_nova_online_migrations_after_them(plan: Plan) -> None:
    daemonsets = objects(plan, "DaemonSet")
    compute = [n for n, r in daemonsets.items() if r.inputs["metadata"]["labels"]["app.kubernetes.io/name"] == "nova"]
    assert compute
    for name in compute:
        assert {"cinder-api", "neutron-server", "nova-api"} <= _engine_ancestors(plan, name), name
    assert set(compute) <= _engine_ancestors(plan, "nova-online-migrations-2026-1")
    # Cinder's once every Cinder service runs the new code, its volume and backup pods included.
    cinder = {"cinder-api", "cinder-scheduler", "cinder-volume", "cinder-backup"}
    assert cinder <= _engine_ancestors(plan, "cinder-online-migrations-2026-1")


def test_checks_of_the_previous_release_run_its_code(plan: Plan) -> None:
    images = {name: next(containers(job))["image"] for name, job in objects(plan, "Job").items()}
    # What the previous release must have finished, judged by its own code.
    assert images["keystone-upgrade-check-2026-1"].endswith("/keystone:2025.2-ubuntu-noble")
    assert images["nova-prior-migrations-2026-1"].endswith("/nova-api:2025.2-ubuntu-noble")
    # What the new release needs, judged by the new code.
    assert images["nova-upgrade-check-2026-1"] == images["nova-db-sync"]
    assert images["nova-db-sync"].endswith(":2026.1-ubuntu-noble")


def test_a_check_passes_only_on_its_exit_codes_and_says_what_to_do(plan: Plan) -> None:
    job = objects(plan, "Job")["nova-upgrade-check-2026-1"]
    container = next(containers(job))
    env: dict[str, Any] = {e["name"]: e.get("value") for e in container["env"]}
    assert container["args"][:2] == ["bash", "/scripts/upgrade_gate.sh"]
    assert container["args"][2:] == ["nova-status", "upgrade", "check"]
    assert env["UPGRADE_OK_CODES"] == "0 1"  # warnings pass, as kolla-ansible's check
    assert "2026.1" in env["UPGRADE_ADVICE"]


def test_the_backup_is_awaited_until_its_dump_exists(plan: Plan) -> None:
    [backup] = [r for r in plan.custom if r.kind == "Backup" and r.k8s_name == "mariadb-backup-before-2026-1"]
    annotations = backup.inputs["metadata"]["annotations"]
    assert annotations["pulumi.com/waitFor"].endswith("].reason}=JobComplete")
    assert "schedule" not in backup.inputs["spec"]  # one-time


def test_steps_list_the_upgrade_in_an_order_the_graph_follows(plan: Plan) -> None:
    graph = plan.graph
    steps = list(upgrade.steps(graph.specs, plan.settings))
    assert [s.phase for s in steps[:2]] == ["preflight", "preflight"] and steps[-1].phase == "online migrations"
    assert {s.phase for s in steps} == set(upgrade.PHASES)
    listed = [s.name for s in steps]
    # Every workload of the upgraded services rolls in its service's turn, node pods too.
    rolls = {s.name for s in steps if s.phase == "roll"}
    assert {"cinder-volume", "cinder-backup", "neutron-dhcp-agent", "nova-conductor", "keystone-api"} <= rolls
    # The compute spec's workloads last: its network nodes' Open vSwitch and the maintenance controller too.
    last = {s.name for s in steps if s.phase == "compute nodes"}
    assert {"nova-compute-kvm-general", "network-openvswitch-vswitchd", "nova-compute-maintenance"} <= last
    for position, name in enumerate(listed):
        # No step is listed before something it waits for.
        waits = _graph_ancestors(graph, name)
        assert not waits & set(listed[position + 1 :]), (name, waits & set(listed[position + 1 :]))


def _graph_ancestors(graph: Any, name: str) -> set[str]:
    seen: set[str] = set()
    stack = [need.name for need in graph[name].needs]
    while stack:
        current = stack.pop()
        if current not in seen:
            seen.add(current)
            stack += [need.name for need in graph[current].needs]
    return seen


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_nova_speaks_to_older_computes_during_an_upgrade(stack: str) -> None:
    plan = plan_of(stack)
    control = parse_ini(plan.by_name("nova-etc", "Secret").revealed["stringData"]["nova.conf"])
    assert control["upgrade_levels"]["compute"] == "auto"
    nodes = plan.by_name("compute-etc", "Secret").revealed["stringData"]
    # One nova.conf per compute node group, each with the same level.
    files = [name for name in nodes if name.startswith("nova-") and name.endswith(".conf")]
    assert len(files) == len(plan.settings.compute.node_groups)
    for name in files:
        assert parse_ini(nodes[name])["upgrade_levels"]["compute"] == "auto", name


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_the_backup_before_the_upgrade_is_one_the_operator_takes(stack: str) -> None:
    backup = plan_of(stack, upgrade=FROM).by_name("mariadb-backup-before-2026-1", "Backup")
    manifest = {"apiVersion": "k8s.mariadb.com/v1alpha1", "kind": "Backup", **backup.inputs}
    assert unknown_fields(manifest, backup_schema()) == []
    jsonschema.validate(manifest, backup_schema())
    scheduled = plan_of(stack).by_name("mariadb-backup", "Backup").inputs["spec"]
    assert backup.inputs["spec"]["storage"] == scheduled["storage"]  # where the Restore finds the scheduled dumps


def test_the_pulumi_up_after_the_upgrade_restarts_what_cached_the_old_rpc_versions(plan: Plan) -> None:
    # Nova's control plane and Cinder's services keep the RPC versions of the services they saw
    # during the upgrade until they restart: removing upgrade.from must roll them, and only them.
    after = plan_diff.diff(plan_diff.view_of(plan), plan_diff.view_of(plan_of(STACK)))
    rolled = {r["name"] for r in after["rolls"]}
    nova = {"nova-api", "nova-conductor", "nova-scheduler", "nova-metadata", "nova-novncproxy"}
    cinder = {"cinder-api", "cinder-scheduler", "cinder-volume", "cinder-backup"}
    # nova-compute too (kolla-ansible's nova-cell reload.yml): under prod's topology it runs in a
    # pod of its own, one per node group; libvirt's and Open vSwitch's pods, which hold the VMs
    # and their traffic, are not touched.
    computes = {name for name in compute_daemonsets(plan.settings) if name.startswith("nova-compute")}
    assert computes
    # And neutron-server: during the upgrade from 2025.2 its ml2_conf.ini spells [ml2]
    # tenant_network_types, which 2025.2's servers read too; 2026.1 spells it project_network_types.
    assert rolled == nova | cinder | computes | {"neutron-server"}
    assert set(upgrade.rolled_after(plan.graph.specs, plan.settings)) == rolled
    holding_vms = {n for n in compute_daemonsets(plan.settings) if n.startswith(("libvirt", "openvswitch"))}
    assert holding_vms and not rolled & holding_vms


def test_under_all_in_one_the_pulumi_up_after_the_upgrade_leaves_the_compute_pods_alone() -> None:
    # dev's compute-node pod holds libvirt with nova-compute: rolling it would kill the VMs.
    upgraded = plan_of("dev", upgrade=FROM)
    after = plan_diff.diff(plan_diff.view_of(upgraded), plan_diff.view_of(plan_of("dev")))
    rolled = {r["name"] for r in after["rolls"]}
    assert "nova-conductor" in rolled
    assert not rolled & set(compute_daemonsets(upgraded.settings))
    assert not set(upgrade.rolled_after(upgraded.graph.specs, upgraded.settings)) & set(
        compute_daemonsets(upgraded.settings)
    )


def test_an_upgrade_plans_on_a_stack_with_tls_inside_and_only_what_the_checks_mount_runs_first() -> None:
    """staging serves TLS inside the cluster: its checks mount the internal CA bundle, which its Job
    writes, so that Job comes before them (gating it too was a cycle in the deploy graph)."""
    tls = plan_of("staging", upgrade=FROM)
    assert tls.settings.tls.internal_enabled
    checks = _checks(tls)
    assert len(checks) >= 7
    by_urn = {r.urn: r for r in tls.custom}
    check_urns = [r.urn for r in tls.custom if r.k8s_name in checks]
    mounted = {by_urn[u].k8s_name for urn in check_urns for u in tls.ancestors(urn) if u in by_urn}
    assert "internal-ca-bundle" in mounted
    for r in tls.custom:
        if r.kind not in ("Job", "CronJob", "Deployment", "DaemonSet", "StatefulSet") or r.k8s_name in checks:
            continue
        if r.k8s_name in mounted:
            continue  # what a check itself waits for
        waits = {by_urn[u].k8s_name for u in tls.ancestors(r.urn) if u in by_urn}
        assert checks <= waits, (r.kind, r.k8s_name, sorted(checks - waits))
