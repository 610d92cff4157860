"""`--against`: a change of `release` is an ordered upgrade (`upgrade.from`), or the plan is refused."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import plan_of, release_plan
from tools import release_change
from tools.plan import main as plan_main
from tools.runtime import REPO


def test_a_release_change_without_upgrade_from_is_refused_naming_both_keys_and_the_deployed_release() -> None:
    said = release_change.problem("2025.2", plan_of("dev").settings, "build/dev")
    assert said is not None
    assert (
        "release changes from 2025.2" in said and "without upgrade.from" in said and "upgrade: {from: '2025.2'}" in said
    )


def test_the_ordered_upgrade_and_an_unchanged_release_pass() -> None:
    assert release_change.problem("2025.2", plan_of("dev", upgrade={"from": "2025.2"}).settings, "x") is None
    assert release_change.problem("2026.1", plan_of("dev").settings, "x") is None
    assert release_change.problem(None, plan_of("dev").settings, "x") is None  # an older plan.json without it


@pytest.mark.parametrize(
    ("deployed", "fragment"),
    [
        ("2024.2", "no supported upgrade: 2026.1 upgrades from 2025.2, 2025.1"),  # a skip the projects refuse
        ("2025.1", "without upgrade.from"),  # SLURP to SLURP is supported, and still an upgrade
    ],
)
def test_a_jump_is_judged_by_the_projects_release_cadence(deployed: str, fragment: str) -> None:
    said = release_change.problem(deployed, plan_of("dev").settings, "x")
    assert said is not None and fragment in said


def test_upgrade_from_must_name_the_release_deployed() -> None:
    settings = plan_of("dev", upgrade={"from": "2025.1"}).settings
    assert release_change.problem("2025.2", settings, "x") == (
        "upgrade.from is 2025.1, but the plan in x deployed 2025.2: set upgrade.from to 2025.2"
    )


def test_going_back_a_release_is_the_rollback_not_a_plan_to_compare() -> None:
    said = release_change.problem("2026.1", release_plan("dev", "2025.2").settings, "x")
    assert said is not None and "rollback" in said


def test_the_plan_tool_exits_2_on_a_release_change_against_an_earlier_plan(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    earlier_file = tmp_path / "Pulumi.dev.yaml"
    text = (REPO / "stacks" / "Pulumi.dev.yaml").read_text()
    assert 'openstack:release: "2026.1"' in text
    earlier_file.write_text(text.replace('openstack:release: "2026.1"', 'openstack:release: "2025.2"'))
    assert plan_main(["--stack", "dev", "--stack-file", str(earlier_file), "--out", str(tmp_path / "earlier")]) == 0
    capsys.readouterr()
    assert plan_main(["--stack", "dev", "--out", str(tmp_path / "now"), "--against", str(tmp_path / "earlier")]) == 2
    error = capsys.readouterr().err
    assert "release changes from 2025.2" in error and "upgrade.from" in error
    assert not (tmp_path / "now" / "plan.json").exists()  # refused before anything is written
