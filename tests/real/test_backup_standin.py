"""The Backup stand-in's Job against a real server, and the rollback's restore of what it dumps.

tests/lab/cloud/backup_standin.py writes the commands mariadb-operator's backup Job runs (the dump into the
Backup's storage, then the operator's compression); the lab runs them in a pod. Here the same scripts
run with Debian's bash, mariadb-dump and gzip against a real MariaDB on loopback, the pod's /backup
and the Service's name replaced by a directory and the server's address (what a pod would reach), and
tests/lab/cloud/rollback_check.py restores the dump into a scratch server and reads its schemas.
"""

from __future__ import annotations

import gzip
import os
import re
import subprocess
from pathlib import Path

import pytest

from tests.conftest import plan_of
from tests.lab.cloud.backup_standin import BACKUP_DIR, backup_job
from tests.lab.cloud.rollback_check import NEUTRON_2026_1_CONSTRAINT, restored_schemas
from tests.lab.realenv.servers import MariaDB

pytestmark = pytest.mark.real

SCHEMA = """CREATE DATABASE IF NOT EXISTS neutron;
CREATE TABLE IF NOT EXISTS neutron.alembic_version (version_num VARCHAR(32) PRIMARY KEY);
REPLACE INTO neutron.alembic_version VALUES ('5c85685d616d'), ('d553edeb540f');
CREATE TABLE IF NOT EXISTS neutron.network_segment_ranges (id VARCHAR(36) PRIMARY KEY, minimum INT);
CREATE DATABASE IF NOT EXISTS keystone;
CREATE TABLE IF NOT EXISTS keystone.alembic_version (version_num VARCHAR(32) PRIMARY KEY);
REPLACE INTO keystone.alembic_version VALUES ('27e647c0fad4');
"""


def _local(script: str, backup: Path, server: MariaDB) -> str:
    """The script as this machine runs it: the pod's /backup a directory, the Service the server's address."""
    script = script.replace(f"{BACKUP_DIR}/", f"{backup}/")
    return re.sub(r"--host=\S+ --port=\d+", f"--host={server.host} --port={server.port} --protocol=tcp", script)


def test_the_backup_jobs_commands_dump_every_database_and_the_dump_restores(mariadb: MariaDB, tmp_path: Path) -> None:
    login = ["mariadb", "--no-defaults", "--protocol=tcp", f"--host={mariadb.host}", f"--port={mariadb.port}",
             "--user=root"]  # fmt: skip
    env = dict(os.environ, MYSQL_PWD=mariadb.password or "")
    subprocess.run([*login, "-e", SCHEMA], env=env, check=True, capture_output=True)
    upgrading = plan_of("prod", upgrade={"from": "2025.2"})
    job = backup_job(upgrading.by_name("mariadb-backup-before-2026-1", "Backup").revealed,
                     upgrading.by_name("mariadb", "MariaDB").revealed)  # fmt: skip
    backup = tmp_path / "claim"
    backup.mkdir()
    job_env = dict(os.environ, MARIADB_OPERATOR_USER="root", MARIADB_OPERATOR_PASSWORD=mariadb.password or "")
    # The init container, then the container, as the kubelet runs them.
    for container in [*job.template["spec"]["initContainers"], *job.template["spec"]["containers"]]:
        done = subprocess.run(["bash", "-c", _local(container["command"][2], backup, mariadb)], env=job_env,
                              capture_output=True, text=True, timeout=300)  # fmt: skip
        assert done.returncode == 0, (container["name"], done.stdout[-2000:], done.stderr[-2000:])
    [dump] = backup.glob("backup.*.sql.gz")
    assert re.fullmatch(r"backup\.\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ\.sql\.gz", dump.name), dump.name
    assert (backup / "0-backup-target.txt").read_text() == str(dump)  # where the operator's step found it
    text = gzip.decompress(dump.read_bytes()).decode()
    assert "CREATE DATABASE /*!32312 IF NOT EXISTS*/ `neutron`" in text and "`keystone`" in text  # every database
    # Galera's dump leaves out the users' table (the operator's default there): the server restored into keeps its own.
    assert "CREATE TABLE `global_priv`" not in text and "INSERT INTO `tables_priv`" in text  # mysql, less that
    found = restored_schemas(dump, ["keystone", "neutron"], NEUTRON_2026_1_CONSTRAINT, tmp_path / "restore")
    assert found == {
        "restored": True,
        "versions": {"keystone": ["27e647c0fad4"], "neutron": ["5c85685d616d", "d553edeb540f"]},
        "constraint": 0,
    }
