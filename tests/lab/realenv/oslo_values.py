"""Value check for one oslo.config file; runs INSIDE the OpenStack virtualenv.

oslo-config-validator only compares option *names* with the namespaces: it accepts
`max_retries = many`. oslo.config raises ConfigFileValueError only when a value is
read, so this script registers the namespaces' options and reads every option the
file sets. It also reports namespaces that are not installed or fail to load, which
the validator silently ignores, and registers keystoneauth plugin options for
sections that set `auth_type`: keystoneauth registers those at runtime, so the
generator's sample data, and with it the validator, lacks them (it skips
[keystone_authtoken] entirely for that reason).

Standard library and OpenStack packages only: it must not import the project.
Usage: python oslo_values.py --input-file F --namespace N... [--group-alias S=G...]
Prints one JSON object on stdout.
"""

import argparse
import json
import sys
from collections.abc import Iterable
from importlib.metadata import entry_points
from typing import Any

from oslo_config import cfg

AUTH_TYPE_OPTIONS = ("auth_type", "auth_plugin")


def _group_name(group: Any) -> str:
    if isinstance(group, cfg.OptGroup):
        return group.name
    return group or "DEFAULT"


def load_namespaces(
    names: Iterable[str],
) -> tuple[dict[str, list[cfg.Opt]], dict[str, str]]:
    """Returns options per group, and namespace -> reason for those not loaded."""
    available = {ep.name: ep for ep in entry_points(group="oslo.config.opts")}
    groups: dict[str, list[cfg.Opt]] = {}
    unloadable: dict[str, str] = {}
    for name in names:
        if name not in available:
            unloadable[name] = "no 'oslo.config.opts' entry point of that name is installed"
            continue
        try:
            listed = list(available[name].load()())
        except Exception as exc:  # whatever the import raises is the answer
            unloadable[name] = f"{type(exc).__name__}: {exc}"
            continue
        for group, opts in listed:
            groups.setdefault(_group_name(group), []).extend(opts)
    return groups, unloadable


class Registry:
    """A ConfigOpts plus the index from names as written in a file to options."""

    def __init__(self) -> None:
        self.conf = cfg.ConfigOpts()
        self.conflicts: list[str] = []
        # (section, name as written) -> (group, dest, source); deprecated names
        # included; the first registration wins.
        self.index: dict[tuple[str, str], tuple[str, str, str]] = {}

    def register(self, group: str, opts: Iterable[cfg.Opt], source: str = "namespace") -> None:
        for opt in opts:
            try:
                self.conf.register_opt(opt, group=None if group == "DEFAULT" else group)
            except cfg.DuplicateOptError:
                # Two namespaces define one option differently; the first wins, as
                # in the generator's sample data.
                self.conflicts.append(f"{group}/{opt.dest}")
                continue
            for name in (opt.name, opt.dest):
                self.index.setdefault((group, name), (group, opt.dest, source))
            for old in opt.deprecated_opts:
                self.index.setdefault((old.group or group, old.name), (group, opt.dest, source))

    def read(self, group: str, dest: str) -> object:
        return self.conf[dest] if group == "DEFAULT" else self.conf[group][dest]


def read_sections(path: str) -> dict[str, dict[str, list[str]]]:
    sections: dict[str, dict[str, list[str]]] = {}
    cfg.ConfigParser(path, sections).parse()
    return sections


def check(path: str, namespaces: list[str], aliases: dict[str, str]) -> dict[str, Any]:
    groups, unloadable = load_namespaces(namespaces)
    return check_file(path, groups, unloadable, aliases)


def check_file(
    path: str, groups: dict[str, list[cfg.Opt]], unloadable: dict[str, str], aliases: dict[str, str]
) -> dict[str, Any]:
    """The value check of one file against namespaces loaded once (load_namespaces); a ConfigOpts of its own."""
    sections = read_sections(path)
    registry = Registry()
    # Parse first: the "oslo.config" namespace lists --config-file and friends, which
    # would clash with the ones ConfigOpts registers when called. Options registered
    # afterwards still read their values from the parsed file.
    registry.conf(
        args=["--config-file", path],
        project="realenv-check",
        default_config_files=[],
        default_config_dirs=[],
        use_env=False,
        validate_default_values=False,
    )
    for group, opts in groups.items():
        registry.register(group, opts)
    for section, template in aliases.items():
        registry.register(section, groups.get(template, []))
    for section, values in sections.items():
        auth_type = next((values[k][-1] for k in AUTH_TYPE_OPTIONS if k in values), None)
        if auth_type:
            # What keystoneauth registers at runtime in a section the service loads
            # its credentials from (load_auth_from_conf_options).
            from keystoneauth1 import loading

            plugin_opts = loading.get_auth_common_conf_options() + loading.get_auth_plugin_conf_options(auth_type)
            registry.register(section, plugin_opts, source="auth-plugin")
    results = []
    for section, values in sections.items():
        for name in values:
            target = registry.index.get((section, name))
            if target is None:
                results.append({"section": section, "name": name, "status": "unregistered"})
                continue
            group, dest, source = target
            try:
                registry.read(group, dest)
            except (cfg.ConfigFileValueError, ValueError) as exc:
                # Drop the "Value for option X from LocationInfo(...)" preamble.
                detail = str(exc).split(" is not valid: ", 1)[-1]
                results.append(
                    {"section": section, "name": name, "status": "invalid", "source": source, "detail": detail}
                )
                continue
            results.append({"section": section, "name": name, "status": "ok", "source": source})
    return {"unloadable": unloadable, "conflicts": registry.conflicts, "options": results}


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--input-file", required=True)
    parser.add_argument("--namespace", action="append", default=[])
    parser.add_argument("--group-alias", action="append", default=[], metavar="SECTION=GROUP")
    args = parser.parse_args(argv)
    aliases = dict(item.split("=", 1) for item in args.group_alias)
    # Imported projects may print; keep stdout for the one JSON document.
    out, sys.stdout = sys.stdout, sys.stderr
    result = check(args.input_file, args.namespace, aliases)
    json.dump(result, out)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
