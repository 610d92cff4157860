"""The config files of a plan with every secret masked: what `--against` compares.

plan.json holds a Secret's data as `[secret]` (or in clear, with --show-secrets), so a
change to a rendered config file cannot be read from it. configs.json holds every
ConfigMap and Secret data key: a rendered file's text with each secret value replaced by
`[secret]`, and for a bare value (a password, a key) only a digest, which tells that it
changed and nothing else. Written whatever --show-secrets says.
"""

from __future__ import annotations

import hashlib
from typing import Any

from tools.plan import Plan
from tools.runtime import SECRET_MARK, Registration

CONFIG_KINDS = ("Secret", "ConfigMap")


def is_file(key: str, value: str) -> bool:
    """A rendered file (nova.conf, a script) rather than a bare value (a password, a key)."""
    return "." in key or "\n" in value


def secret_values(plan: Plan) -> list[str]:
    """Every value a plan must never show: what pulumi-random generated, in each form the
    program uses it, and every bare value of a Secret (whatever its origin)."""
    values = {s for r in plan.registrations for s in r.generated_secrets}
    values |= {r.outputs.get("base64", "") for r in plan.registrations if r.type.endswith("RandomBytes")}
    for r in plan.custom:
        if r.kind == "Secret":
            values |= {v for k, v in _data(r).items() if isinstance(v, str) and not is_file(k, v)}
    return sorted((v for v in values if len(v) >= 8), key=len, reverse=True)


def mask(text: str, secrets: list[str]) -> str:
    for value in secrets:  # longest first, so no secret is half-replaced by a shorter one
        text = text.replace(value, SECRET_MARK)
    return text


def digest(value: str) -> str:
    return "sha256:" + hashlib.sha256(value.encode()).hexdigest()


def _data(r: Registration) -> dict[str, Any]:
    return {**(r.revealed.get("data") or {}), **(r.revealed.get("stringData") or {})}


def object_key(urn: str) -> str:
    """A resource's identity across plans: its URN without the stack and project."""
    return urn.split("::", 2)[-1]


def configs(plan: Plan) -> dict[str, dict[str, dict[str, str | None]]]:
    """object key → data key → {"text": masked text of a file, or None; "digest": of the value}."""
    secrets = secret_values(plan)
    found: dict[str, dict[str, dict[str, str | None]]] = {}
    for r in plan.custom:
        if r.kind not in CONFIG_KINDS:
            continue
        entries = {}
        for key, value in sorted(_data(r).items()):
            value = str(value)
            shown = r.kind == "ConfigMap" or is_file(key, value)
            entries[key] = {"text": mask(value, secrets) if shown else None, "digest": digest(value)}
        found[object_key(r.urn)] = entries
    return found
