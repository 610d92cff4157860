"""Each database's schema heads as a release's code declares them: what its `alembic_version` holds once
that release's db-sync completed. The rollback proof (tests/lab/cloud/rollback_check.py) reads a restored
dump against them; tests/real/test_bootstrap_chain.py checks them against what db-sync leaves.

Read from the release's venv, each project in a process of its own (two projects' migration modules
register the same oslo.config options), as the project itself reads them:
- Placement, Nova (its API database and its cells') and Cinder: the heads of their Alembic script
  directory (`alembic.script.ScriptDirectory.get_heads`).
- Keystone: the heads of its expand and contract branches, over the version directories of every
  release it lists (keystone/common/sql/upgrades.py `_find_alembic_conf`, `get_head_revisions`); its
  `alembic_version` holds both.
- Glance: its contract branch's head (glance/cmd/manage.py `check`: "up to date" when the contract head
  is current; a completed sync leaves that one row).
- Neutron: the heads its migration tree keeps (`versions/EXPAND_HEAD`, `versions/CONTRACT_HEAD`, which
  `neutron-db-manage check_migration` holds to the tree); its `alembic_version` holds both.
"""

from __future__ import annotations

import json
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

# Database → (how its project reads its heads, its Python package, where within it).
SOURCES: dict[str, tuple[str, str, str]] = {
    "keystone": ("keystone", "keystone", "common/sql"),
    "glance": ("glance", "glance", "db/sqlalchemy/alembic_migrations"),
    "placement": ("alembic", "placement", "db/sqlalchemy/alembic"),
    "nova_api": ("alembic", "nova", "db/api/migrations"),
    "nova": ("alembic", "nova", "db/main/migrations"),
    "nova_cell0": ("alembic", "nova", "db/main/migrations"),
    "cinder": ("alembic", "cinder", "db/migrations"),
    "neutron": ("neutron", "neutron", "db/migration/alembic_migrations/versions"),
}
ALEMBIC = tuple(SOURCES)  # the databases whose heads are known

_HEADS = """
import importlib.util, json, os, sys, warnings
warnings.simplefilter("ignore")
how, package, directory = sys.argv[1:4]
where = os.path.join(os.path.dirname(importlib.util.find_spec(package).origin), directory)
from alembic.config import Config
from alembic.script import ScriptDirectory
if how == "alembic":
    heads = ScriptDirectory(where).get_heads()
elif how == "keystone":
    from keystone.common.sql import upgrades
    config = Config(os.path.join(where, "alembic.ini"))
    paths = [upgrades.VERSIONS_PATH] + [os.path.join(upgrades.VERSIONS_PATH, release, branch)
                                        for release in upgrades.RELEASES for branch in upgrades.MIGRATION_BRANCHES]
    config.set_main_option("version_locations", os.pathsep.join(paths))
    heads = ScriptDirectory.from_config(config).get_heads()
elif how == "glance":
    script = ScriptDirectory.from_config(Config(os.path.join(where, "alembic.ini")))
    heads = [script.revision_map.get_current_head("contract")]
else:
    heads = [open(os.path.join(where, name)).read().strip() for name in ("EXPAND_HEAD", "CONTRACT_HEAD")]
print(json.dumps(sorted(heads)))
"""


def _heads(python: Path, how: str, package: str, directory: str) -> list[str]:
    done = subprocess.run([str(python), "-c", _HEADS, how, package, directory], capture_output=True, text=True,
                          timeout=300)  # fmt: skip
    if done.returncode != 0:
        raise RuntimeError(f"the heads of {package} ({directory}) in {python}: {done.stderr.strip()[-1500:]}")
    return list(json.loads(done.stdout))


def schema_heads(venv: Path, databases: tuple[str, ...] | None = None) -> dict[str, list[str]]:
    """Database → its schema heads in the release whose venv is `venv` (sorted), for `databases` (all known)."""
    wanted = databases or ALEMBIC
    unknown = set(wanted) - set(SOURCES)
    if unknown:
        raise KeyError(f"no schema heads known for {sorted(unknown)}")
    python = venv / "bin" / "python"
    sources = {db: SOURCES[db] for db in wanted}
    # One process per source (nova's main migrations serve nova and nova_cell0).
    distinct = sorted(set(sources.values()))
    with ThreadPoolExecutor(max_workers=4) as pool:
        found = dict(zip(distinct, pool.map(lambda source: _heads(python, *source), distinct), strict=True))
    return {db: found[source] for db, source in sources.items()}
