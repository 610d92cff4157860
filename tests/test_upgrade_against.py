"""`--against` on a release upgrade: the upgrade as its steps, in order, with what each touches."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

from components.cloud import upgrade
from tests.conftest import plan_of
from tools import diff_report, plan_diff
from tools import plan as plan_tool
from tools.runtime import REPO

FROM = {"from": "2025.2"}


def _stack_file(tmp_path: Path, name: str, **settings: Any) -> str:
    document = yaml.safe_load((REPO / "stacks" / "Pulumi.dev.yaml").read_text())
    document["config"] |= {f"openstack:{key}": value for key, value in settings.items()}
    path = tmp_path / f"Pulumi.dev.{name}.yaml"
    path.write_text(yaml.safe_dump(document))
    return str(path)


def test_against_shows_the_upgrade_as_its_steps(tmp_path: Path) -> None:
    before = _stack_file(tmp_path, "before", release="2025.2")
    after = _stack_file(tmp_path, "after", upgrade=FROM)
    assert plan_tool.main(["--stack", "dev", "--stack-file", before, "--out", str(tmp_path / "before")]) == 0
    args = [
        "--stack",
        "dev",
        "--stack-file",
        after,
        "--out",
        str(tmp_path / "after"),
        "--against",
        str(tmp_path / "before"),
    ]
    assert plan_tool.main(args) == 0
    result = json.loads((tmp_path / "after" / "diff.json").read_text())
    said = result["upgrade"]
    assert (said["from"], said["to"]) == ("2025.2", "2026.1")
    happens = {s["name"]: s["happens"] for s in said["steps"]}
    assert happens["keystone-upgrade-check-2026-1"] == "runs (new)"
    assert happens["mariadb-backup-before-2026-1"] == "taken (new)"
    assert happens["keystone-api"].startswith("rolls")
    assert happens["nova-db-sync"] == "re-runs"
    markdown = (tmp_path / "after" / "diff.md").read_text()
    section = markdown[markdown.index("**Upgrade 2025.2 → 2026.1, step by step**") :]
    lines = [line for line in section.splitlines()[2:] if line[:1].isdigit()]
    assert lines[0].startswith("1. preflight: Job `keystone-upgrade-check-2026-1`: reads the keystone database")
    assert "keystone-manage db_sync --check" in lines[0]
    order = [line.split("`")[1] for line in lines]
    assert order.index("mariadb-backup-before-2026-1") < order.index("keystone-db-sync")
    assert order.index("keystone-api") < order.index("keystone-db-contract-2026-1") < order.index("glance-db-sync")
    assert order[-1] == "nova-online-migrations-2026-1"
    # What the pulumi up after it rolls again, named after the numbered steps.
    [then] = [line for line in section.splitlines() if line.startswith("Then remove `upgrade.from`")]
    assert "`nova-conductor`" in then and "`nova-compute`" not in then
    upgraded = plan_of("dev", upgrade=FROM)
    assert said["then_rolls"] == list(upgrade.rolled_after(upgraded.graph.specs, upgraded.settings))


def test_against_without_an_upgrade_says_nothing_of_one() -> None:
    result = plan_diff.diff(
        plan_diff.view_of(plan_of("dev")), plan_diff.view_of(plan_of("dev", replicas={"nova-api": 2}))
    )
    assert "upgrade" not in result
    assert "step by step" not in diff_report.render(result, "x")
