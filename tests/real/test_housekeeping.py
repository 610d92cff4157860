"""The housekeeping CronJobs of the prod plan, run for real against databases with their schemas.

nova-archive-deleted-rows, cinder-db-purge and glance-db-purge run as their pods would
(tests.lab.realenv.jobs: the plan's command, scripts, rendered configs and environment) with the
2026.1 nova-manage, cinder-manage and glance-manage, against a MariaDB whose databases the
plan's own db-init and db-sync Jobs made. Each database gets a row soft-deleted long ago and one
soft-deleted yesterday: the old one must go, the recent one stay (nova: both leave the
production table, the old one also its shadow table). Both exit codes that nova-manage uses for
success when there was something to do (archive returns 1 when it archived rows) must pass.
"""

from __future__ import annotations

import json
import subprocess
import uuid
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass

import pytest

from components.mechanism import oslo
from tests.lab.realenv.jobs import BootstrapChain, JobRun, adopt_root_password
from tests.lab.realenv.mapping import LocalMapping
from tests.lab.realenv.openstack_venv import OpenStackVenv
from tests.lab.realenv.servers import MariaDB, free_port, run_mariadb
from tools.plan import Plan, build_plan

STACK = "prod"
JOBS = ("nova-archive-deleted-rows", "cinder-db-purge", "glance-db-purge")

# Runs in the OpenStack venv: executes SQL statements as MariaDB's root, prints each result.
SQL = r"""
import json, os, sys
import pymysql

results = []
with pymysql.connect(host=os.environ["H"], port=int(os.environ["P"]), user="root", password=os.environ["PW"],
                     autocommit=True) as db, db.cursor() as cursor:
    for statement in json.load(sys.stdin):
        cursor.execute(statement)
        results.append([list(row) for row in cursor.fetchall()])
print(json.dumps(results, default=str))
"""


@dataclass
class Databases:
    plan: Plan
    chain: BootstrapChain
    venv: OpenStackVenv
    mariadb: MariaDB

    def sql(self, *statements: str) -> list[list[list]]:
        env = self.venv.env() | {"H": self.mariadb.host, "P": str(self.mariadb.port), "PW": self.mariadb.password or ""}
        done = subprocess.run(
            [self.venv.python, "-c", SQL], input=json.dumps(statements), env=env, capture_output=True, text=True
        )
        assert done.returncode == 0, done.stderr[-3000:]
        return json.loads(done.stdout)

    def run(self, name: str, kind: str = "CronJob") -> JobRun:
        return self.chain.run_job(self.plan.by_name(name, kind), 1)


@pytest.fixture(scope="module")
def databases(openstack_venv: OpenStackVenv, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Databases]:
    plan = build_plan(STACK)
    with ExitStack() as stack:
        mariadb = stack.enter_context(run_mariadb(tmp_path_factory.mktemp("mariadb")))
        root_password = plan.by_name("mariadb-root", "Secret").revealed["stringData"]["password"]
        mariadb = adopt_root_password(openstack_venv, mariadb, root_password)
        ports = {
            ("mariadb", oslo.MARIADB_PORT): mariadb.port,
            # Not used by db-sync and the housekeeping commands: nothing listens there.
            ("rabbitmq", oslo.RABBITMQ_PORT): free_port(),
            ("rabbitmq", oslo.RABBITMQ_MANAGEMENT_PORT): free_port(),
            ("memcached", oslo.MEMCACHED_PORT): free_port(),
            ("keystone-api", oslo.KEYSTONE_PORT): free_port(),
        }
        root = tmp_path_factory.mktemp("pods")
        mapping = LocalMapping.for_stack(plan.settings, ports, root, ("unused", "unused"))
        chain = BootstrapChain(plan, openstack_venv, mapping)
        found = Databases(plan, chain, openstack_venv, mariadb)
        for service in ("glance", "cinder", "nova"):
            for step in ("db-init", "db-sync"):
                run = found.run(f"{service}-{step}", "Job")
                assert run.ok, run.describe()
        yield found


def _ago(days: int) -> str:
    return f"UTC_TIMESTAMP() - INTERVAL {days} DAY"


def test_glance_db_purge_removes_what_was_deleted_before_its_age(databases: Databases) -> None:
    image = str(uuid.uuid4())
    databases.sql(
        "INSERT INTO glance.images (id, status, created_at, deleted, visibility, protected, os_hidden, min_disk, "
        f"min_ram) VALUES ('{image}', 'active', {_ago(90)}, 0, 'shared', 0, 0, 0, 0)",
        "INSERT INTO glance.image_tags (image_id, value, created_at, deleted_at, deleted) VALUES "
        f"('{image}', 'old', {_ago(90)}, {_ago(60)}, 1), ('{image}', 'recent', {_ago(2)}, {_ago(1)}, 1), "
        f"('{image}', 'kept', {_ago(2)}, NULL, 0)",
    )
    run = databases.run("glance-db-purge")
    assert run.ok, run.describe()
    [tags] = databases.sql(f"SELECT value FROM glance.image_tags WHERE image_id = '{image}' ORDER BY value")
    assert tags == [["kept"], ["recent"]]


def test_cinder_db_purge_removes_what_was_deleted_before_its_age(databases: Databases) -> None:
    old, recent = str(uuid.uuid4()), str(uuid.uuid4())
    databases.sql(
        "INSERT INTO cinder.volume_types (id, name, created_at, deleted_at, deleted, is_public) VALUES "
        f"('{old}', 'old', {_ago(90)}, {_ago(60)}, 1, 1), ('{recent}', 'recent', {_ago(2)}, {_ago(1)}, 1, 1)"
    )
    run = databases.run("cinder-db-purge")
    assert run.ok, run.describe()
    [found] = databases.sql(f"SELECT name FROM cinder.volume_types WHERE id IN ('{old}', '{recent}')")
    assert found == [["recent"]]


def test_nova_archives_every_deleted_row_and_purges_old_ones_in_every_cell(databases: Databases) -> None:
    rows = {"old": (str(uuid.uuid4()), 60), "recent": (str(uuid.uuid4()), 1)}
    for cell in ("nova", "nova_cell0"):
        values = ", ".join(f"('{uid}', {_ago(age + 1)}, {_ago(age)}, 1)" for uid, age in rows.values())
        databases.sql(f"INSERT INTO {cell}.instances (uuid, created_at, deleted_at, deleted) VALUES {values}")
        databases.sql(f"UPDATE {cell}.instances SET deleted = id WHERE deleted = 1")  # as nova soft-deletes
    run = databases.run("nova-archive-deleted-rows")  # archive_deleted_rows exits 1: it archived rows
    assert run.ok, run.describe()
    assert "Nothing was archived" not in run.tail
    uuids = ", ".join(f"'{uid}'" for uid, _ in rows.values())
    for cell in ("nova", "nova_cell0"):
        production, shadow = databases.sql(
            f"SELECT uuid FROM {cell}.instances WHERE uuid IN ({uuids})",
            f"SELECT uuid FROM {cell}.shadow_instances WHERE uuid IN ({uuids})",
        )
        assert production == [], cell
        assert shadow == [[rows["recent"][0]]], cell
    # Again, with nothing left to archive or purge (exit codes 0 and 3): still a success.
    again = databases.run("nova-archive-deleted-rows")
    assert again.ok, again.describe()
