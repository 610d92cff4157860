"""The offline plan tool: files, ordering, schema validation and exit codes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from policies.report import CONFIG_DIR, validate_config
from tests.conftest import STACKS, plan_of
from tools import plan as plan_tool
from tools.runtime import SECRET_MARK


@pytest.mark.parametrize("stack", STACKS)
def test_plan_writes_valid_files_for_each_stack(stack: str, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    assert plan_tool.main(["--stack", stack, "--out", str(tmp_path)]) == 0
    document = json.loads((tmp_path / "plan.json").read_text())
    assert document["stack"] == stack
    assert document["settings"]["hypervisorIsolation"] == plan_of(stack).settings.hypervisor_isolation.value
    first = document["resources"][0]
    assert set(first) == {
        "urn",
        "type",
        "name",
        "parent",
        "custom",
        "dependencies",
        "kind",
        "k8s_name",
        "namespace",
        "inputs",
        "options",
    }
    options = {(r["kind"] or r["type"], r["k8s_name"] or r["name"]): r["options"] for r in document["resources"]}
    # What the engine does beyond the inputs is in the plan, as the program asked for it.
    assert options[("Job", "keystone-db-sync")] == {
        "deleteBeforeReplace": True,
        "customTimeouts": {"create": "30m", "update": "30m"},
    }
    assert options[("Secret", "keystone-fernet-keys")] == {"ignoreChanges": ["data", "stringData"]}
    assert options[("Deployment", "keystone-api")] == {}  # pulumi-kubernetes' API-version aliases left out
    crds = options[("kubernetes:helm.sh/v4:Chart", "mariadb-operator-crds")]["transforms"]
    assert [does.split(":")[0] for does in crds] == ["retainOnDelete on each CustomResourceDefinition"]
    out = capsys.readouterr().out
    assert "0 invalid" in out and "wave" in out
    manifests = list(yaml.safe_load_all((tmp_path / "manifests.yaml").read_text()))
    names = [(m["kind"], m["metadata"]["name"]) for m in manifests]
    # Waits come first: each Job or workload appears after what it waits for.
    assert names.index(("MariaDB", "mariadb")) < names.index(("Job", "keystone-db-init"))
    assert names.index(("Job", "keystone-db-init")) < names.index(("Job", "keystone-db-sync"))
    assert names.index(("Job", "keystone-db-sync")) < names.index(("Deployment", "keystone-api"))
    assert names[0] == ("Namespace", "openstack")
    # The policy config the plan was judged with, derived from the settings: the committed one.
    assert (tmp_path / "policy-config.json").read_text() == (CONFIG_DIR / f"{stack}.json").read_text()


def test_a_new_stack_plans_with_the_policy_config_of_its_settings(tmp_path: Path) -> None:
    """No policies/config/qa.json exists: the plan derives it, here with a namespace and a topology
    no committed stack has, which the node pods' roles must match to pass."""
    stack_file = tmp_path / "Pulumi.qa.yaml"
    stack_file.write_text("config:\n  openstack:namespace: qa\n  openstack:hypervisorIsolation: baremetal-hypervisor\n")
    assert not (CONFIG_DIR / "qa.json").exists()
    assert plan_tool.main(["--stack", "qa", "--stack-file", str(stack_file), "--out", str(tmp_path / "out")]) == 0
    config = json.loads((tmp_path / "out" / "policy-config.json").read_text())
    validate_config(config, "policy-config.json")
    assert config["host-namespaces"] == {
        "enforcementLevel": "mandatory",
        "namespace": "qa",
        "hypervisorIsolation": "baremetal-hypervisor",
        "imageRegistry": "quay.io/openstack.kolla",
        "imageOverrides": {},
    }
    assert config["readiness-probes"] == {"enforcementLevel": "mandatory"}  # hygiene: mandatory unless set
    policy = json.loads((tmp_path / "out" / "plan.json").read_text())["policy"]
    assert [v for v in policy if v["enforcement"] == "mandatory"] == []


def test_secrets_are_masked_unless_asked(tmp_path: Path) -> None:
    plan_tool.main(["--stack", "dev", "--out", str(tmp_path / "masked")])
    plan_tool.main(["--stack", "dev", "--out", str(tmp_path / "shown"), "--show-secrets"])
    masked = (tmp_path / "masked" / "plan.json").read_text()
    shown = (tmp_path / "shown" / "plan.json").read_text()
    assert SECRET_MARK in masked and "connection = mysql+pymysql" not in masked
    assert "connection = mysql+pymysql://keystone:Mock" in shown


def test_invalid_settings_exit_nonzero_with_the_key_on_stderr(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    broken = tmp_path / "Pulumi.broken.yaml"
    broken.write_text("config:\n  openstack:hypervisorIsolation: seven\n")
    assert plan_tool.main(["--stack", "broken", "--stack-file", str(broken), "--out", str(tmp_path / "out")]) == 2
    assert "openstack:hypervisorIsolation" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_unknown_stack_is_an_error(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    assert plan_tool.main(["--stack", "nosuch", "--out", str(tmp_path)]) == 2
    assert "stacks: dev, prod, staging" in capsys.readouterr().err


def test_schema_validation_catches_an_invalid_manifest() -> None:
    plan = plan_of("dev")
    broken = plan.by_name("keystone-api", "Deployment")
    original = broken.revealed
    broken.revealed = {**original, "spec": {**original["spec"], "replicas": "three"}}
    try:
        errors, skipped = plan_tool.validate(plan)
    finally:
        broken.revealed = original
    assert any("Deployment keystone-api: spec.replicas" in e for e in errors)
    assert any("MariaDB mariadb" in s for s in skipped)


def test_strict_validation_rejects_unknown_fields() -> None:
    plan = plan_of("dev")
    service = plan.by_name("memcached", "Service")
    original = service.revealed
    service.revealed = {**original, "spec": {**original["spec"], "clusterIPs_typo": []}}
    try:
        errors, _ = plan_tool.validate(plan)
    finally:
        service.revealed = original
    assert any(e.startswith("Service memcached") for e in errors)


def test_waves_start_everything_whose_dependencies_are_met() -> None:
    plan = plan_of("dev")
    wave_of = {r.k8s_name: n for n, wave in enumerate(plan.waves()) for r in wave if r.kind}
    assert wave_of["keystone-api"] == wave_of["keystone-bootstrap"]  # both wait only for db-sync (+memcached)
    assert wave_of["keystone-fernet-setup"] < wave_of["keystone-db-sync"]
    assert wave_of["keystone-db-sync"] == wave_of["keystone-db-init"] + 1


def test_plan_reports_policy_violations_and_fails_on_mandatory_ones(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    real_config = plan_tool.policy_config(plan_of("dev").settings)
    assert plan_tool.main(["--stack", "dev", "--out", str(tmp_path / "clean")]) == 0
    assert json.loads((tmp_path / "clean" / "plan.json").read_text())["policy"] == []
    # The same stack judged with a namespace it does not use: node pods lose their roles.
    elsewhere = {
        name: {**entry, "namespace": "elsewhere"} if "namespace" in entry else entry
        for name, entry in real_config.items()
    }
    monkeypatch.setattr(plan_tool, "policy_config", lambda settings: elsewhere)
    assert plan_tool.main(["--stack", "dev", "--out", str(tmp_path / "judged")]) == 1
    violations = json.loads((tmp_path / "judged" / "plan.json").read_text())["policy"]
    assert any(v["enforcement"] == "mandatory" and "compute-node" in v["message"] for v in violations)
    assert "mandatory policy violation" in capsys.readouterr().err
