"""The pack without an engine: for tools/plan (a planned stack) and tools/policycheck.

    from policies.report import check_resources, load_config
    violations = check_resources(plan["resources"], load_config("prod"))

`config` has the shape of `pulumi preview --policy-pack-config` files: per policy an
enforcement level, or an object with `enforcementLevel` and config properties; "all"
sets the level of every policy. Enforcement resolves as the engine resolves it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from policies.k8s import K8sObject
from policies.lists import flatten
from policies.registry import HYGIENE_RULES, RESOURCE_RULES, RULES, STACK_RULES
from policies.settings import ENFORCEMENT_LEVELS, ConfigError, PackSettings, check_property

CONFIG_DIR = Path(__file__).resolve().parent / "config"


@dataclass(frozen=True)
class Violation:
    policy: str
    enforcement: str  # mandatory | advisory
    urn: str
    message: str

    def to_dict(self) -> dict[str, str]:
        return asdict(self)


def load_config(stack: str) -> dict[str, Any]:
    """policies/config/<stack>.json, checked against the pack's schemas."""
    path = CONFIG_DIR / f"{stack}.json"
    if not path.is_file():
        known = ", ".join(sorted(p.stem for p in CONFIG_DIR.glob("*.json")))
        raise FileNotFoundError(f"no policy config for stack {stack!r}: {path} does not exist (stacks: {known})")
    try:
        config = json.loads(path.read_text())
    except json.JSONDecodeError as error:
        raise ConfigError(f"{path}: not valid JSON: {error}") from None
    validate_config(config, str(path))
    return config


def validate_config(config: Any, source: str = "config") -> None:
    """Raise ConfigError naming the policy and property of the first problem."""
    if not isinstance(config, dict):
        raise ConfigError(f"{source}: must be a JSON object keyed by policy name")
    rules = {rule.name: rule for rule in RULES}
    for name, value in config.items():
        if name != "all" and name not in rules:
            raise ConfigError(f"{source}: unknown policy {name!r}; policies: {', '.join(rules)}")
        if isinstance(value, str):
            value = {"enforcementLevel": value}
        if not isinstance(value, dict):
            raise ConfigError(f"{source}: {name}: must be an enforcement level or an object")
        level = value.get("enforcementLevel", "advisory")
        if level not in ENFORCEMENT_LEVELS:
            raise ConfigError(f"{source}: {name}.enforcementLevel: {level!r}; allowed: {', '.join(ENFORCEMENT_LEVELS)}")
        _check_fixed_level(source, name, value, rules)
        for key, item in value.items():
            if key == "enforcementLevel":
                continue
            if name == "all" or key not in rules[name].uses:
                raise ConfigError(f"{source}: {name}: property {key!r} is not read by this policy")
            check_property(f"{source}: {name}", key, item)


def _check_fixed_level(source: str, name: str, value: dict[str, Any], rules: Mapping[str, Any]) -> None:
    """Only hygiene rules take a level from the config: the others guard the host and the cloud,
    so a file that lowers one (by hand, or "all") is refused, not obeyed."""
    if "enforcementLevel" not in value:
        return
    level = value["enforcementLevel"]
    fixed = [rules[name]] if name != "all" else [rule for rule in rules.values() if not rule.hygiene]
    lowered = [rule.name for rule in fixed if not rule.hygiene and level != rule.enforcement]
    if lowered:
        raise ConfigError(
            f"{source}: {name}.enforcementLevel: {level!r} would lower {', '.join(lowered)}, whose level is "
            f"fixed in policies/registry.py ({fixed[0].enforcement}); a config may set only {', '.join(HYGIENE_RULES)}"
        )


def _entry(config: Mapping[str, Any], name: str) -> Mapping[str, Any]:
    value = config.get(name, {})
    return {"enforcementLevel": value} if isinstance(value, str) else value


def enforcement(config: Mapping[str, Any], name: str, default: str) -> str:
    """A policy's own level, else the "all" level, else the rule's default; remediate
    counts as mandatory, as the engine counts it for a violation it did not fix."""
    level = _entry(config, name).get("enforcementLevel") or _entry(config, "all").get("enforcementLevel") or default
    return "mandatory" if level == "remediate" else level


def settings_for(config: Mapping[str, Any], name: str) -> PackSettings:
    return PackSettings.from_config(_entry(config, name), name)


def check_objects(objects: Sequence[K8sObject], config: Mapping[str, Any]) -> list[Violation]:
    """The resource rules over each object, a list's items each on its own (what tools/policycheck runs
    on manifests)."""
    objects = [item for obj in objects for item in flatten(obj)]
    violations = []
    for rule in RESOURCE_RULES:
        level = enforcement(config, rule.name, rule.enforcement)
        if level == "disabled":
            continue
        settings = settings_for(config, rule.name)
        for obj in objects:
            if rule.applies(obj):
                violations += [Violation(rule.name, level, obj.urn, m) for m in rule.check(obj, settings)]
    return violations


def check_stack(objects: Sequence[K8sObject], config: Mapping[str, Any]) -> list[Violation]:
    violations = []
    for rule in STACK_RULES:
        level = enforcement(config, rule.name, rule.enforcement)
        if level != "disabled":
            found = rule.check(objects, settings_for(config, rule.name))
            violations += [Violation(rule.name, level, urn, message) for urn, message in found]
    return violations


def objects_from_plan(resources: Sequence[Mapping[str, Any]]) -> list[K8sObject]:
    """Planned resources ({"urn", "type", "custom", "dependencies", "inputs", ...}) as objects;
    components are kept too, since dependencies may run through them."""
    return [
        K8sObject(str(r["urn"]), str(r["type"]), r.get("inputs") or {}, tuple(r.get("dependencies") or ()))
        for r in resources
    ]


def check_resources(resources: list[dict[str, Any]], config: dict[str, Any]) -> list[Violation]:
    """Every rule of the pack, resource and stack, over a planned stack."""
    objects = objects_from_plan(resources)
    return check_objects(objects, config) + check_stack(objects, config)


def has_mandatory(violations: Sequence[Violation]) -> bool:
    return any(v.enforcement == "mandatory" for v in violations)
