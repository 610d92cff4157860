"""The policy pack's config of a stack, derived from its settings.

    python -m tools.policy_config --write    # policies/config/<stack>.json of every stack in stacks/
    python -m tools.policy_config --check    # exit 1 naming the files that are not what --write writes

`pulumi preview --policy-pack-config` takes per policy its `enforcementLevel` and the config
properties the policy reads (`rule.uses`, policies/settings.py). Every one of them follows from
the stack's settings or is the pack's own default, so nobody writes it by hand: tools/plan
writes it with each plan (`policy-config.json`) and judges the plan with it, and the files
policies/config/<stack>.json (which the workflows hand to the engine) are this module's output,
checked by tests/policy/test_config.py.
"""

from __future__ import annotations

import argparse
import copy
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from components.cloud.stack_config import settings_from_config
from components.mechanism.certificates import public_issuer
from components.mechanism.internal_ca import ca_phase
from components.nodes import libvirt_tls
from components.services.specs import public_routes
from components.settings.model import Settings, SettingsError
from policies.registry import RULES, ResourceRule, StackRule
from policies.report import CONFIG_DIR, validate_config
from policies.settings import PROPERTIES
from tools import command_line
from tools.runtime import read_stack_file

STACKS_DIR = Path(__file__).resolve().parents[1] / "stacks"


def public_backends(settings: Settings) -> list[str]:
    """'<Service>:<port>' of every public host's backend, when the stack routes them (gateway)."""
    if settings.gateway is None:
        return []
    return sorted({f"{route.backend}:{route.port}" for route in public_routes(settings)})


def ca_issuers(settings: Settings) -> dict[str, str]:
    """'<Kind>/<name>' of each issuer of the stack's CAs → which CA: those the program's certificates come from
    (every trusted internal CA during a rotation)."""
    tls, found = settings.tls, []
    if tls.internal is not None and tls.internal.enabled:
        found += [(ca.issuer, "internal") for ca in ca_phase(tls.internal).trusted]
    if tls.libvirt is not None:
        found.append((libvirt_tls.issuer(tls.libvirt), "libvirt"))
    if tls.public is not None:
        found.append((public_issuer(tls.public), "public"))
    return {f"{ref['kind']}/{ref['name']}": ca for ref, ca in found}


def ceph_pools(settings: Settings) -> list[str]:
    return sorted(settings.ceph.pools.model_dump().values()) if settings.ceph is not None else []


# The pack's properties that mirror a setting, and where in the settings each is.
FROM_SETTINGS: dict[str, Callable[[Settings], Any]] = {
    "namespace": lambda s: s.namespace,
    "hypervisorIsolation": lambda s: s.hypervisor_isolation.value,
    "imageRegistry": lambda s: s.images.registry,
    "imageOverrides": lambda s: dict(s.images.overrides),
    "vmSafe": lambda s: s.compute.vm_safe,
    "nodeSelectors": lambda s: s.node_selectors.model_dump(by_alias=True),
    "tlsRequired": lambda s: s.endpoints.scheme == "https",
    "publicBackends": public_backends,
    "caIssuers": ca_issuers,
    "gatewayNamespace": lambda s: s.gateway.existing.namespace if s.gateway and s.gateway.existing else "",
    "cephPools": ceph_pools,
}
# The pack's properties no setting has: written with the pack's defaults (policies/settings.py).
PACK_DEFAULTS = ("apiComponents", "databaseServices", "requiredRequests", "requiredLimits")
# What a stack enforces of a policy its `policyEnforcement` does not name: every policy gates
# the deploy, except the advice about third-party charts, whose templates are not ours to fix
# (policies/README.md). The pack's own defaults (registry.py) are for objects it judges with no
# stack at all (tools.policycheck without --stack), where hygiene is advice.
ADVISORY_UNLESS_SET = ("third-party-chart-hygiene",)


def enforcement_level(settings: Settings, rule: ResourceRule | StackRule) -> str:
    """A hygiene rule's level is the stack's to set; every other rule's is the pack's (the settings
    refuse a stack that names one, and the pack's loader a config that lowers one)."""
    if not rule.hygiene:
        return rule.enforcement
    default = "advisory" if rule.name in ADVISORY_UNLESS_SET else "mandatory"
    return settings.policy_enforcement.get(rule.name, default)


def property_value(settings: Settings, key: str) -> Any:
    if key in FROM_SETTINGS:
        return FROM_SETTINGS[key](settings)
    if key in PACK_DEFAULTS:
        return copy.deepcopy(PROPERTIES[key]["default"])
    raise KeyError(f"policy config property {key!r} is neither a setting nor a pack default: add it to {__name__}")


def policy_config(settings: Settings) -> dict[str, dict[str, Any]]:
    """Per rule, in the pack's order: its enforcement level and exactly the properties it reads."""
    return {
        rule.name: {"enforcementLevel": enforcement_level(settings, rule)}
        | {key: property_value(settings, key) for key in rule.uses}
        for rule in RULES
    }


def render(config: dict[str, Any]) -> str:
    """The file's text: the pack's schemas checked, two-space JSON, a final newline."""
    validate_config(config, "generated policy config")
    return json.dumps(config, indent=2) + "\n"


def stack_files(stacks_dir: Path = STACKS_DIR) -> dict[str, Path]:
    return {path.name.split(".")[1]: path for path in sorted(stacks_dir.glob("Pulumi.*.yaml"))}


def expected_files(stacks_dir: Path = STACKS_DIR) -> dict[str, str]:
    """<stack>.json → its text, for every stack file; StackError when a stack's settings are invalid."""
    expected = {}
    for stack, path in stack_files(stacks_dir).items():
        try:
            settings = settings_from_config(read_stack_file(path))
        except SettingsError as error:
            raise StackError(f"stack {stack} ({path}): {error}") from None
        expected[f"{stack}.json"] = render(policy_config(settings))
    return expected


class StackError(ValueError):
    """A stack whose settings the program would refuse: it has no policy config either."""


def stale_files(stacks_dir: Path = STACKS_DIR, config_dir: Path = CONFIG_DIR) -> dict[str, str]:
    """File name → why it is not what --write writes: different, missing, or of no stack."""
    expected = expected_files(stacks_dir)
    stale = {}
    for name, text in expected.items():
        path = config_dir / name
        if not path.is_file():
            stale[name] = "missing"
        elif path.read_text() != text:
            stale[name] = "differs from the stack's settings"
    for path in sorted(config_dir.glob("*.json")):
        if path.name not in expected:
            stale[path.name] = f"no stack file {stacks_dir.name}/Pulumi.{path.stem}.yaml"
    return stale


def write_files(stacks_dir: Path = STACKS_DIR, config_dir: Path = CONFIG_DIR) -> list[Path]:
    """Write every stack's file and delete those of no stack; returns what changed."""
    expected = expected_files(stacks_dir)
    changed = []
    config_dir.mkdir(parents=True, exist_ok=True)
    for name, text in expected.items():
        path = config_dir / name
        if not path.is_file() or path.read_text() != text:
            path.write_text(text)
            changed.append(path)
    for path in sorted(config_dir.glob("*.json")):
        if path.name not in expected:
            path.unlink()
            changed.append(path)
    return changed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.policy_config", description=__doc__.split("\n\n")[0])
    action = parser.add_mutually_exclusive_group(required=True)
    action.add_argument("--write", action="store_true", help="write policies/config/<stack>.json of every stack")
    action.add_argument("--check", action="store_true", help="exit 1 if a file is not what --write would write")
    parser.add_argument("--stacks", type=Path, default=STACKS_DIR, help="the stack files' directory (stacks/)")
    parser.add_argument("--config-dir", type=Path, default=CONFIG_DIR, help="the configs' directory (policies/config/)")
    args = parser.parse_args(argv)
    try:
        if args.write:
            for path in write_files(args.stacks, args.config_dir):
                print(f"{'wrote' if path.exists() else 'deleted'} {path}")
            return 0
        stale = stale_files(args.stacks, args.config_dir)
    except StackError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    for name, why in stale.items():
        print(f"stale: {args.config_dir / name}: {why}", file=sys.stderr)
    if stale:
        print("run: python -m tools.policy_config --write (make policy-config)", file=sys.stderr)
    return 1 if stale else 0


if __name__ == "__main__":
    command_line.run(main)
