"""Housekeeping CronJobs remove soft-deleted rows: nova-archive-deleted-rows, cinder-db-purge,
glance-db-purge (openstack-helm's names), on the schedules and ages of `housekeeping`.
tests/real/test_housekeeping.py runs them against real databases."""

from __future__ import annotations

import pytest

from tests.conftest import plan_of
from tests.helpers import bundle_job, containers, objects
from tools.plan import Plan

JOBS = {"nova": "nova-archive-deleted-rows", "cinder": "cinder-db-purge", "glance": "glance-db-purge"}
SETTINGS = {"nova": "nova_archive_deleted_rows", "cinder": "cinder_db_purge", "glance": "glance_db_purge"}


def _enabled(plan: Plan) -> dict[str, str]:
    return {service: job for service, job in JOBS.items() if getattr(plan.settings.services, service)}


def test_each_enabled_service_cleans_its_database_on_its_schedule(stack_plan: Plan) -> None:
    cron_jobs = objects(stack_plan, "CronJob")
    expected = _enabled(stack_plan)
    assert {job for job in JOBS.values() if job in cron_jobs} == set(expected.values())
    for service, job in expected.items():
        purge = getattr(stack_plan.settings.housekeeping, SETTINGS[service])
        spec = cron_jobs[job].inputs["spec"]
        assert spec["schedule"] == purge.schedule
        assert spec["concurrencyPolicy"] == "Forbid"
        labels = cron_jobs[job].inputs["metadata"]["labels"]
        assert labels["app.kubernetes.io/name"] == service


def test_the_commands_are_the_projects_own(stack_plan: Plan) -> None:
    cron_jobs, ages = objects(stack_plan, "CronJob"), stack_plan.settings.housekeeping
    [glance] = containers(cron_jobs["glance-db-purge"])
    age = str(ages.glance_db_purge.age_in_days)
    # glance/cmd/manage.py DbCommands.purge: --age_in_days, --max_rows (-1: every row, not the first 100).
    config = ["--config-file", "/etc/glance/glance-api.conf"]
    assert glance["args"] == ["glance-manage", *config, "db", "purge", "--age_in_days", age, "--max_rows", "-1"]
    [nova] = containers(cron_jobs["nova-archive-deleted-rows"])
    assert nova["args"] == ["bash", "/scripts/nova_archive_deleted_rows.sh"]
    assert {"name": "AGE_IN_DAYS", "value": str(ages.nova_archive_deleted_rows.age_in_days)} in nova["env"]
    script = stack_plan.by_name("nova-bin", "ConfigMap").inputs["data"]["nova_archive_deleted_rows.sh"]
    # nova/cmd/manage.py DbCommands.archive_deleted_rows and purge.
    assert "db archive_deleted_rows --all-cells --until-complete" in script
    assert 'db purge --all-cells --before "$before"' in script
    if stack_plan.settings.services.on("cinder"):
        [cinder] = containers(cron_jobs["cinder-db-purge"])
        age = str(ages.cinder_db_purge.age_in_days)
        # cinder/cmd/manage.py DbCommands.purge takes age_in_days as its argument.
        assert cinder["args"] == ["cinder-manage", "--config-file", "/etc/cinder/cinder.conf", "db", "purge", age]


def test_each_job_waits_for_its_schema(stack_plan: Plan) -> None:
    by_urn = {r.urn: r for r in stack_plan.custom}
    for service, job in _enabled(stack_plan).items():
        cron = objects(stack_plan, "CronJob")[job]
        waits = {by_urn[u].k8s_name for u in stack_plan.dependencies[cron.urn] if by_urn[u].kind == "Job"}
        assert waits == {f"{service}-db-sync"} | bundle_job(stack_plan)


def test_schedules_and_ages_come_from_the_settings() -> None:
    plan = plan_of(
        "prod",
        housekeeping={
            "novaArchiveDeletedRows": {"schedule": "0 4 * * *", "ageInDays": 90},
            "cinderDbPurge": {"schedule": "0 5 * * 0", "ageInDays": 7},
            "glanceDbPurge": {"schedule": "@weekly", "ageInDays": 1},
        },
    )
    cron_jobs = objects(plan, "CronJob")
    assert [cron_jobs[j].inputs["spec"]["schedule"] for j in JOBS.values()] == ["0 4 * * *", "0 5 * * 0", "@weekly"]
    [nova], [cinder], [glance] = (containers(cron_jobs[j]) for j in JOBS.values())
    assert {"name": "AGE_IN_DAYS", "value": "90"} in nova["env"]
    assert cinder["args"][-1] == "7"
    assert glance["args"][-3] == "1"


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_housekeeping_can_be_turned_off(stack: str) -> None:
    plan = plan_of(stack, housekeeping={"enabled": False})
    assert not set(JOBS.values()) & set(objects(plan, "CronJob"))
    assert "nova_archive_deleted_rows.sh" not in plan.by_name("nova-bin", "ConfigMap").inputs["data"]
