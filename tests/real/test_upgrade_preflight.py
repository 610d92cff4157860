"""A preflight check stops the upgrade before any change, saying what to do: for real, on 2025.2's Cinder schema.

Cinder's database is made as prod at 2025.2 deploys it (the plan's cinder-db-init and cinder-db-sync Jobs
with 2025.2's code, tests/lab/realenv/jobs.py); then the 2026.1 plan with `upgrade.from: 2025.2` runs its
Cinder preflight Jobs as their pods would: `cinder-upgrade-check-2026-1` (cinder-status of 2026.1, behind
components/scripts/upgrade_gate.sh) and `cinder-prior-migrations-2026-1` (2025.2's online data
migrations, run to the end with 2025.2's code).

What is planted is an online data migration left unfinished: a cinder-volume service record without a
uuid, as a cloud that never ran the online data migrations of Queens still has. Queens's migration is
long gone from Cinder (2025.2's `cinder-manage db online_data_migrations` no longer has it, so the prior
migrations cannot finish it); 2026.1's cinder-status still checks for its result ("Service UUIDs":
cinder/cmd/status.py `_check_service_uuid`). The other Cinder check passes, as on a healthy cloud;
that nothing of the upgrade starts before a failed check is the deploy graph's (every Job, workload and
the Backup wait for every check: tests/test_upgrade.py), shown here for this check.
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from dataclasses import dataclass

import pytest

from components.mechanism import oslo
from tests.conftest import plan_of, release_plan
from tests.lab.cloud.images import image_release
from tests.lab.realenv.jobs import BootstrapChain, JobRun, adopt_root_password
from tests.lab.realenv.mapping import LocalMapping
from tests.lab.realenv.openstack_venv import OpenStackVenv
from tests.lab.realenv.servers import MariaDB, free_port, run_mariadb
from tools.plan import Plan

STACK, FROM, TO = "prod", "2025.2", "2026.1"
CHECK, PRIOR = "cinder-upgrade-check-2026-1", "cinder-prior-migrations-2026-1"
PLANT = (
    "INSERT INTO cinder.services (created_at, deleted, host, `binary`, topic, report_count, disabled, uuid) "
    "VALUES (UTC_TIMESTAMP(), 0, 'volume-1@rbd', 'cinder-volume', 'cinder-volume', 0, 0, NULL)"
)


@dataclass
class Cinder:
    upgrading: Plan
    chains: dict[str, BootstrapChain]  # release → the chain that runs that release's code
    mariadb: MariaDB
    venv: OpenStackVenv

    def run(self, job: str) -> JobRun:
        """A Job of the upgrade's plan, with the code of the release its image is of."""
        registration = self.upgrading.by_name(job, "Job")
        image = registration.revealed["spec"]["template"]["spec"]["containers"][0]["image"]
        return self.chains[image_release(image, TO)].run_job(registration, 1)

    def sql(self, statement: str) -> None:
        code = (
            "import os, pymysql\n"
            "with pymysql.connect(host=os.environ['H'], port=int(os.environ['P']), user='root',\n"
            "                     password=os.environ['PW'], autocommit=True) as db:\n"
            "    db.cursor().execute(os.environ['Q'])\n"
        )
        env = self.venv.env() | {"H": self.mariadb.host, "P": str(self.mariadb.port),
                                 "PW": self.mariadb.password or "", "Q": statement}  # fmt: skip
        done = subprocess.run([self.venv.python, "-c", code], env=env, capture_output=True, text=True)
        assert done.returncode == 0, done.stderr[-2000:]


@pytest.fixture(scope="module")
def cinder(venv_of: Callable[[str], OpenStackVenv], tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cinder]:
    previous, upgrading = release_plan(STACK, FROM), plan_of(STACK, upgrade={"from": FROM})
    with ExitStack() as stack:
        mariadb = stack.enter_context(run_mariadb(tmp_path_factory.mktemp("mariadb")))
        root_password = upgrading.by_name("mariadb-root", "Secret").revealed["stringData"]["password"]
        mariadb = adopt_root_password(venv_of(FROM), mariadb, root_password)
        ports = {("mariadb", oslo.MARIADB_PORT): mariadb.port}
        # Not used by db-sync and the checks: nothing listens there.
        ports |= {(name, port): free_port() for name, port in (("rabbitmq", oslo.RABBITMQ_PORT),
                  ("rabbitmq", oslo.RABBITMQ_MANAGEMENT_PORT), ("memcached", oslo.MEMCACHED_PORT),
                  ("keystone-api", oslo.KEYSTONE_PORT))}  # fmt: skip
        mapping = LocalMapping.for_stack(upgrading.settings, ports, tmp_path_factory.mktemp("pods"), ("x", "x"))
        deployed = BootstrapChain(previous, venv_of(FROM), mapping)
        for job in ("cinder-db-init", "cinder-db-sync"):  # Cinder as 2025.2 deployed it
            run = deployed.run_job(previous.by_name(job, "Job"), 1)
            assert run.ok, run.describe()
        chains = {release: BootstrapChain(upgrading, venv_of(release), mapping) for release in (FROM, TO)}
        yield Cinder(upgrading, chains, mariadb, venv_of(FROM))


def test_on_a_healthy_2025_2_cinder_both_checks_pass(cinder: Cinder) -> None:
    for job in (CHECK, PRIOR):
        run = cinder.run(job)
        assert run.ok, run.describe()
    assert "Service UUIDs" in cinder.run(CHECK).tail  # the check that is to stop the upgrade below ran


def test_an_unfinished_online_migration_stops_the_upgrade_before_any_change_saying_what_to_do(cinder: Cinder) -> None:
    cinder.sql(PLANT)
    # 2025.2's own online migrations cannot finish what Queens's left: the prior-migrations Job passes.
    assert cinder.run(PRIOR).ok
    run = cinder.run(CHECK)
    assert run.returncode == 1, run.describe()
    said = run.tail
    # cinder-status names what is wrong and what to run; the gate says the upgrade stopped, and what to do.
    assert "Services and volumes must have a service UUID" in said and "Queens online data migrations" in said, said
    assert "upgrade stopped before any change: 'cinder-status upgrade check' exited 2 (passes with: 0 1)" in said
    assert f"cinder-status found what cinder of {TO} cannot run with: fix what its output names, then pulumi up" in said


def test_nothing_of_the_upgrade_starts_before_that_check(cinder: Cinder) -> None:
    plan = cinder.upgrading
    check = plan.by_name(CHECK, "Job").urn
    waiting = [r for r in plan.custom if r.kind in ("Job", "Deployment", "DaemonSet", "StatefulSet")
               and "-upgrade-check-" not in r.name and "-prior-migrations-" not in r.name]  # fmt: skip
    waiting.append(plan.by_name("mariadb-backup-before-2026-1", "Backup"))  # the dump, and every migration after it
    assert len(waiting) > 50
    assert [r.k8s_name for r in waiting if check not in plan.ancestors(r.urn)] == []
