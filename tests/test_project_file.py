"""Pulumi.yaml as the Pulumi CLI reads it: every key a stack may leave out has a default.

The CLI refuses a stack that lacks a project key declared without `default` or `value`, naming
every such key ("Stack 'dev' is missing configuration values 'backup', ..."), before the
program runs (pulumi pkg/workspace/config.go, mergeConfig; its tests in
pkg/workspace/config_project_test.go). Otherwise it hands the program the default: a scalar as
text, anything else as JSON. `tools.runtime.with_project_defaults` is that merge, read from
Pulumi's source and checked here against the CLI's own wording; the offline plan and every
test that reads a stack file go through it.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from components.cloud.stack_config import settings_from_config
from components.settings.model import Settings, SettingsError
from tools import project_file
from tools.runtime import PROJECT_FILE, read_stack_file, stack_file, with_project_defaults

STACKS = ("dev", "staging", "prod")


def test_the_committed_project_file_is_what_the_model_writes(tmp_path: Path) -> None:
    """What CI checks: Pulumi.yaml is `python -m tools.project_file --write`'s output."""
    assert project_file.main(["--check"]) == 0
    stale = tmp_path / "Pulumi.yaml"
    stale.write_text(PROJECT_FILE.read_text().replace("default: {}", "", 1))
    assert project_file.main(["--check", "--file", str(stale)]) == 1
    assert project_file.main(["--write", "--file", str(stale)]) == 0
    assert stale.read_text() == PROJECT_FILE.read_text()


def test_every_project_key_has_a_default_so_no_stack_must_set_it() -> None:
    declared = yaml.safe_load(PROJECT_FILE.read_text())["config"]
    assert set(declared) == {field.alias or name for name, field in Settings.model_fields.items()}
    without = sorted(key for key, entry in declared.items() if "default" not in entry and "value" not in entry)
    assert without == []
    # An empty stack is then the model's defaults, as the program receives them.
    merged = with_project_defaults("empty", {})
    assert set(merged) == {f"openstack:{key}" for key in declared}
    assert settings_from_config(merged) == Settings()


@pytest.mark.parametrize("stack", STACKS)
def test_each_stack_file_passes_the_clis_config_merge(stack: str) -> None:
    given = read_stack_file(stack_file(stack))
    merged = with_project_defaults(stack, given)
    assert set(given) < set(merged)  # every stack leaves some key to its default
    # The defaults change nothing: the settings are what the stack file alone gives.
    assert settings_from_config(merged) == settings_from_config(given)


def test_a_key_declared_without_default_stops_every_stack_as_the_cli_does(tmp_path: Path) -> None:
    project = yaml.safe_load(PROJECT_FILE.read_text())
    for key in ("backup", "upgrade"):
        del project["config"][key]["default"]
    mutated = tmp_path / "Pulumi.yaml"
    mutated.write_text(yaml.safe_dump(project))
    for stack in STACKS:
        with pytest.raises(SettingsError) as error:
            with_project_defaults(stack, read_stack_file(stack_file(stack)), mutated)
        # formatMissingKeys' wording: sorted, quoted, "and" before the last.
        assert f"Stack '{stack}' is missing configuration values 'backup' and 'upgrade'" in str(error.value)


def test_a_shorthand_declaration_is_a_default(tmp_path: Path) -> None:
    """`key: value` under config declares the key with that default (RewriteShorthandConfigValues)."""
    short = tmp_path / "Pulumi.yaml"
    short.write_text("name: openstack\nruntime: python\nconfig:\n  region: RegionTwo\n  ha: true\n")
    assert with_project_defaults("s", {}, short) == {"openstack:region": "RegionTwo", "openstack:ha": "true"}
    assert with_project_defaults("s", {"openstack:region": "R3"}, short)["openstack:region"] == "R3"


@pytest.mark.parametrize("section", ["gateway", "ceph", "upgrade"])
def test_an_optional_section_at_its_default_is_unset(section: str) -> None:
    """The CLI hands an unset object key its default `{}`: an optional section reads it as unset."""
    settings = settings_from_config({f"openstack:{section}": "{}"})
    assert getattr(settings, section) is None
    assert settings == Settings()


def test_every_setting_has_a_description() -> None:
    missing = [name for name, field in Settings.model_fields.items() if not field.description]
    assert missing == []
