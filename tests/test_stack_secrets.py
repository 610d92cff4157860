"""Secret settings (`pulumi config set --secret`) planned offline as the CLI would pass them.

tests/fixtures/stacks/Pulumi.secret.yaml is the dev stack file as pulumi 3.274.1 rewrote it after
`pulumi stack init secret`, `pulumi config set --secret region RegionSecret` and `pulumi config set
--path --secret endpoints.domain secret.example.com`, with the passphrase below (the CLI built from its
Go module, tests/engine/build_go_tools.sh): its encryptionsalt and secure values are the CLI's own.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tools import plan as plan_tool

FIXTURE = Path(__file__).parent / "fixtures" / "stacks" / "Pulumi.secret.yaml"
PASSPHRASE = "correct horse battery staple"


def _plan(tmp_path: Path, *extra: str) -> tuple[int, dict]:
    out = tmp_path / "out"
    status = plan_tool.main(["--stack", "dev", "--stack-file", str(FIXTURE), "--out", str(out), *extra])
    document = json.loads((out / "plan.json").read_text()) if status == 0 else {}
    return status, document


def test_secret_settings_are_decrypted_and_stay_secret_in_the_plan(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PULUMI_CONFIG_PASSPHRASE", PASSPHRASE)
    status, document = _plan(tmp_path)
    assert status == 0
    assert document["settings"]["region"] == "[secret]" and document["settings"]["endpoints"] == "[secret]"
    assert "RegionSecret" not in (tmp_path / "out" / "plan.json").read_text().split('"resources"')[0]
    status, revealed = _plan(tmp_path, "--show-secrets")
    assert revealed["settings"]["region"] == "RegionSecret"
    assert revealed["settings"]["endpoints"]["domain"] == "secret.example.com"


def test_a_wrong_passphrase_names_the_setting_and_what_to_set(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("PULUMI_CONFIG_PASSPHRASE", "wrong")
    assert _plan(tmp_path)[0] == 2
    err = capsys.readouterr().err
    assert "openstack:region" in err and "incorrect passphrase" in err and "Traceback" not in err


def test_without_a_passphrase_the_plan_says_where_the_cli_takes_it_from(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("PULUMI_CONFIG_PASSPHRASE", raising=False)
    monkeypatch.delenv("PULUMI_CONFIG_PASSPHRASE_FILE", raising=False)
    assert _plan(tmp_path)[0] == 2
    assert "PULUMI_CONFIG_PASSPHRASE" in capsys.readouterr().err


def test_the_passphrase_file_is_read_as_the_cli_reads_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    phrase = tmp_path / "phrase"
    phrase.write_text(PASSPHRASE + "\n")  # as `echo` writes it: the CLI trims it
    monkeypatch.delenv("PULUMI_CONFIG_PASSPHRASE", raising=False)
    monkeypatch.setenv("PULUMI_CONFIG_PASSPHRASE_FILE", str(phrase))
    assert _plan(tmp_path)[0] == 0
