"""The bootstrap chain of a stack, executed for real: every Job of the plan, twice.

For each stack a MariaDB, RabbitMQ and memcached of its own start on loopback, and
tests.lab.realenv.jobs runs every Job of the offline plan in deploy order with the plan's
scripts, rendered files and secrets; keystone-api is served from its own Deployment's
files with uWSGI. Then a real client (openstacksdk, PyMySQL and kombu in the OpenStack
venv) looks at the cloud as the services will; every Job runs a second time, and the
cloud must look exactly the same.

The chain runs once, on prod, with the release its stack file names: dev's Jobs are prod's less
Cinder's, shaped by the same settings (plain text inside the cluster, https endpoints), and its
topology changes none of them, so a second chain would prove nothing more for another minute of
`make test` (README, "Tests": which stack runs which proof). CHAINS may add a stack, or a stack as
another release deploys it (tests/conftest.py release_plan), with that release's venv. Jobs
that wait for workloads this chain does not run (nova-cell-setup for the compute hosts,
cinder-volume-type for cinder-api) run with the whole cloud (tests/cloud).
"""

from __future__ import annotations

import configparser
import json
import subprocess
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from components.cloud.stack_config import parse_settings
from components.mechanism import oslo
from tests.conftest import release_plan, stacks_release
from tests.lab.realenv.jobs import BootstrapChain, ChainReport, JobFailedError, JobRun, adopt_root_password
from tests.lab.realenv.mapping import LocalMapping, UnmappedPortError
from tests.lab.realenv.openstack_venv import OpenStackVenv
from tests.lab.realenv.schema_heads import ALEMBIC, schema_heads
from tests.lab.realenv.servers import MariaDB, RabbitMQ, Server, free_port
from tools.plan import Plan, build_plan

# (stack, release): prod's own release. prod as 2025.2 deploys it costs about as much as prod again
# (README, "Releases"), so it is not here: ("prod", "2025.2") adds it.
CHAINS = (("prod", stacks_release()),)
# Tables whose rows the bootstrap creates or must leave alone, per database: their
# presence proves the schema, their row counts prove a second run changes nothing.
KEY_TABLES: dict[str, tuple[str, ...]] = {
    # A password row and a revocation event are what re-setting a password leaves behind.
    "keystone": (
        "project",
        "user",
        "role",
        "assignment",
        "service",
        "endpoint",
        "region",
        "password",
        "revocation_event",
    ),
    # The metadata definitions glance-metadefs-load puts there, and a rerun must not duplicate.
    "glance": (
        "images",
        "image_members",
        "metadef_namespaces",
        "metadef_resource_types",
        "metadef_namespace_resource_types",
        "metadef_properties",
        "metadef_objects",
        "metadef_tags",
    ),
    "placement": ("resource_providers", "inventories"),
    "nova_api": ("cell_mappings", "host_mappings", "flavors"),
    "nova_cell0": ("instances", "compute_nodes"),
    "nova": ("instances", "compute_nodes", "services"),
    "neutron": ("networks", "ports", "subnets"),
    "cinder": ("volumes", "services"),
}
# What every enabled service registers in the catalog, by service type.
CATALOG_TYPES = {
    "glance": "image",
    "placement": "placement",
    "nova": "compute",
    "neutron": "network",
    "cinder": "volumev3",
}

# Runs in the OpenStack venv: reads a JSON request on stdin, prints what it saw as JSON.
OBSERVE = r"""
import json, sys, urllib.request, base64
import kombu, openstack, pymysql

spec = json.load(sys.stdin)
seen = {"databases": {}, "tokens": {}, "identity": {}, "rabbitmq": {}}

for grant in spec["grants"]:
    for name in grant["databases"]:
        # As the service's own database user, with its generated password.
        with pymysql.connect(host=spec["db"][0], port=spec["db"][1], user=grant["user"],
                             password=grant["password"], database=name) as db, db.cursor() as cur:
            cur.execute("SHOW TABLES")
            tables = sorted(row[0] for row in cur.fetchall())
            rows = {}
            for table in spec["key_tables"].get(name, []):
                if table in tables:
                    cur.execute(f"SELECT COUNT(*) FROM `{table}`")
                    rows[table] = cur.fetchone()[0]
            versions = []
            if "alembic_version" in tables:
                cur.execute("SELECT version_num FROM alembic_version")
                versions = sorted(row[0] for row in cur.fetchall())
            # The grant allows writing, not only reading: a table that dies with the session.
            cur.execute("CREATE TEMPORARY TABLE grant_probe (id INT)")
            cur.execute("INSERT INTO grant_probe VALUES (1)")
            cells = []
            if name == "nova_api":
                cur.execute("SELECT name, uuid, transport_url, database_connection FROM cell_mappings ORDER BY id")
                cells = [list(row) for row in cur.fetchall()]
            seen["databases"][name] = {"user": grant["user"], "tables": tables, "rows": rows,
                                       "versions": versions, "cells": cells}

def connect(user, password, project):
    return openstack.connect(auth_url=spec["auth_url"], username=user, password=password, project_name=project,
                             user_domain_name="Default", project_domain_name="Default",
                             region_name=spec["region"], interface="internal")

for user in spec["service_users"]:
    conn = connect(user["name"], user["password"], user["project"])
    access = conn.session.auth.get_access(conn.session)
    catalog = sorted([service["type"], service.get("name"), e["interface"], e.get("region_id"), e["url"]]
                     for service in access.service_catalog.catalog for e in service["endpoints"])
    seen["tokens"][user["name"]] = {"project": access.project_name, "project_id": access.project_id,
                                    "roles": sorted(access.role_names), "catalog": catalog}

admin = connect("admin", spec["admin_password"], "admin")
identity = admin.identity
seen["identity"] = {
    "users": sorted([u.id, u.name] for u in identity.users()),
    "projects": sorted([p.id, p.name] for p in identity.projects()),
    "roles": sorted([r.id, r.name] for r in identity.roles()),
    "services": sorted([s.id, s.name, s.type, s.is_enabled] for s in identity.services()),
    "endpoints": sorted([e.id, e.service_id, e.interface, e.region_id, e.url] for e in identity.endpoints()),
    "regions": sorted(r.id for r in identity.regions()),
    "assignments": sorted([a.user["id"], a.scope["project"]["id"], a.role["id"]]
                          for a in identity.role_assignments() if "project" in a.scope and a.user),
}

def management(path):
    api, user, password = spec["rabbitmq_api"]
    token = base64.b64encode(f"{user}:{password}".encode()).decode()
    request = urllib.request.Request(f"{api}/api/{path}", headers={"Authorization": f"Basic {token}"})
    with urllib.request.urlopen(request, timeout=10) as response:
        return json.load(response)

logins = {}
for service, url in spec["transport_urls"].items():
    # The service's own transport_url, as oslo.messaging would use it (kombu underneath).
    with kombu.Connection(url.replace("rabbit://", "amqp://", 1), connect_timeout=10) as amqp:
        amqp.connect()
        logins[service] = amqp.connected
seen["rabbitmq"] = {
    "vhosts": sorted(v["name"] for v in management("vhosts")),
    "users": sorted([u["name"], u["tags"]] for u in management("users")),
    "permissions": sorted([p["user"], p["vhost"], p["configure"], p["write"], p["read"]]
                          for p in management("permissions")),
    "logins": logins,
}
print(json.dumps(seen))
"""


@dataclass
class Chain:
    plan: Plan
    chain: BootstrapChain
    mapping: LocalMapping
    venv: OpenStackVenv
    rabbitmq: RabbitMQ
    mariadb: MariaDB
    report: ChainReport
    first: list[JobRun]
    before: dict[str, Any]  # what the client saw after the first run

    def env(self, job: str) -> dict[str, str]:
        return self.chain.env(self.plan.by_name(job, "Job"))

    def jobs_named(self, suffix: str) -> list[str]:
        return [name for name in self.chain.jobs() if name.endswith(suffix)]

    def transport_urls(self) -> dict[str, str]:
        """Each service's [DEFAULT] transport_url from its rendered configs, as mapped here."""
        urls = {}
        for job in self.jobs_named("-rabbit-init"):
            service = job.removesuffix("-rabbit-init")
            for name, text in self.chain.object_data("Secret", f"{service}-etc").items():
                parser = configparser.ConfigParser(strict=False, interpolation=None)
                try:
                    parser.read_string(text)
                except configparser.Error:
                    continue  # not an ini file (Horizon's Python settings)
                if parser.defaults().get("transport_url"):
                    urls[f"{service}/{name}"] = self.mapping.text(parser.defaults()["transport_url"])
        return urls

    def observe(self) -> dict[str, Any]:
        grants = [
            {"user": env["DB_USER"], "password": env["DB_PASSWORD"], "databases": env["DB_NAMES"].split(",")}
            for env in map(self.env, self.jobs_named("-db-init"))
        ]
        users = [
            {"name": env["SERVICE_USER"], "password": env["SERVICE_PASSWORD"], "project": env["SERVICE_PROJECT"]}
            for env in map(self.env, self.jobs_named("-ks-user"))
        ]
        request = {
            "db": [self.mariadb.host, self.mariadb.port],
            "grants": grants,
            "key_tables": KEY_TABLES,
            "auth_url": self.mapping.url("keystone-api", oslo.KEYSTONE_PORT, "/v3"),
            "region": self.plan.settings.region,
            "service_users": users,
            "admin_password": self.chain.object_data("Secret", "keystone-admin")["password"],
            "rabbitmq_api": [self.rabbitmq.management_url, self.rabbitmq.user, self.rabbitmq.password],
            "transport_urls": self.transport_urls(),
        }
        done = subprocess.run(
            [self.venv.python, "-c", OBSERVE],
            input=json.dumps(request),
            capture_output=True,
            text=True,
            env=self.venv.env(),
            timeout=300,
        )
        assert done.returncode == 0, f"the client checks failed:\n{done.stderr[-4000:]}"
        return json.loads(done.stdout)


def _timed(report: ChainReport, phase: str, action: Callable[[], Any]) -> Any:
    started = time.monotonic()
    try:
        return action()
    finally:
        report.phases[phase] = time.monotonic() - started


@pytest.fixture(scope="session", params=CHAINS, ids=[f"{stack}-{release}" for stack, release in CHAINS])
def chain(
    request: pytest.FixtureRequest,
    venv_of: Callable[[str], OpenStackVenv],
    own_servers: Callable[[str], AbstractContextManager[tuple[MariaDB, RabbitMQ, Server]]],
    chain_reports: list[ChainReport],
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Chain]:
    """Every Job of the stack's plan, run once against servers of its own."""
    stack_name, release = request.param
    openstack_venv = venv_of(release)
    report = ChainReport(f"{stack_name} ({release})")
    chain_reports.append(report)
    plan = _timed(report, "plan", lambda: release_plan(stack_name, release))
    with ExitStack() as stack:
        servers = f"{stack_name}-{release}"
        mariadb, rabbitmq, memcached = _timed(report, "servers", lambda: stack.enter_context(own_servers(servers)))
        # The MariaDB operator gives root the plan's password; the RabbitMQ operator makes
        # its own admin, which the mapping hands the Jobs as rabbitmq-default-user.
        root_password = _secret(plan, "mariadb-root", "password")
        mariadb = adopt_root_password(openstack_venv, mariadb, root_password)
        ports = {
            ("mariadb", oslo.MARIADB_PORT): mariadb.port,
            ("rabbitmq", oslo.RABBITMQ_PORT): rabbitmq.port,
            ("rabbitmq", oslo.RABBITMQ_MANAGEMENT_PORT): rabbitmq.management_port,
            ("memcached", oslo.MEMCACHED_PORT): memcached.port,
            ("keystone-api", oslo.KEYSTONE_PORT): free_port(),
        }
        admin = (rabbitmq.user or "", rabbitmq.password or "")
        mapping = LocalMapping.for_stack(plan.settings, ports, tmp_path_factory.mktemp(f"{servers}-pods"), admin)
        runner = BootstrapChain(plan, openstack_venv, mapping)
        stack.callback(runner.close)

        def report_runs() -> None:  # whatever ran is reported, also when a Job failed
            report.runs.extend(runner.runs)
            report.ready_after.update(runner.ready_after)

        stack.callback(report_runs)
        report.not_run = runner.not_run()
        first = _timed(report, "round 1", lambda: runner.run(1))
        state = Chain(plan, runner, mapping, openstack_venv, rabbitmq, mariadb, report, first, {})
        state.before = _timed(report, "client checks 1", state.observe)
        yield state


def _secret(plan: Plan, name: str, key: str) -> str:
    return plan.by_name(name, "Secret").revealed["stringData"][key]


@pytest.fixture(scope="session")
def rerun(chain: Chain) -> tuple[list[JobRun], dict[str, Any]]:
    """Every Job a second time, and what the client sees afterwards."""
    second = _timed(chain.report, "round 2", lambda: chain.chain.run(2))
    after = _timed(chain.report, "client checks 2", chain.observe)
    return second, after


def test_every_job_of_the_plan_ran_and_succeeded(chain: Chain) -> None:
    settings = chain.plan.settings
    services = ["keystone", *(s for s in CATALOG_TYPES if getattr(settings.services, s))]
    expected = {
        *(f"{s}-{step}" for s in services for step in ("db-init", "db-sync")),
        *(f"{s}-{step}" for s in services[1:] for step in ("ks-user", "ks-service", "ks-endpoints")),
        *(f"{s}-rabbit-init" for s in ("nova", "neutron", "cinder") if s in services),
        "keystone-fernet-setup",
        "keystone-credential-setup",
        "keystone-bootstrap",
        "glance-metadefs-load",
    }
    ran = [run.name for run in chain.first]
    assert set(ran) == expected == set(chain.chain.jobs())
    assert len(ran) == len(set(ran))
    assert all(run.ok for run in chain.first)
    left = {"nova-cell-setup", *(["cinder-volume-type"] if settings.services.on("cinder") else [])}
    assert set(chain.chain.left_to_the_cloud()) == left
    # Everything came in the plan's own order.
    order = {name: i for i, name in enumerate(ran)}
    for before, after in [
        ("keystone-db-init", "keystone-db-sync"),
        ("keystone-fernet-setup", "keystone-db-sync"),
        ("keystone-db-sync", "keystone-bootstrap"),
        ("keystone-bootstrap", "nova-ks-user"),
        ("nova-ks-service", "nova-ks-endpoints"),
        ("nova-db-init", "nova-db-sync"),
        ("glance-db-sync", "glance-metadefs-load"),
    ]:
        assert order[before] < order[after], f"{before} ran after {after}"


def test_databases_exist_and_each_user_works_with_its_password(chain: Chain) -> None:
    databases = chain.before["databases"]
    for job in chain.jobs_named("-db-init"):
        env = chain.env(job)
        for name in env["DB_NAMES"].split(","):
            # observe() connected as DB_USER with DB_PASSWORD and wrote a temporary table.
            assert databases[name]["user"] == env["DB_USER"] == job.removesuffix("-db-init")


def test_each_database_holds_its_schema(chain: Chain) -> None:
    databases = chain.before["databases"]
    assert set(databases) <= set(KEY_TABLES)
    for name, seen in databases.items():
        missing = set(KEY_TABLES[name]) - set(seen["tables"])
        assert not missing, f"{name} lacks tables {sorted(missing)} ({len(seen['tables'])} tables)"
    assert databases["keystone"]["rows"]["region"] == 1


def test_each_schema_is_at_its_releases_heads(chain: Chain) -> None:
    """What db-sync leaves in each `alembic_version` is what tests/lab/realenv/schema_heads.py reads from the release's
    code: the rollback proof (tests/lab/cloud/rollback_check.py) tells the releases' schemas apart by it."""
    databases = chain.before["databases"]
    known = tuple(name for name in databases if name in ALEMBIC)
    assert {"keystone", "glance", "nova", "nova_api", "neutron"} <= set(known), sorted(databases)
    heads = schema_heads(chain.venv.path, known)
    assert {name: databases[name]["versions"] for name in known} == heads


def test_glance_holds_every_metadata_definition_it_ships(chain: Chain) -> None:
    """One namespace per JSON file of glance's etc/metadefs (what the image copies to /etc/glance/metadefs)."""
    shipped = sorted((chain.venv.path / "etc" / "glance" / "metadefs").glob("*.json"))
    rows = chain.before["databases"]["glance"]["rows"]
    assert len(shipped) > 20
    assert rows["metadef_namespaces"] == len(shipped), rows
    assert rows["metadef_resource_types"] > 0 and rows["metadef_properties"] > 0, rows


def test_nova_has_cell0_and_cell1_pointing_at_the_rendered_config(chain: Chain) -> None:
    cells = {name: rest for name, *rest in chain.before["databases"]["nova_api"]["cells"]}
    assert sorted(cells) == ["cell0", "cell1"]
    nova_conf = configparser.ConfigParser(strict=False, interpolation=None)
    nova_conf.read_string(chain.chain.object_data("Secret", "nova-etc")["nova.conf"])
    uuid, transport, database = cells["cell0"]
    assert uuid == "00000000-0000-0000-0000-000000000000"
    assert transport == "none:///"
    assert database == chain.mapping.text(nova_conf["database"]["connection"]).replace("/nova?", "/nova_cell0?")
    uuid, transport, database = cells["cell1"]
    assert transport == chain.mapping.text(nova_conf["DEFAULT"]["transport_url"])
    assert database == chain.mapping.text(nova_conf["database"]["connection"])


def test_each_service_user_gets_a_token_with_its_roles(chain: Chain) -> None:
    tokens = chain.before["tokens"]
    users = chain.jobs_named("-ks-user")
    assert len(tokens) == len(users) > 0
    for job in users:
        env = chain.env(job)
        token = tokens[env["SERVICE_USER"]]
        roles = set(env["SERVICE_ROLES"].split(","))
        assert roles == {"admin", "service"}
        assert token["project"] == env["SERVICE_PROJECT"] == "service"
        assert roles <= set(token["roles"]), token["roles"]


def _expected_catalog(chain: Chain) -> set[tuple[str, str, str, str]]:
    """(type, name, interface, url) the plan says, as the Jobs registered them here."""
    expected = set()
    bootstrap = chain.env("keystone-bootstrap")
    for interface in ("public", "internal", "admin"):
        expected.add(("identity", "keystone", interface, bootstrap[f"OS_BOOTSTRAP_{interface.upper()}_URL"]))
    for job in chain.jobs_named("-ks-endpoints"):
        for entry in chain.env(job)["CATALOG"].split(";"):
            name, service_type, *urls = entry.split(",")
            for interface, url in zip(("public", "internal", "admin"), urls, strict=True):
                if url:
                    expected.add((service_type, name, interface, url))
    return expected


def test_catalog_lists_every_enabled_service_with_the_plans_urls(chain: Chain) -> None:
    settings = chain.plan.settings
    expected = _expected_catalog(chain)
    enabled = {"identity"} | {t for s, t in CATALOG_TYPES.items() if getattr(settings.services, s)}
    assert {entry[0] for entry in expected} == enabled
    for service_type in enabled:
        interfaces = {i for t, _, i, _ in expected if t == service_type}
        assert {"public", "internal"} <= interfaces, service_type
    for user, token in chain.before["tokens"].items():
        project = token["project_id"]
        seen = {(t, n, i, url) for t, n, i, region, url in token["catalog"] if region == settings.region}
        # Keystone fills in the project of the token where an endpoint names %(project_id)s.
        assert seen == {(t, n, i, url.replace("%(project_id)s", project)) for t, n, i, url in expected}, user
    endpoints = chain.before["identity"]["endpoints"]
    assert all(region == settings.region for _, _, _, region, _ in endpoints)
    assert len(endpoints) == len(expected)


def test_rabbitmq_has_each_services_vhost_user_and_permissions(chain: Chain) -> None:
    rabbit = chain.before["rabbitmq"]
    jobs = chain.jobs_named("-rabbit-init")
    assert jobs
    for job in jobs:
        env = chain.env(job)
        user, vhost = env["RABBIT_USER"], env["RABBIT_VHOST"]
        assert vhost in rabbit["vhosts"]
        assert [user, []] in rabbit["users"]  # no management tag: a service user only talks AMQP
        granted = [p[1:] for p in rabbit["permissions"] if p[0] == user]
        assert granted == [[vhost, ".*", ".*", ".*"]]  # its own vhost, and nothing else
    services = {job.removesuffix("-rabbit-init") for job in jobs}
    # Every rendered config that names a transport_url logged in with it.
    assert {key.split("/")[0] for key in rabbit["logins"]} == services
    assert all(rabbit["logins"].values()), rabbit["logins"]


def _changes(before: Any, after: Any, path: str = "") -> list[str]:
    """Where two observations differ, as `path: before -> after` lines."""
    if isinstance(before, dict) and isinstance(after, dict):
        return [
            change
            for key in sorted(before.keys() | after.keys())
            for change in _changes(before.get(key), after.get(key), f"{path}/{key}")
        ]
    return [] if before == after else [f"{path}: {before!r} -> {after!r}"]


def test_second_run_of_every_job_changes_nothing(chain: Chain, rerun: tuple[list[JobRun], dict[str, Any]]) -> None:
    second, after = rerun
    assert [run.name for run in second] == [run.name for run in chain.first]
    assert all(run.ok for run in second)
    changes = _changes(chain.before, after)
    assert not changes, "the second run changed:\n" + "\n".join(changes)


def _local(root: Path) -> LocalMapping:
    ports = {("mariadb", 3306): 40001, ("rabbitmq", 5672): 40002, ("rabbitmq", 15672): 40003}
    ports |= {("memcached", 11211): 40004, ("keystone-api", 5000): 40005}
    return LocalMapping.for_stack(parse_settings({}), ports, root, ("admin", "secret"))


def test_mapping_rewrites_only_served_addresses_and_pod_paths(tmp_path: Path) -> None:
    local = _local(tmp_path)
    conf = (
        "connection = mysql+pymysql://nova:pw@mariadb.openstack.svc.cluster.local:3306/nova?charset=utf8\n"
        "ha = mysql+pymysql://nova:pw@mariadb-primary.openstack.svc.cluster.local:3306/nova\n"
        "memcache_servers = memcached.openstack.svc.cluster.local:11211\n"
        "servers = memcached-0.memcached.openstack.svc.cluster.local:11211,"
        "memcached-1.memcached.openstack.svc.cluster.local:11211\n"
        "auth_url = http://keystone-api.openstack.svc.cluster.local:5000\n"
        "internal = http://nova-api.openstack.svc.cluster.local:8774/v2.1\n"
        "public = https://keystone.cloud.example.com/etc/keystone\n"
        "http-socket = 0.0.0.0:5000\nnovncproxy = 0.0.0.0:6080\n"
        "lock_path = /var/lib/nova/tmp\nkey_repository = /etc/keystone/fernet-keys\n"
    )
    assert local.text(conf) == (
        "connection = mysql+pymysql://nova:pw@127.0.0.1:40001/nova?charset=utf8\n"
        "ha = mysql+pymysql://nova:pw@127.0.0.1:40001/nova\n"
        "memcache_servers = 127.0.0.1:40004\n"
        "servers = 127.0.0.1:40004,127.0.0.1:40004\n"
        "auth_url = http://127.0.0.1:40005\n"
        "internal = http://nova-api.openstack.svc.cluster.local:8774/v2.1\n"  # registered as it is
        "public = https://keystone.cloud.example.com/etc/keystone\n"  # a URL's path is no file
        "http-socket = 127.0.0.1:40005\nnovncproxy = 0.0.0.0:6080\n"
        f"lock_path = {tmp_path}/var/lib/nova/tmp\nkey_repository = {tmp_path}/etc/keystone/fernet-keys\n"
    )
    assert local.text(local.text(conf)) == local.text(conf)
    assert local.text("/scripts/db_init.py") == f"{tmp_path}/scripts/db_init.py"
    assert local.image_dirs(conf) == {tmp_path / "var/lib/nova"}
    assert local.operator_secrets["rabbitmq-default-user"] == {"username": "admin", "password": "secret"}
    with pytest.raises(UnmappedPortError, match="rabbitmq:9999"):
        local.text("rabbitmq.openstack.svc.cluster.local:9999")


def test_a_failing_job_fails_with_its_output(openstack_venv: OpenStackVenv, tmp_path: Path) -> None:
    # The first wave (the key checks) needs no server: a corrupt key must stop it there.
    plan = build_plan("dev")
    plan.by_name("keystone-fernet-keys", "Secret").revealed["stringData"]["1"] = "not-a-fernet-key"
    runner = BootstrapChain(plan, openstack_venv, _local(tmp_path))
    with pytest.raises(JobFailedError, match=r"(?s)Job keystone-fernet-setup \(round 1\) exited 1.*not a valid Fernet"):
        runner.run(1)
    assert [run.name for run in runner.runs if not run.ok] == ["keystone-fernet-setup"]
    assert "keystone-db-sync" not in {run.name for run in runner.runs}
