"""Pulumi.yaml, written from the settings model.

    python -m tools.project_file --write    # Pulumi.yaml from components/settings/model.py
    python -m tools.project_file --check    # exit 1 when Pulumi.yaml is not what --write writes

The Pulumi CLI refuses a stack that lacks a key the project declares without `default` or
`value` ("Stack 'dev' is missing configuration values ...": pulumi pkg/workspace/config.go,
mergeConfig), so every key gets one. A scalar's default is the model's, with its type, which
the CLI then checks a stack's value against. An object's default is `{}`: the model fills in
what is left out, and an optional section (`gateway`, `ceph`, `upgrade`) reads `{}` as unset.
An object's own default is not written out because part of it follows other settings (the
image tag follows `release`, replicas follow `ha`); a literal copy here would pin them.
Objects stay untyped: `type: object` needs a CLI whose project schema knows it (sdk
go/common/workspace/project.json), and the model checks them with clearer messages anyway.
"""

from __future__ import annotations

import argparse
import enum
import sys
from pathlib import Path
from typing import Any

import yaml

from components.settings.model import Settings
from components.settings.problems import PROJECT
from tools import command_line

PROJECT_FILE = Path(__file__).resolve().parents[1] / "Pulumi.yaml"

HEADER = {
    "name": PROJECT,
    "description": (
        "OpenStack (Keystone, Glance, Placement, Nova, Neutron, Cinder, Horizon) on Kubernetes, "
        "control plane and compute nodes."
    ),
    "runtime": {"name": "python", "options": {"toolchain": "pip", "virtualenv": ".venv"}},
    "stackConfigDir": "stacks",
}
PREAMBLE = (
    "# Written by `python -m tools.project_file --write` (make project-file) from the settings model,\n"
    "# components/settings/model.py: edit the model, not this file. Every key has a default, as the\n"
    "# Pulumi CLI requires of a key a stack may leave out; an object's is {} (the model's defaults).\n"
)
SCALAR_TYPES: dict[type, str] = {bool: "boolean", int: "integer", str: "string"}


def config_entry(key: str) -> dict[str, Any]:
    """The project's declaration of one setting: its description, and its type and default."""
    name, field = next((n, f) for n, f in Settings.model_fields.items() if (f.alias or n) == key)
    if not field.description:
        raise ValueError(f"Settings.{name} has no description: Pulumi.yaml's entry for {key!r} needs one")
    default = field.get_default(call_default_factory=True)
    if isinstance(default, enum.Enum):
        default = default.value
    if default is None or not isinstance(default, (bool, int, str)):
        return {"description": field.description, "default": {}}
    return {"type": SCALAR_TYPES[type(default)], "description": field.description, "default": default}


def project() -> dict[str, Any]:
    keys = [field.alias or name for name, field in Settings.model_fields.items()]
    return {**HEADER, "config": {key: config_entry(key) for key in keys}}


def render() -> str:
    return PREAMBLE + yaml.safe_dump(project(), sort_keys=False, width=110, allow_unicode=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.project_file", description=__doc__.split("\n\n")[0])
    action = parser.add_mutually_exclusive_group(required=True)
    action.add_argument("--write", action="store_true", help="write Pulumi.yaml")
    action.add_argument("--check", action="store_true", help="exit 1 if Pulumi.yaml is not what --write writes")
    parser.add_argument("--file", type=Path, default=PROJECT_FILE, help="the project file (Pulumi.yaml)")
    args = parser.parse_args(argv)
    text = render()
    if args.write:
        if not args.file.is_file() or args.file.read_text() != text:
            args.file.write_text(text)
            print(f"wrote {args.file}")
        return 0
    if not args.file.is_file() or args.file.read_text() != text:
        print(f"stale: {args.file}: not what the settings model writes", file=sys.stderr)
        print("run: python -m tools.project_file --write (make project-file)", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    command_line.run(main)
