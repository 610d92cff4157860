"""The rollback of an upgrade, proven on its dump: restored into a scratch MariaDB, it holds the old release's schemas.

README, "Upgrading to a new release": a rollback is the restore of the dump taken before the first
migration, with the previous release deployed again. Restoring into the live cloud would end the
run, so the dump that the Backup stand-in took in the lab (tests/lab/cloud/backup_standin.py) is
restored into a MariaDB of its own on this machine's loopback (tests/lab/realenv/servers.py, Debian's
10.11 as the stand-in server), as mariadb-operator's Restore restores a logical backup
(pkg/command/backup.go MariadbRestore: `mariadb <connection> < <the dump>`, after the operator's
binary decompressed it). Then each database's `alembic_version` is read and set against the schema
heads of both releases' code (tests/lab/realenv/schema_heads.py): the restored databases must hold the
previous release's, and the live ones, after the upgrade, the new release's. Where a release adds
no migration to a project the two heads are the same and the version tells nothing; where it does
(neutron's expand branch, 2025.2 → 2026.1) the schema itself is read too: the unique constraint
that 2026.1's expand migration b1bca967e19d adds to `network_segment_ranges`.
"""

from __future__ import annotations

import gzip
import os
import shutil
import subprocess
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tests.lab.realenv.schema_heads import schema_heads
from tests.lab.realenv.servers import run_mariadb

if TYPE_CHECKING:
    from tests.lab.cloud.deploy import Cloud

# What neutron's 2026.1 expand migration b1bca967e19d adds (its name in the migration).
NEUTRON_2026_1_CONSTRAINT = ("neutron", "network_segment_ranges", "uniq_network_segment_ranges")
MARKERS = {"2026.1": NEUTRON_2026_1_CONSTRAINT}


def _queries(databases: list[str], constraint: tuple[str, str, str]) -> str:
    """One line per database (`name<TAB>versions`), then the constraint's count."""
    concat = "GROUP_CONCAT(version_num ORDER BY version_num)"
    versions = [f"SELECT '{db}', IFNULL((SELECT {concat} FROM `{db}`.alembic_version), '')" for db in databases]
    schema, table, name = constraint
    count = (f"SELECT 'constraint', COUNT(*) FROM information_schema.TABLE_CONSTRAINTS WHERE TABLE_SCHEMA='{schema}' "
             f"AND TABLE_NAME='{table}' AND CONSTRAINT_NAME='{name}'")  # fmt: skip
    return ";\n".join([*versions, count]) + ";"


def _parse(output: str) -> tuple[dict[str, list[str]], int | None]:
    versions: dict[str, list[str]] = {}
    constraint = None
    for line in output.splitlines():
        name, _, value = line.partition("\t")
        if name == "constraint":
            constraint = int(value)
        elif name:
            versions[name] = sorted(v for v in value.split(",") if v)
    return versions, constraint


def restored_schemas(dump: Path, databases: list[str], constraint: tuple[str, str, str], work: Path) -> dict[str, Any]:
    with run_mariadb(work / "scratch") as server:
        login = ["mariadb", "--no-defaults", "--protocol=tcp", f"--host={server.host}", f"--port={server.port}",
                 "--user=root"]  # fmt: skip
        env = dict(os.environ, MYSQL_PWD=server.password or "")
        # The operator's binary decompresses the dump, then `mariadb` reads it (a dump of this cloud is megabytes).
        text = gzip.decompress(dump.read_bytes()) if dump.name.endswith(".gz") else dump.read_bytes()
        restored = subprocess.run(login, input=text, capture_output=True, env=env, timeout=900)
        if restored.returncode != 0:
            return {"restored": False, "error": restored.stderr.decode(errors="replace")[-1500:]}
        read = subprocess.run([*login, "--batch", "--skip-column-names", "-e", _queries(databases, constraint)],
                              capture_output=True, text=True, env=env, timeout=120)  # fmt: skip
        if read.returncode != 0:
            return {"restored": True, "error": read.stderr[-1500:]}
        versions, count = _parse(read.stdout)
        return {"restored": True, "versions": versions, "constraint": count}


def _live(cloud: Cloud, databases: list[str], constraint: tuple[str, str, str]) -> dict[str, Any]:
    """The same read in the cloud's own MariaDB (the stand-in's pod), as its root."""
    # A copy: the second `pulumi up` changes the workloads meanwhile (tests/lab/cloud/upgrade_scenario.py).
    pod = next(p for w in list(cloud.workloads.values()) if w.stand_in and w.kind == "MariaDB" for p in list(w.pods))
    container = pod.container("mariadb")
    command = ["/bin/sh", "-c", 'MYSQL_PWD="$MARIADB_ROOT_PASSWORD" mariadb --protocol=tcp -h127.0.0.1 -uroot '
               '--batch --skip-column-names -e "$QUERY"']  # fmt: skip
    env = {**container.env, "QUERY": _queries(databases, constraint)}
    code, output = container.exec_command(command, timeout=120, env=env)
    if code != 0:
        return {"error": output[-1500:]}
    versions, count = _parse(output)
    return {"versions": versions, "constraint": count}


def prove(
    cloud: Cloud, dump: Path | None, venvs: Mapping[str, Path], previous: str, new: str, log: Callable[[str], None]
) -> dict[str, Any]:
    """report.json's `upgrade.rollback`: the dump restored into a scratch server, read against both releases."""
    if dump is None or not dump.exists():
        return {"ok": False, "error": "no dump of the Backup before the upgrade to restore"}
    heads = {release: schema_heads(venvs[release]) for release in (previous, new)}
    databases = sorted(heads[previous])
    constraint = MARKERS[new]  # the release the program upgrades to (components/settings/upgrade.py)
    work = Path(tempfile.mkdtemp(prefix="rollback-", dir=cloud.cluster.state))
    try:
        scratch = restored_schemas(dump, databases, constraint, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    live = _live(cloud, databases, constraint)
    restored = scratch.get("versions") or {}
    matches = {db: restored.get(db) == heads[previous][db] for db in databases}
    differ = sorted(db for db in databases if heads[previous][db] != heads[new][db])
    ok = (
        bool(scratch.get("restored")) and all(matches.values()) and scratch.get("constraint") == 0
        and live.get("constraint") == 1 and all(live.get("versions", {}).get(db) == heads[new][db] for db in databases)
    )  # fmt: skip
    log(f"rollback: dump {dump.name} restored {scratch.get('restored')}, {previous}'s schemas "
        f"{sorted(db for db, ok in matches.items() if ok)}, differing heads {differ}, ok {ok}")  # fmt: skip
    return {
        "ok": ok,
        "dump": dump.name,
        "restored_into": "a scratch MariaDB 10.11 on this machine's loopback, not the cloud's",
        "restored": scratch.get("restored", False),
        "error": scratch.get("error") or live.get("error") or "",
        "heads": heads,
        "restored_versions": restored,
        "live_versions": live.get("versions", {}),
        f"restored_is_{previous}": matches,
        "heads_differ": differ,
        "schema_marker": {
            "what": ".".join(constraint),
            "added_by": new,
            "restored": scratch.get("constraint"),
            "live": live.get("constraint"),
        },
    }
