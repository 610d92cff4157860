"""policies/config/<stack>.json: generated from the stack files (tools/policy_config.py) and
current, valid for the pack's schemas, judging as the settings say, and enforcing what the
README promises per environment."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from components.cloud.stack_config import parse_settings, settings_from_config
from components.settings.model import Settings
from policies.registry import RULES
from policies.report import CONFIG_DIR, check_objects, enforcement, load_config, settings_for, validate_config
from policies.settings import PROPERTIES, ConfigError, PackSettings
from tools import policy_config as generator
from tools.policy_config import policy_config
from tools.runtime import read_stack_file, stack_file

from .builders import container, control_plane, k8s_object

STACKS = ("dev", "staging", "prod")
HYGIENE = ("resource-requests-limits", "readiness-probes", "image-pinned")
ADVISORY_EVERYWHERE = ("third-party-chart-hygiene",)


def stack_settings(stack: str) -> Settings:
    return settings_from_config(read_stack_file(stack_file(stack)))


def test_the_committed_configs_are_generated_from_the_stack_files() -> None:
    """What CI checks: policies/config/ holds exactly `python -m tools.policy_config --write`'s output."""
    assert sorted(p.name for p in CONFIG_DIR.glob("*.json")) == sorted(f"{stack}.json" for stack in STACKS)
    assert generator.stale_files() == {}


def test_check_names_stale_missing_and_orphaned_files_and_write_fixes_them(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    stacks, configs = tmp_path / "stacks", tmp_path / "config"
    stacks.mkdir()
    for stack in ("dev", "prod"):
        (stacks / f"Pulumi.{stack}.yaml").write_text(stack_file(stack).read_text())
    (stacks / "Pulumi.qa.yaml").write_text("config:\n  openstack:namespace: qa\n")
    configs.mkdir()
    (configs / "dev.json").write_text((CONFIG_DIR / "dev.json").read_text())
    (configs / "prod.json").write_text((CONFIG_DIR / "dev.json").read_text())
    (configs / "old.json").write_text("{}\n")
    dirs = ["--stacks", str(stacks), "--config-dir", str(configs)]

    assert generator.main(["--check", *dirs]) == 1
    err = capsys.readouterr().err
    assert f"{configs / 'prod.json'}: differs from the stack's settings" in err
    assert f"{configs / 'qa.json'}: missing" in err
    assert f"{configs / 'old.json'}: no stack file stacks/Pulumi.old.yaml" in err
    assert "dev.json" not in err

    assert generator.main(["--write", *dirs]) == 0
    assert sorted(p.name for p in configs.glob("*.json")) == ["dev.json", "prod.json", "qa.json"]
    assert (configs / "prod.json").read_text() == (CONFIG_DIR / "prod.json").read_text()
    qa = json.loads((configs / "qa.json").read_text())
    validate_config(qa, "qa.json")
    assert qa["host-ports"]["namespace"] == "qa"
    assert generator.main(["--check", *dirs]) == 0


def test_a_stack_the_program_refuses_has_no_config(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    (tmp_path / "Pulumi.bad.yaml").write_text("config:\n  openstack:policyEnforcement:\n    host-port: advisory\n")
    assert generator.main(["--check", "--stacks", str(tmp_path), "--config-dir", str(tmp_path)]) == 2
    assert "stack bad" in (err := capsys.readouterr().err) and "openstack:policyEnforcement.host-port" in err


def test_every_pack_property_is_a_setting_or_a_pack_default() -> None:
    """A property the pack adds must be decided on: read from the settings, or the pack's default."""
    assert not set(generator.FROM_SETTINGS) & set(generator.PACK_DEFAULTS)
    assert set(generator.FROM_SETTINGS) | set(generator.PACK_DEFAULTS) == set(PROPERTIES)


@pytest.mark.parametrize("stack", STACKS)
def test_every_policy_is_configured_with_every_property_it_reads(stack: str) -> None:
    config = load_config(stack)
    assert list(config) == [rule.name for rule in RULES]
    for rule in RULES:
        assert set(config[rule.name]) == {"enforcementLevel", *rule.uses}, rule.name


# Settings unlike every stack's and every default, so that a value read from the wrong place shows.
UNUSUAL = {
    "namespace": "cloud",
    "hypervisorIsolation": "baremetal-hypervisor-shared-pod",
    "images": {
        "registry": "registry.example.org/kolla",
        "overrides": {"nova-compute": "mirror.example.org/nova-compute@sha256:" + "a" * 64},
    },
    "nodeSelectors": {"compute": {"example.org/hypervisor": "yes"}},
    "compute": {"vmSafe": True},
}


@pytest.mark.parametrize("stack", [*STACKS, "unusual"])
def test_the_pack_reads_the_stacks_settings_from_its_config(stack: str) -> None:
    """Each policy, reading its own part of the config as the engine hands it over, judges the stack's settings."""
    settings = parse_settings(UNUSUAL) if stack == "unusual" else stack_settings(stack)
    config = load_config(stack) if stack in STACKS else policy_config(settings)
    for rule in RULES:
        seen = settings_for(config, rule.name)
        if "namespace" in rule.uses:
            assert seen.namespace == settings.namespace
        if "hypervisorIsolation" in rule.uses:
            assert seen.topology == settings.hypervisor_isolation
        if "imageRegistry" in rule.uses:
            assert seen.image_registry == settings.images.registry
        if "imageOverrides" in rule.uses:
            assert seen.image_overrides == settings.images.overrides
        if "vmSafe" in rule.uses:
            assert seen.vm_safe == settings.compute.vm_safe
        if "nodeSelectors" in rule.uses:
            assert seen.node_selectors == settings.node_selectors.model_dump(by_alias=True)
        if "tlsRequired" in rule.uses:
            assert seen.tls_required is (settings.endpoints.scheme == "https")
        if "publicBackends" in rule.uses:
            assert bool(seen.public_backends) is (settings.gateway is not None)
        if "caIssuers" in rule.uses:
            assert seen.ca_issuers == generator.ca_issuers(settings)
        if "gatewayNamespace" in rule.uses:
            existing = settings.gateway.existing if settings.gateway else None
            assert seen.gateway_namespace == (existing.namespace if existing else "")
        if "cephPools" in rule.uses:
            assert seen.ceph_pools == tuple(generator.ceph_pools(settings))


def test_a_stack_enforces_every_policy_unless_its_settings_say_otherwise() -> None:
    levels = {name: entry["enforcementLevel"] for name, entry in policy_config(Settings()).items()}
    assert levels == {rule.name: "advisory" if rule.name in ADVISORY_EVERYWHERE else "mandatory" for rule in RULES}
    moved = {"image-pinned": "disabled", "third-party-chart-hygiene": "remediate"}
    changed = parse_settings({"policyEnforcement": moved})
    levels = {name: entry["enforcementLevel"] for name, entry in policy_config(changed).items()}
    assert levels["image-pinned"] == "disabled" and levels["third-party-chart-hygiene"] == "remediate"
    assert levels["host-namespaces"] == "mandatory"


@pytest.mark.parametrize("stack", STACKS)
def test_enforcement_per_environment(stack: str) -> None:
    """What each stack file's `policyEnforcement` may lower: hygiene in dev, nothing that guards privileges."""
    config = load_config(stack)
    for rule in RULES:
        level = enforcement(config, rule.name, rule.enforcement)
        if rule.name in ADVISORY_EVERYWHERE:
            assert level == "advisory"
        elif rule.name in HYGIENE:
            assert level == ("advisory" if stack == "dev" else "mandatory"), rule.name
        else:
            assert level == "mandatory", f"{stack}: {rule.name} guards privileges or secrets"


def test_enforcement_resolves_as_the_engine_does() -> None:
    assert enforcement({}, "host-ports", "mandatory") == "mandatory"
    assert enforcement({"all": "advisory"}, "host-ports", "mandatory") == "advisory"
    assert (
        enforcement({"all": {"enforcementLevel": "advisory"}, "host-ports": "mandatory"}, "host-ports", "x")
        == "mandatory"
    )
    assert enforcement({"host-ports": {"enforcementLevel": "remediate"}}, "host-ports", "advisory") == "mandatory"


def test_a_disabled_policy_reports_nothing() -> None:
    deployment = control_plane()
    container(deployment)["securityContext"]["privileged"] = True
    assert [v.policy for v in check_objects([k8s_object(deployment)], {})] == ["privileged-containers"]
    assert check_objects([k8s_object(deployment)], {"privileged-containers": "disabled"}) == []


@pytest.mark.parametrize(
    ("config", "problem"),
    [
        ([], "must be a JSON object keyed by policy name"),
        ({"no-such-policy": "mandatory"}, "unknown policy 'no-such-policy'"),
        ({"host-ports": "fatal"}, "host-ports.enforcementLevel: 'fatal'; allowed: advisory, mandatory"),
        ({"host-ports": {"vmSafe": True}}, "host-ports: property 'vmSafe' is not read by this policy"),
        ({"host-ports": {"hypervisorIsolation": "6"}}, "host-ports.hypervisorIsolation: allowed: all-in-one"),
        ({"host-ports": {"imageOverrides": {"nova": 7}}}, "host-ports.imageOverrides: nova: must be a string"),
        ({"vm-safe-updates": {"vmSafe": "yes"}}, "vm-safe-updates.vmSafe: must be true or false"),
        ({"all": {"namespace": "x"}}, "all: property 'namespace' is not read by this policy"),
    ],
)
def test_invalid_configs_name_the_policy_and_property(config: Any, problem: str) -> None:
    with pytest.raises(ConfigError, match=problem.replace("(", r"\(").replace(".", r"\.")):
        validate_config(config, "test.json")


def test_an_unknown_stack_lists_the_known_ones() -> None:
    with pytest.raises(FileNotFoundError, match=r"no policy config for stack 'qa'.*\(stacks: dev, prod, staging\)"):
        load_config("qa")


def test_pack_defaults_mirror_the_programs_defaults() -> None:
    """Without config the pack judges a stack of default settings (components/settings/model.py)."""
    defaults, program = PackSettings.from_config({}), Settings()
    assert defaults.namespace == program.namespace
    assert defaults.topology == program.hypervisor_isolation
    assert defaults.image_registry == program.images.registry
    assert defaults.vm_safe == program.compute.vm_safe
    assert dict(defaults.node_selectors) == program.node_selectors.model_dump(by_alias=True)
    assert defaults.tls_required is (program.endpoints.scheme == "https")
    assert defaults.public_backends == () and program.gateway is None  # no gateway, no route
    assert dict(defaults.ca_issuers) == generator.ca_issuers(program) == {}  # no internal, libvirt or public CA
    assert defaults.gateway_namespace == "" and defaults.ceph_pools == () and program.ceph is None


def test_the_cas_are_the_issuers_of_the_stacks_certificates() -> None:
    """Each CA the settings name, and both internal CAs while one replaces the other."""
    rotation = {"selfSigned": True, "generation": 2, "rotation": {"phase": "trust"}}
    settings = parse_settings({"tls": {"internal": rotation, "libvirt": {"issuer": {"kind": "Issuer", "name": "lv"}}}})
    assert generator.ca_issuers(settings) == {
        "Issuer/internal-ca": "internal", "Issuer/internal-ca-2": "internal", "Issuer/lv": "libvirt"}  # fmt: skip
    assert generator.ca_issuers(parse_settings({"tls": {"internal": {"plainText": True}}})) == {}
    assert generator.ceph_pools(stack_settings("prod")) == ["backups", "images", "vms", "volumes"]
