"""Reading a stack: its namespaces, its shape, and values exactly as the Pulumi CLI passes them."""

from __future__ import annotations

import json
from pathlib import Path

import pulumi
import pytest
import yaml

from components.cloud.stack_config import OPENSTACK_PROVIDER_KEYS, _provider_keys, settings_from_config
from components.cloud.stack_config import _structured as is_structured
from components.settings.model import Settings
from components.settings.problems import SettingsError
from tests.helpers import containers
from tools import plan as plan_tool
from tools import runtime
from tools.runtime import REPO, FakeCloudMocks, RecordingMonitor, run_program

# (stack file, the key the error must name, a fragment of what the error must say is allowed)
MISREAD: list[tuple[str, str, str]] = [
    ("config:\n  opnestack:ha: true\n", "opnestack:ha", "did you mean 'openstack:ha'?"),
    ("config:\n  openstak:region: RegionTwo\n", "openstak:region", "allowed: openstack (this program's settings)"),
    ("config:\n  aws:region: us-east-1\n", "aws:region", "unknown config namespace 'aws'"),
    ("config:\n  kubernetes:contxt: prod\n", "kubernetes:contxt", "did you mean 'kubernetes:context'?"),
    ("config:\n  kubernetes:kubeConfig: ~/.kube/config\n", "kubernetes:kubeConfig", "kubeconfig"),
    ("config:\n  random:length: 5\n", "random:length", "takes no configuration"),
    ("config:\n  region: RegionTwo\n", "region", "keys are '<namespace>:<name>'"),
    ("- openstack:ha\n", "Pulumi.dev.yaml", "a stack file is a mapping with a 'config:' mapping"),
    ("config:\n  - openstack:ha: true\n", "Pulumi.dev.yaml", "'config:' is a mapping of '<namespace>:<name>' keys"),
    ("config: openstack\n", "Pulumi.dev.yaml", "'config:' is a mapping"),
    ("config:\n  openstack:ha: [true\n", "Pulumi.dev.yaml", "not valid YAML"),
]


def _plan_file(text: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> int:
    """`python -m tools.plan --stack dev` on a stack file with this text."""
    path = tmp_path / "Pulumi.dev.yaml"
    path.write_text(text)
    monkeypatch.setattr(runtime, "stack_file", lambda stack: path)
    return plan_tool.main(["--stack", "dev", "--out", str(tmp_path / "out")])


@pytest.mark.parametrize(("text", "key", "allowed"), MISREAD, ids=[m[1] + "-" + m[2][:16] for m in MISREAD])
def test_misread_stacks_name_the_key_and_what_is_allowed(
    text: str, key: str, allowed: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    assert _plan_file(text, tmp_path, monkeypatch) == 2
    err = capsys.readouterr().err
    [line] = [line for line in err.splitlines() if line.lstrip(" -").startswith(key) or f"/{key}:" in line]
    assert allowed in line
    assert not (tmp_path / "out").exists()


# (a line of the dev stack file, setting, the value the program must see): scalars arrive as the
# CLI passes them, as text, and the model decides what they mean.
AS_WRITTEN: list[tuple[str, str, str]] = [
    ('openstack:region: "2024"', "region", "2024"),
    ("openstack:region: 2024", "region", "2024"),
    ('openstack:region: "true"', "region", "true"),
    ('openstack:region: "007"', "region", "007"),
    ('openstack:kubernetesVersion: "1.30"', "kubernetesVersion", "1.30"),
]

# Plain scalars as pulumi 3.274.1 hands them to a program, read off `pulumi config --json` of a stack
# file with these lines (the CLI built from its Go module: tests/engine/build_go_tools.sh): go-yaml v3
# decodes them into numbers, bools, times and null first. So an unquoted `1.30` is '1.3'.
SEEN_FROM_THE_CLI: dict[str, str] = {
    "1.30": "1.3", "True": "true", "0x10": "16", "1e3": "1000", "null": "", "~": "", "yes": "yes",
    "2001-12-14": "2001-12-14 00:00:00 +0000 UTC", "2001-1-2": "2001-01-02 00:00:00 +0000 UTC",
    "010": "8", "08": "8", "1_000": "1000", "-0b101": "-5", "0o17": "15", "+5": "5", ".5": "0.5",
    "1e21": "1e+21", "1e-7": "1e-7", "0.000001": "0.000001", "3.0": "3", "12:30": "12:30",
}  # fmt: skip


def test_plain_scalars_reach_the_program_as_the_cli_passes_them(tmp_path: Path) -> None:
    path = tmp_path / "Pulumi.s.yaml"
    lines = [f"  openstack:k{i}: {written}" for i, written in enumerate(SEEN_FROM_THE_CLI)]
    path.write_text("config:\n" + "\n".join(lines) + "\n")
    wire = runtime.read_stack_file(path)
    assert [wire[f"openstack:k{i}"] for i in range(len(SEEN_FROM_THE_CLI))] == list(SEEN_FROM_THE_CLI.values())


@pytest.mark.parametrize("word", ["yes", "on", "1", "y"])
def test_a_boolean_setting_of_another_word_is_refused_as_the_cli_refuses_it(
    word: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    """The CLI checks a value against Pulumi.yaml's type: `ha: yes` is the text "yes", no boolean
    ("Stack 'dev' with configuration key 'ha' must be of type 'boolean'", pulumi 3.274.1)."""
    assert _plan_file(_dev_with(f"openstack:ha: {word}"), tmp_path, monkeypatch) == 2
    assert "Stack 'dev' with configuration key 'ha' must be of type 'boolean'" in capsys.readouterr().err


def test_a_merge_key_under_config_is_merged_as_the_cli_merges_it(tmp_path: Path) -> None:
    path = tmp_path / "Pulumi.s.yaml"
    path.write_text(
        "base: &base {openstack:region: RegionTwo, openstack:ha: true}\n"
        "more: &more {openstack:region: RegionThree, openstack:namespace: cloud}\n"
        "config:\n  <<: [*base, *more]\n  openstack:ha: false\n"
    )
    wire = runtime.read_stack_file(path)
    # go-yaml: the first listed map wins over later ones, the keys written here over both.
    assert wire == {"openstack:region": "RegionTwo", "openstack:ha": "false", "openstack:namespace": "cloud"}


DEV = (REPO / "stacks" / "Pulumi.dev.yaml").read_text()


def _dev_with(line: str) -> str:
    """The dev stack file with one setting written differently."""
    key = line.split(":")[1]
    lines = [f"  {line}" if entry.startswith(f"  openstack:{key}:") else entry for entry in DEV.splitlines()]
    assert f"  {line}" in lines
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize(("line", "setting", "expected"), AS_WRITTEN, ids=[m[0] for m in AS_WRITTEN])
def test_scalars_reach_the_model_as_written(
    line: str, setting: str, expected: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert _plan_file(_dev_with(line), tmp_path, monkeypatch) == 0
    document = json.loads((tmp_path / "out" / "plan.json").read_text())
    assert document["settings"][setting] == expected


def test_a_quoted_number_reaches_the_program_as_text() -> None:
    """Under the Pulumi CLI every scalar arrives as text: '2024' is a region, not a number."""
    registrations = run_program({"openstack:region": "2024"})
    [bootstrap] = [r for r in registrations if r.kind == "Job" and r.k8s_name == "keystone-bootstrap"]
    env = {e["name"]: e.get("value") for c in containers(bootstrap) for e in c["env"]}
    assert env["OS_BOOTSTRAP_REGION_ID"] == "2024"


def test_secret_values_are_not_shown_in_problems() -> None:
    monitor = RecordingMonitor(FakeCloudMocks())
    config = {"openstack:region": "not a region s3cret", "opnestack:password": "hunter2"}
    with pytest.raises(pulumi.RunError) as caught:
        run_program(config, monitor=monitor, secret_keys=list(config))
    message = str(caught.value)
    assert "openstack:region" in message and "opnestack:password" in message
    assert "s3cret" not in message and "hunter2" not in message and "[secret]" in message
    assert monitor.registrations == []


def test_every_problem_of_a_stack_is_reported_at_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    text = "config:\n  opnestack:ha: true\n  kubernetes:contxt: x\n  openstack:namespace: Bad\n"
    assert _plan_file(text, tmp_path, monkeypatch) == 2
    err = capsys.readouterr().err
    for key in ("opnestack:ha", "kubernetes:contxt", "openstack:namespace"):
        assert f"- {key}:" in err


def test_the_providers_keys_are_allowed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    extra = "  kubernetes:context: prod\n  kubernetes:kubeconfig: /k\n  pulumi:disable-default-providers: []\n"
    assert _plan_file(DEV + extra, tmp_path, monkeypatch) == 0


def test_the_plan_reads_a_stack_file_from_elsewhere(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    path = tmp_path / "mine.yaml"
    path.write_text("config:\n  openstack:hypervisorIsolation: seven\n")
    out = tmp_path / "out"
    assert plan_tool.main(["--stack", "dev", "--stack-file", str(path), "--out", str(out)]) == 2
    assert "openstack:hypervisorIsolation" in capsys.readouterr().err


def test_project_file_types_exactly_the_scalar_settings() -> None:
    """The CLI checks a typed key's value against its type; objects stay untyped (tools/project_file.py)."""
    declared = yaml.safe_load((REPO / "Pulumi.yaml").read_text())["config"]
    for name, info in Settings.model_fields.items():
        key = info.alias or name
        default = Settings().model_dump(by_alias=True, mode="json")[key]
        # An object unset by default (ceph, gateway) dumps as null: its annotation says what it is when given.
        structured = json.dumps(default).startswith(("{", "[")) or (default is None and is_structured(key))
        assert ("type" in declared[key]) is not structured, key
        assert structured is (declared[key]["default"] == {}), key


def test_stacks_read_as_the_cli_reads_them() -> None:
    for stack in ("dev", "staging", "prod"):
        config = runtime.stack_config(stack)
        assert all(isinstance(v, str) for v in config.values())
        assert json.loads(config["openstack:compute"])["nodeGroups"]


# Stack files read as the Pulumi CLI reads them (go-yaml v3, tools/yaml_reading.py).
DUPLICATED: list[tuple[str, str]] = [
    ("config:\n  openstack:ha: true\n  openstack:ha: false\n", 'duplicate key "openstack:ha"'),
    ("config:\n  openstack:compute:\n    vmSafe: true\n    vmSafe: false\n", 'duplicate key "vmSafe"'),
    ("config:\n  openstack:namespace: a\nconfig:\n  openstack:namespace: b\n", 'duplicate key "config"'),
]


@pytest.mark.parametrize(("text", "says"), DUPLICATED, ids=["top", "nested", "config"])
def test_a_key_written_twice_is_refused(
    text: str, says: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    assert _plan_file(text, tmp_path, monkeypatch) == 2
    err = capsys.readouterr().err
    assert says in err and "Pulumi.dev.yaml" in err and "Traceback" not in err


def test_yes_is_text_in_a_structured_setting_as_the_cli_passes_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """go-yaml v3 reads `yes` as the string "yes" (YAML 1.2): a valid label value, not a boolean."""
    text = DEV.replace("      openstack-compute-node: enabled\n", "      openstack-compute-node: yes\n")
    assert text != DEV
    assert _plan_file(text, tmp_path, monkeypatch) == 0
    document = json.loads((tmp_path / "out" / "plan.json").read_text())
    assert document["settings"]["nodeSelectors"]["compute"] == {"openstack-compute-node": "yes"}


def test_a_stack_file_that_is_not_utf8_is_a_clear_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    path = tmp_path / "Pulumi.dev.yaml"
    path.write_bytes("config:\n  openstack:region: R\u00e9gion\n".encode("latin-1"))
    monkeypatch.setattr(runtime, "stack_file", lambda stack: path)
    assert plan_tool.main(["--stack", "dev", "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert f"{path}: not UTF-8 text" in err and "Traceback" not in err


def test_a_stack_file_that_is_a_directory_is_a_clear_error(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    out = tmp_path / "out"
    assert plan_tool.main(["--stack", "dev", "--stack-file", str(tmp_path), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert f"{tmp_path}: is a directory, not a stack file" in err and not out.exists()


def test_an_error_quotes_only_an_excerpt_of_a_huge_value(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    huge = "x" * 200_000
    text = f"config:\n  openstack:region: {huge}\n  openstack:endpoints:\n    domain: {huge}\n"
    assert _plan_file(text, tmp_path, monkeypatch) == 2
    err = capsys.readouterr().err
    assert "openstack:region" in err and "openstack:endpoints.domain" in err
    assert len(err) < 2_000, len(err)
    assert "200000 characters" in err  # says how long the value is


@pytest.mark.parametrize(
    ("value", "says"),
    [("[" * 5000 + "]" * 5000, "nested too deeply"), ("{a: " * 5000 + "1" + "}" * 5000, "nested too deeply")],
    ids=["lists", "mappings"],
)
def test_a_pathologically_nested_value_is_a_clear_error(
    value: str, says: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    assert _plan_file(f"config:\n  openstack:replicas: {value}\n", tmp_path, monkeypatch) == 2
    err = capsys.readouterr().err
    assert says in err and "Traceback" not in err


def test_an_alias_bomb_in_a_stack_file_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]" for i in range(1, 9)]
    text = "\n".join(lines) + "\nconfig:\n  openstack:replicas: *a8\n"
    assert _plan_file(text, tmp_path, monkeypatch) == 2
    assert "excessive aliasing" in capsys.readouterr().err


def test_the_pulumi_openstack_providers_keys_are_the_providers_own() -> None:
    """The project's name is the pulumi-openstack provider's config namespace: its keys are listed as its own."""
    import pulumi_openstack

    assert _provider_keys(pulumi_openstack.ProviderArgs) == OPENSTACK_PROVIDER_KEYS


def test_a_stack_that_also_configures_pulumi_openstack_plans_and_a_typo_is_still_refused() -> None:
    """Users who add flavors or networks with pulumi-openstack set its keys in the same stack file."""
    base = {"openstack:namespace": "openstack"}
    with_provider = {**base, "openstack:authUrl": "https://keystone.example.com/v3", "openstack:cloud": "mine",
                     "openstack:region": "RegionTwo"}  # fmt: skip
    settings = settings_from_config(with_provider)
    assert settings.region == "RegionTwo"  # the one name both read, with one meaning: the cloud's region
    with pytest.raises(SettingsError) as refused:
        settings_from_config({**base, "openstack:autUrl": "https://keystone.example.com/v3"})
    assert [p for p in refused.value.problems if p.startswith("openstack:autUrl: unknown setting")], refused.value
