"""What guards the host is not a stack file's to lower: `policyEnforcement` moves only the
hygiene rules, the generated config holds every other rule at the pack's own level, and a
config lowered by hand is refused by the pack's loader (tools/plan, tools/policycheck) and
differs from the generated one (which CI and the deploy check)."""

from __future__ import annotations

from pathlib import Path

import pytest

from components.cloud.stack_config import parse_settings
from components.settings.model import SettingsError
from policies.registry import RULES
from policies.report import validate_config
from policies.settings import ConfigError
from tools import plan as plan_tool
from tools import runtime
from tools.policy_config import policy_config

HYGIENE = ("resource-requests-limits", "readiness-probes", "image-pinned", "third-party-chart-hygiene")
GUARDS = tuple(rule.name for rule in RULES if rule.name not in HYGIENE)


def test_the_guarding_rules_are_the_host_and_cloud_rules() -> None:
    """Not a vacuous list: the rules that guard the host are among those a stack may not move."""
    assert {"privileged-containers", "host-namespaces", "host-ports", "host-path-volumes", "added-capabilities",
            "pod-security-baseline", "unknown-pod-kinds", "agents-on-their-nodes"} <= set(GUARDS)  # fmt: skip
    assert {rule.name for rule in RULES if rule.hygiene} == set(HYGIENE)


@pytest.mark.parametrize("rule", GUARDS)
@pytest.mark.parametrize("level", ["advisory", "disabled"])
def test_a_stack_file_cannot_lower_a_rule_that_guards_the_host(rule: str, level: str) -> None:
    with pytest.raises(SettingsError) as caught:
        parse_settings({"policyEnforcement": {rule: level}})
    [problem] = [p for p in caught.value.problems if p.startswith(f"openstack:policyEnforcement.{rule}: ")]
    assert "policies/registry.py" in problem and "image-pinned" in problem  # where it is set, and what may move


@pytest.mark.parametrize("rule", HYGIENE)
def test_the_hygiene_rules_still_move(rule: str) -> None:
    config = policy_config(parse_settings({"policyEnforcement": {rule: "disabled"}}))
    assert config[rule]["enforcementLevel"] == "disabled"
    assert all(config[other]["enforcementLevel"] == "mandatory" for other in GUARDS)


def test_a_stack_that_lowers_a_guard_does_not_plan(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    path = tmp_path / "Pulumi.dev.yaml"
    path.write_text("config:\n  openstack:policyEnforcement:\n    privileged-containers: advisory\n")
    monkeypatch.setattr(runtime, "stack_file", lambda stack: path)
    assert plan_tool.main(["--stack", "dev", "--out", str(tmp_path / "out")]) == 2
    assert "openstack:policyEnforcement.privileged-containers" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    "config",
    [
        {"host-ports": "advisory"},
        {"host-ports": {"enforcementLevel": "disabled"}},
        {"unknown-pod-kinds": "remediate"},
        {"all": "advisory"},
        {"all": {"enforcementLevel": "disabled"}},
    ],
)
def test_a_config_lowered_by_hand_is_refused(config: dict) -> None:
    with pytest.raises(ConfigError, match=r"fixed in policies/registry\.py"):
        validate_config(config, "hand.json")


def test_a_config_at_the_packs_levels_is_accepted() -> None:
    validate_config({"host-ports": "mandatory", "all": "mandatory", "image-pinned": "advisory"}, "ok.json")
