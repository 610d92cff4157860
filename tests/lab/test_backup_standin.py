"""mariadb-operator's Backup, played by the lab (tests/lab/cloud/backup_standin.py), and the waitFor that awaits it.

The plan's own objects: prod's MariaDB and the one-time Backup its upgrade takes
(components/infrastructure/mariadb_backup.py).
What the Job's commands do against a real server is tests/real/test_backup_standin.py's.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from tests.conftest import plan_of
from tests.lab.cloud import awaits
from tests.lab.cloud.backup_standin import BackupNotPlayedError, backup_job, one_time, status
from tests.lab.cloud.deploy import Workload

PLAN = plan_of("prod", upgrade={"from": "2025.2"})
BACKUP = PLAN.by_name("mariadb-backup-before-2026-1", "Backup").revealed
MARIADB = PLAN.by_name("mariadb", "MariaDB").revealed
WAIT_FOR = BACKUP["metadata"]["annotations"][awaits.WAIT_FOR]


def _script(container: dict[str, Any]) -> str:
    assert container["command"][:2] == ["bash", "-c"]
    return str(container["command"][2])


def test_only_a_backup_without_schedule_is_a_job_of_its_own() -> None:
    assert one_time(BACKUP)
    assert not one_time(PLAN.by_name("mariadb-backup", "Backup").revealed)  # the scheduled one: a CronJob's


def test_the_job_dumps_every_database_as_the_operator_does_under_galera() -> None:
    job = backup_job(BACKUP, MARIADB, "cluster.local")
    spec = job.template["spec"]
    (dump,) = spec["initContainers"]
    (operator,) = spec["containers"]
    script = _script(dump)
    # pkg/command/backup.go: the target file first, then the dump into it; Galera's two options.
    assert 'printf "${BACKUP_FILE}" > /backup/0-backup-target.txt' in script
    assert "export BACKUP_FILE=/backup/backup.$(date -u +'%Y-%m-%dT%H:%M:%SZ').sql.gz" in script
    command = script.splitlines()[-1]
    assert command.startswith("mariadb-dump --user=${MARIADB_OPERATOR_USER} --password=${MARIADB_OPERATOR_PASSWORD}")
    assert "--host=mariadb-primary.openstack.svc.cluster.local --port=3306" in command  # Galera: the primary
    for option in ("--single-transaction", "--events", "--routines", "--all-databases", "--skip-add-locks",
                   "--ignore-table=mysql.global_priv"):  # fmt: skip
        assert f" {option}" in command, option
    assert command.endswith("> $(cat '/backup/0-backup-target.txt')")
    # The operator's step: the file compressed in place, under the name the dump gave it.
    assert 'gzip -c "$file" > "$file.compressed"' in _script(operator)
    # As root of the MariaDB, into the Backup's claim, placed and labelled as the Backup says.
    env = {e["name"]: e for e in dump["env"]}
    assert env["MARIADB_OPERATOR_USER"]["value"] == "root"
    assert env["MARIADB_OPERATOR_PASSWORD"]["valueFrom"]["secretKeyRef"] == {"name": "mariadb-root", "key": "password"}
    assert spec["volumes"] == [{"name": "backup", "persistentVolumeClaim": {"claimName": "mariadb-backup"}}]
    assert job.storage_claim == "mariadb-backup"
    assert spec["nodeSelector"] == BACKUP["spec"]["nodeSelector"]
    assert job.template["metadata"]["labels"] == BACKUP["spec"]["podMetadata"]["labels"]
    assert spec["restartPolicy"] == "OnFailure" and job.job_spec == {"backoffLimit": 5}  # the operator's defaults


def test_without_galera_the_dump_reads_the_servers_own_service_and_takes_locks() -> None:
    single = {**MARIADB, "spec": {**MARIADB["spec"], "galera": {"enabled": False}}}
    command = _script(backup_job(BACKUP, single, "example.org").template["spec"]["initContainers"][0]).splitlines()[-1]
    assert "--host=mariadb.openstack.svc.example.org" in command
    assert "--skip-add-locks" not in command and "--ignore-table" not in command


@pytest.mark.parametrize(
    ("backup", "mariadb", "says"),
    [
        ({**BACKUP, "spec": {**BACKUP["spec"], "storage": {"s3": {"bucket": "b"}}}}, MARIADB, "a claim's only"),
        (BACKUP, {**MARIADB, "spec": {**MARIADB["spec"], "tls": {"enabled": True}}}, "speaks TLS"),
    ],
)
def test_what_the_stand_in_does_not_play_it_refuses_by_name(backup: Any, mariadb: Any, says: str) -> None:
    with pytest.raises(BackupNotPlayedError, match=says):
        backup_job(backup, mariadb)


@pytest.mark.parametrize(("phase", "met"), [(None, False), ("Running", False), ("Complete", True), ("Failed", False)])
def test_the_plans_wait_for_is_met_once_the_job_completed_not_when_it_failed(phase: str | None, met: bool) -> None:
    # pkg/condition/complete.go: a failed Job also makes Complete True, with reason JobFailed.
    assert awaits.wait_for_met(WAIT_FOR, {"status": status(phase)}) is met
    assert awaits.wait_for_met("condition=Complete", {"status": status(phase)}) is (phase in ("Complete", "Failed"))


def test_jsonpath_reads_keys_indexes_and_filters() -> None:
    document = {"status": {"conditions": [{"type": "Ready", "status": "False"}, {"type": "Complete", "reason": "X"}]}}
    assert awaits.jsonpath(document, "{.status.conditions[?(@.type=='Complete')].reason}") == ["X"]
    assert awaits.jsonpath(document, "{.status.conditions[0].type}") == ["Ready"]
    assert awaits.jsonpath(document, "{.status.missing}") == []
    assert awaits.wait_for_met("jsonpath={.status.conditions[1].reason}", document)
    with pytest.raises(ValueError, match="not a form the lab reads"):
        awaits.jsonpath(document, "{.status..type}")


def _backup_workload(phase: str) -> Workload:
    job = backup_job(BACKUP, MARIADB)
    workload = Workload("Backup", job.name, "urn", job.template, 1, stand_in=True, job_status=status,
                        wait_for=WAIT_FOR)  # fmt: skip
    workload.started = True
    workload.job = SimpleNamespace(phase=phase, failure="BackoffLimitExceeded")  # type: ignore[assignment]
    return workload


def test_a_backup_is_done_when_its_status_meets_the_wait_for_and_a_failed_one_says_what_pulumi_would_do() -> None:
    assert not _backup_workload("Running").done
    assert _backup_workload("Complete").done and not _backup_workload("Complete").failed
    failed = _backup_workload("Failed")
    assert not failed.done
    assert "JobFailed" in failed.failed and "until its timeout" in failed.failed
