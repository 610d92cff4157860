"""Checks one rendered oslo.config file against the real OpenStack release.

Two passes, both in the OpenStack venv:
1. `oslo-config-validator` (the projects' own tool) decides which option names are
   unknown or deprecated. It exits 1 on an unknown option, 0 otherwise (deprecated
   names only fail with --fatal-warnings, which we leave to the caller), and reports
   on stderr through `logging`:
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
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from tools.realenv.namespaces import dynamic_sections, namespaces_for
from tools.realenv.openstack_venv import OpenStackVenv

VALUES_SCRIPT = Path(__file__).with_name("oslo_values.py")

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


def validate(
    venv: OpenStackVenv,
    path: Path,
    namespaces: Iterable[str] | None = None,
    *,
    exclude_groups: Iterable[str] = (),
    group_aliases: Mapping[str, str] | None = None,
) -> ValidationResult:
    """Validate `path`; namespaces default to the table entry for its file name and the venv's release.

    group_aliases maps a dynamically named section to the group whose options it
    takes (cinder's `[lvm]` -> `backend_defaults`); such sections are checked by the
    value pass only, since the validator cannot know their names. By default they
    come from namespaces.dynamic_sections.
    """
    namespaces = tuple(namespaces) if namespaces is not None else namespaces_for(path, venv.release)
    if group_aliases is None:
        group_aliases = dynamic_sections(path, Path(path).read_text())
    aliases = dict(group_aliases)
    excluded = set(exclude_groups)
    ns_args = [arg for ns in namespaces for arg in ("--namespace", ns)]

    cli_args: list[str | Path] = [
        venv.bin("oslo-config-validator"),
        "--input-file",
        path,
        *ns_args,
        *[arg for g in sorted(excluded | set(aliases)) for arg in ("--exclude-group", g)],
    ]
    values_args: list[str | Path] = [
        venv.python,
        VALUES_SCRIPT,
        "--input-file",
        path,
        *ns_args,
        *[arg for s, g in aliases.items() for arg in ("--group-alias", f"{s}={g}")],
    ]
    # Both passes spend seconds importing the projects (cinder: all its drivers), so
    # they run side by side.
    cli, values = [
        subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=venv.env())
        for args in (cli_args, values_args)
    ]
    cli_stderr = cli.communicate()[1]
    values_stdout, values_stderr = values.communicate()
    names = parse_validator_output(cli.returncode, cli_stderr)
    if values.returncode != 0:
        raise RuntimeError(f"oslo_values.py failed on {path}:\n{values_stderr[-3000:]}")
    report = json.loads(values_stdout)

    result = ValidationResult(path, namespaces, deprecated=names.deprecated, unloadable_namespaces=report["unloadable"])
    cli_unknown, cli_ignored = set(names.unknown), set(names.ignored)
    for entry in report["options"]:
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
