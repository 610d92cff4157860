"""Stack files read by the real Pulumi CLI, against the offline plan's reading of them.

The CLI is pulumi 3.274.1 built from its Go module (tests/engine/build_go_tools.sh). For every stack
file, the configuration it hands the program (`pulumi config --json --show-secrets`: Pulumi.yaml's
defaults merged in, scalars as go-yaml decodes them, secrets decrypted) must be what the offline plan
reads (tools/runtime.stack_config), key for key, secret for secret. And a project or stack file the
CLI refuses stops `pulumi preview` before the program runs, with the message the offline plan gives.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from components.settings.model import SettingsError
from tests.engine.tools import engine_env, pulumi
from tools.runtime import REPO, read_stack_file, with_project_defaults
from tools.stack_secrets import SecretText

pytestmark = pytest.mark.real

PASSPHRASE = "correct horse battery staple"  # the secret fixture's (tests/test_stack_secrets.py)
SECRET_FIXTURE = REPO / "tests" / "fixtures" / "stacks" / "Pulumi.secret.yaml"


class Cli:
    def __init__(self, root: Path):
        self.project = root / "project"
        self.env = engine_env(root / "home", root / "no-kubeconfig", PASSPHRASE)
        (root / "state").mkdir()
        self.project.mkdir()
        shutil.copy(REPO / "Pulumi.yaml", self.project)
        shutil.copytree(REPO / "stacks", self.project / "stacks")
        shutil.copy(SECRET_FIXTURE, self.project / "stacks")
        self.run("login", f"file://{root / 'state'}")

    def run(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        return pulumi(self.project, self.env, *args, check=check)


@pytest.fixture(scope="module")
def cli(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cli]:
    yield Cli(tmp_path_factory.mktemp("cli"))


@pytest.mark.parametrize("stack", ["dev", "staging", "prod", "secret"])
def test_the_cli_hands_the_program_what_the_offline_plan_reads(
    cli: Cli, stack: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    cli.run("stack", "init", stack)
    shown = json.loads(cli.run("config", "--json", "--show-secrets", "--stack", stack).stdout)
    monkeypatch.setenv("PULUMI_CONFIG_PASSPHRASE", PASSPHRASE)
    # The file as the CLI left it (`stack init` adds the encryption salt of a passphrase stack).
    path = cli.project / "stacks" / f"Pulumi.{stack}.yaml"
    offline = with_project_defaults(stack, read_stack_file(path))
    assert set(offline) == set(shown)
    for key, entry in shown.items():
        ours = offline[key]
        if "objectValue" in entry:
            assert json.loads(ours) == entry["objectValue"], key
        else:
            assert ours == entry["value"], key
        assert isinstance(ours, SecretText) is entry["secret"], key
    if stack == "secret":
        assert shown["openstack:region"] == {"value": "RegionSecret", "secret": True}


def _preview_error(cli: Cli, stack: str) -> str:
    done = cli.run("preview", "--stack", stack, check=False)
    assert done.returncode != 0
    return done.stdout + done.stderr


def test_a_key_declared_without_default_stops_the_clis_preview_as_the_plan_says(cli: Cli) -> None:
    project = yaml.safe_load((REPO / "Pulumi.yaml").read_text())
    for key in ("backup", "upgrade"):
        del project["config"][key]["default"]
    (cli.project / "Pulumi.yaml").write_text(yaml.safe_dump(project))
    try:
        cli.run("stack", "select", "--create", "dev")
        said = "Stack 'dev' is missing configuration values 'backup' and 'upgrade'"
        assert said in _preview_error(cli, "dev")
        with pytest.raises(SettingsError, match=said):
            with_project_defaults(
                "dev", read_stack_file(REPO / "stacks" / "Pulumi.dev.yaml"), cli.project / "Pulumi.yaml"
            )
    finally:
        shutil.copy(REPO / "Pulumi.yaml", cli.project)


def test_a_value_of_another_type_stops_the_clis_preview_as_the_plan_says(cli: Cli) -> None:
    stack_file = cli.project / "stacks" / "Pulumi.wrongtype.yaml"
    stack_file.write_text("config:\n  openstack:ha: yes\n")
    cli.run("stack", "init", "wrongtype")
    said = "Stack 'wrongtype' with configuration key 'ha' must be of type 'boolean'"
    assert said in _preview_error(cli, "wrongtype")
    with pytest.raises(SettingsError, match=said):
        with_project_defaults("wrongtype", read_stack_file(stack_file))
