"""A stack file as another release deploys it, and as the `pulumi up` of an upgrade names it.

The tests plan each stack at every release the program deploys (tests/conftest.py release_plan),
and the lab deploys prod at the release before its own to upgrade it (tests/lab/cloud/upgrade_scenario.py):
both change the stack's settings the same way, here.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from components.settings.releases import GlanceServer, of

PREFIX = "openstack:"


def release_overrides(config: Mapping[str, str], release: str) -> dict[str, Any]:
    """The settings (camelCase keys) that make a stack deploy `release`: the release, and where it cannot
    deploy what the stack asks (settings refuse it), the nearest that it can: internal TLS in plain text
    where the release's glance-api serves no TLS (components/settings/releases.py, GlanceServer.OWN). Every other
    setting stays the stack file's. `config` is the stack's as the CLI passes it (tools/runtime.py)."""
    overrides: dict[str, Any] = {"release": release}
    tls = json.loads(config.get(f"{PREFIX}tls") or "{}")
    if of(release).glance_server is GlanceServer.OWN and (tls.get("internal") or {}).get("plainText") is not True:
        overrides["tls"] = {**tls, "internal": {"plainText": True}}
    return overrides


def write_stack_file(stack_file: Path, overrides: Mapping[str, Any], target: Path) -> Path:
    """The stack file with `overrides` (camelCase keys) written into its config, at `target`."""
    document = yaml.safe_load(stack_file.read_text())
    document["config"] = {**document["config"], **{f"{PREFIX}{key}": value for key, value in overrides.items()}}
    target.write_text(yaml.safe_dump(document, sort_keys=False))
    return target
