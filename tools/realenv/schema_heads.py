"""Each database's schema heads as a release's code declares them: what its `alembic_version` holds once
that release's db-sync completed. The rollback proof (tools/cloud/rollback_check.py) reads a restored
dump against them; tests/real/test_bootstrap_chain.py checks them against what db-sync leaves.

The heads come from the release's venv, with the projects' own Alembic script directories
(`alembic.script.ScriptDirectory.get_heads`), each project in a process of its own (two projects'
migration modules register the same oslo.config options). Neutron keeps its branches' heads in its
migration tree (`versions/EXPAND_HEAD`, `versions/CONTRACT_HEAD`, which `neutron-db-manage
check_migration` holds to the tree), and its `alembic_version` holds both.
"""

from __future__ import annotations

import json
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

# Database → (Python package, its Alembic script directory within it).
ALEMBIC = {
    "keystone": ("keystone", "common/sql/migrations"),
    "glance": ("glance", "db/sqlalchemy/alembic_migrations"),
    "placement": ("placement", "db/sqlalchemy/alembic"),
    "nova_api": ("nova", "db/api/migrations"),
    "nova": ("nova", "db/main/migrations"),
    "nova_cell0": ("nova", "db/main/migrations"),
    "cinder": ("cinder", "db/migrations"),
}
NEUTRON = ("neutron", "db/migration/alembic_migrations/versions", ("EXPAND_HEAD", "CONTRACT_HEAD"))

_HEADS = """
import importlib.util, json, os, sys, warnings
warnings.simplefilter("ignore")
package, directory = sys.argv[1:3]
where = os.path.join(os.path.dirname(importlib.util.find_spec(package).origin), directory)
if len(sys.argv) > 3:
    print(json.dumps(sorted(open(os.path.join(where, name)).read().strip() for name in sys.argv[3:])))
else:
    from alembic.script import ScriptDirectory
    print(json.dumps(sorted(ScriptDirectory(where).get_heads())))
"""


def _heads(python: Path, package: str, directory: str, files: tuple[str, ...] = ()) -> list[str]:
    done = subprocess.run([str(python), "-c", _HEADS, package, directory, *files], capture_output=True, text=True,
                          timeout=300)  # fmt: skip
    if done.returncode != 0:
        raise RuntimeError(f"the heads of {package} ({directory}) in {python}: {done.stderr.strip()[-1500:]}")
    return list(json.loads(done.stdout))


def schema_heads(venv: Path, databases: tuple[str, ...] | None = None) -> dict[str, list[str]]:
    """Database → its schema heads in the release whose venv is `venv` (sorted), for `databases` (all known)."""
    wanted = databases or (*ALEMBIC, "neutron")
    unknown = set(wanted) - {*ALEMBIC, "neutron"}
    if unknown:
        raise KeyError(f"no schema heads known for {sorted(unknown)}")
    python = venv / "bin" / "python"
    sources = {db: ALEMBIC[db] for db in wanted if db in ALEMBIC}
    with ThreadPoolExecutor(max_workers=4) as pool:
        # One process per script directory (nova's main one serves nova and nova_cell0).
        directories = sorted(set(sources.values()))
        found = dict(zip(directories, pool.map(lambda d: _heads(python, *d), directories), strict=True))
        heads = {db: found[source] for db, source in sources.items()}
        if "neutron" in wanted:
            heads["neutron"] = _heads(python, *NEUTRON)
    return heads
