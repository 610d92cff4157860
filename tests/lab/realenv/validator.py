"""Checks rendered oslo.config files against the real OpenStack release.

Two passes, both in the OpenStack venv, in one process per namespace list (oslo_check.py):
1. oslo.config's validator (what `oslo-config-validator` runs, its own functions)
   decides which option names are unknown or deprecated. It exits 1 on an unknown
   option, 0 otherwise (deprecated names only fail with --fatal-warnings, which we
   leave to the caller), and reports through `logging`, as the tool prints on stderr:
       ERROR:root:<group>/<option> is not part of the sample config
       WARNING:root:Deprecated opt <group>/<option> found
       INFO:root:Ignoring missing option "<option>" from group "<group>" because ...
   The last one is [keystone_authtoken] (its KNOWN_BAD_GROUPS): the validator does
   not know auth plugin options, so it accepts anything there.
2. oslo_values.py reads every value through oslo.config's types (the validator never
   does), reports namespaces that are missing or fail to import (the validator drops
   them silently), and knows the auth plugin options of the section's `auth_type`,
   which settles the options the validator ignored.
"""

import json
import re
import subprocess
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.lab.realenv.namespaces import dynamic_sections, namespaces_for
from tests.lab.realenv.openstack_venv import OpenStackVenv

VALUES_SCRIPT = Path(__file__).with_name("oslo_values.py")
CHECK_SCRIPT = Path(__file__).with_name("oslo_check.py")

_UNKNOWN = re.compile(r"^ERROR:root:(?P<section>[^/]+)/(?P<name>.+) is not part of the sample config$")
_DEPRECATED = re.compile(r"^WARNING:root:Deprecated opt (?P<section>[^/]+)/(?P<name>.+) found$")
_IGNORED = re.compile(r'^INFO:root:Ignoring missing option "(?P<name>[^"]+)" from group "(?P<section>[^"]+)"')

Option = tuple[str, str]  # (section, name) as written in the file


@dataclass(frozen=True)
class ValidatorOutput:
    """What oslo-config-validator printed, parsed."""

    returncode: int
    unknown: list[Option]
    deprecated: list[Option]
    ignored: list[Option]


def parse_validator_output(returncode: int, stderr: str) -> ValidatorOutput:
    found: dict[str, list[Option]] = {"unknown": [], "deprecated": [], "ignored": []}
    for line in stderr.splitlines():
        for kind, pattern in (("unknown", _UNKNOWN), ("deprecated", _DEPRECATED), ("ignored", _IGNORED)):
            match = pattern.match(line)
            if match:
                found[kind].append((match["section"], match["name"]))
    # Exit 1 with nothing reported is a crash (unreadable file, import error); with
    # only deprecated names it is --fatal-warnings at work.
    if returncode != 0 and not (found["unknown"] or found["deprecated"]):
        raise RuntimeError(f"oslo-config-validator failed ({returncode}):\n{stderr[-3000:]}")
    return ValidatorOutput(returncode, **found)


@dataclass
class ValidationResult:
    path: Path
    namespaces: tuple[str, ...]
    checked: int = 0  # options set in the file that got a verdict
    unknown: list[Option] = field(default_factory=list)
    invalid: list[tuple[str, str, str]] = field(default_factory=list)  # + message
    deprecated: list[Option] = field(default_factory=list)
    excluded: list[Option] = field(default_factory=list)  # in --exclude-group sections
    unloadable_namespaces: dict[str, str] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not (self.unknown or self.invalid or self.unloadable_namespaces)

    def summary(self) -> str:
        lines = [f"{self.path}: {self.checked} options checked"]
        lines += [f"  unknown option [{s}] {n}" for s, n in self.unknown]
        lines += [f"  invalid value [{s}] {n}: {m}" for s, n, m in self.invalid]
        lines += [f"  namespace {ns} not loaded: {why}" for ns, why in self.unloadable_namespaces.items()]
        lines += [f"  (deprecated name [{s}] {n})" for s, n in self.deprecated]
        return "\n".join(lines)


@dataclass(frozen=True)
class ConfigCheck:
    """One file to validate, with what decides its verdict."""

    venv: OpenStackVenv
    path: Path
    namespaces: tuple[str, ...]
    exclude_groups: frozenset[str] = frozenset()
    aliases: tuple[tuple[str, str], ...] = ()  # (section, group whose options it takes)


def config_check(
    venv: OpenStackVenv,
    path: Path,
    namespaces: Iterable[str] | None = None,
    *,
    exclude_groups: Iterable[str] = (),
    group_aliases: Mapping[str, str] | None = None,
) -> ConfigCheck:
    """What to check `path` with; namespaces default to the table entry for its file name and the venv's release.

    group_aliases maps a dynamically named section to the group whose options it
    takes (cinder's `[lvm]` -> `backend_defaults`); such sections are checked by the
    value pass only, since the validator cannot know their names. By default they
    come from namespaces.dynamic_sections.
    """
    if group_aliases is None:
        group_aliases = dynamic_sections(path, Path(path).read_text())
    return ConfigCheck(
        venv,
        Path(path),
        tuple(namespaces) if namespaces is not None else namespaces_for(path, venv.release),
        frozenset(exclude_groups),
        tuple(group_aliases.items()),
    )


def validate(
    venv: OpenStackVenv,
    path: Path,
    namespaces: Iterable[str] | None = None,
    *,
    exclude_groups: Iterable[str] = (),
    group_aliases: Mapping[str, str] | None = None,
) -> ValidationResult:
    """Validate one file (config_check says with what)."""
    check = config_check(venv, path, namespaces, exclude_groups=exclude_groups, group_aliases=group_aliases)
    return validate_all([check])[0]


def validate_all(checks: Sequence[ConfigCheck], workers: int = 2) -> list[ValidationResult]:
    """Validate many files, each with its own verdict, in the order given.

    Loading a project's namespaces costs seconds of CPU, checking a file milliseconds: one
    process per (venv, namespace list) checks all of its files (oslo_check.py), `workers` such
    processes at a time (each one core).
    """
    batches: dict[tuple[OpenStackVenv, tuple[str, ...]], list[int]] = {}
    for index, check in enumerate(checks):
        batches.setdefault((check.venv, check.namespaces), []).append(index)
    results: dict[int, ValidationResult] = {}

    def run(indexes: list[int]) -> None:
        results.update(zip(indexes, _validate_batch([checks[i] for i in indexes]), strict=True))

    with ThreadPoolExecutor(max_workers=workers) as pool:
        list(pool.map(run, batches.values()))
    return [results[index] for index in range(len(checks))]


def _validate_batch(checks: Sequence[ConfigCheck]) -> list[ValidationResult]:
    """The checks of one venv and one namespace list, in one oslo_check.py process."""
    venv, namespaces = checks[0].venv, checks[0].namespaces
    request = {
        "namespaces": list(namespaces),
        "files": [
            {
                "path": str(c.path),
                # Dynamically named sections are checked by the value pass only.
                "exclude_groups": sorted(c.exclude_groups | {s for s, _ in c.aliases}),
                "aliases": dict(c.aliases),
            }
            for c in checks
        ],
    }
    done = subprocess.run(
        [venv.python, CHECK_SCRIPT], input=json.dumps(request), capture_output=True, text=True, env=venv.env()
    )
    if done.returncode != 0:
        raise RuntimeError(f"oslo_check.py failed on {[str(c.path) for c in checks]}:\n{done.stderr[-3000:]}")
    report = json.loads(done.stdout)
    if report["names_error"]:
        raise RuntimeError(f"oslo-config-validator failed on namespaces {namespaces}:\n{report['names_error'][-3000:]}")
    return [_verdict(check, report["unloadable"], found) for check, found in zip(checks, report["files"], strict=True)]


def _verdict(check: ConfigCheck, unloadable: dict[str, str], found: dict[str, Any]) -> ValidationResult:
    """Both passes' findings on one file, combined."""
    names = parse_validator_output(found["returncode"], found["log"])
    if found["values_error"]:
        raise RuntimeError(f"oslo_values.py failed on {check.path}:\n{found['values_error'][-3000:]}")
    aliases, excluded = dict(check.aliases), check.exclude_groups
    result = ValidationResult(
        check.path, check.namespaces, deprecated=names.deprecated, unloadable_namespaces=unloadable
    )
    cli_unknown, cli_ignored = set(names.unknown), set(names.ignored)
    for entry in found["values"]["options"]:
        option: Option = (entry["section"], entry["name"])
        section = option[0]
        if section in excluded:
            result.excluded.append(option)
            continue
        result.checked += 1
        # The validator is authoritative on names except where it does not look:
        # auth plugin options, [keystone_authtoken] and dynamically named sections.
        if option in cli_unknown:
            unknown = entry.get("source") != "auth-plugin"
        else:
            unknown = (option in cli_ignored or section in aliases) and entry["status"] == "unregistered"
        if unknown:
            result.unknown.append(option)
        elif entry["status"] == "invalid":
            result.invalid.append((*option, entry["detail"]))
    return result
