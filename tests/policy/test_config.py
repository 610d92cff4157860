"""policies/config/<stack>.json: valid for the pack's schemas, in step with the stack files,
and enforcing what the README promises per environment."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from components.settings import Settings
from policies.registry import RULES
from policies.report import check_objects, enforcement, load_config, validate_config
from policies.settings import ConfigError, PackSettings

from .builders import container, control_plane, k8s_object

REPO = Path(__file__).resolve().parents[2]
STACKS = ("dev", "staging", "prod")
HYGIENE = ("resource-requests-limits", "readiness-probes", "image-pinned")
ADVISORY_EVERYWHERE = ("third-party-chart-hygiene",)


def stack_settings(stack: str) -> Settings:
    document = yaml.safe_load((REPO / "stacks" / f"Pulumi.{stack}.yaml").read_text())
    return Settings.parse({key.split(":", 1)[1]: value for key, value in document["config"].items()})


def test_a_config_file_per_stack_and_no_other() -> None:
    assert sorted(p.stem for p in (REPO / "policies" / "config").glob("*.json")) == sorted(STACKS)


@pytest.mark.parametrize("stack", STACKS)
def test_every_policy_is_configured_with_every_property_it_reads(stack: str) -> None:
    config = load_config(stack)
    assert list(config) == [rule.name for rule in RULES]
    for rule in RULES:
        assert set(config[rule.name]) == {"enforcementLevel", *rule.uses}, rule.name


@pytest.mark.parametrize("stack", STACKS)
def test_the_config_agrees_with_the_stack_file(stack: str) -> None:
    settings = stack_settings(stack)
    expected: dict[str, Any] = {
        "namespace": settings.namespace,
        "hypervisorIsolation": settings.hypervisor_isolation.value,
        "imageRegistry": settings.images.registry,
        "imageOverrides": dict(settings.images.overrides),
        "vmSafe": settings.compute.vm_safe,
        "nodeSelectors": settings.node_selectors.model_dump(by_alias=True),
    }
    for name, entry in load_config(stack).items():
        for key, value in entry.items():
            if key in expected:
                assert value == expected[key], f"{stack}: {name}.{key}"


@pytest.mark.parametrize("stack", STACKS)
def test_enforcement_per_environment(stack: str) -> None:
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
    """Without config the pack judges a stack of default settings (components/settings.py)."""
    defaults, program = PackSettings.from_config({}), Settings()
    assert defaults.namespace == program.namespace
    assert defaults.topology == program.hypervisor_isolation
    assert defaults.image_registry == program.images.registry
    assert defaults.vm_safe == program.compute.vm_safe
    assert dict(defaults.node_selectors) == program.node_selectors.model_dump(by_alias=True)
