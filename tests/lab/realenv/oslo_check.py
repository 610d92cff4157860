"""Both checks of many oslo.config files that share one namespace list; runs INSIDE the OpenStack venv.

Importing a project's namespaces costs seconds of CPU (cinder: all its drivers), so one process
loads them once and checks every file given:
1. names: oslo.config's own validator (oslo_config/validator.py, what `oslo-config-validator`
   runs): its `_validate` on each file, fed the sample data that its namespace branch would build
   (generator._list_opts -> _get_groups -> _generate_machine_readable_data), built once here. Its
   log lines are captured per file, formatted as the tool's `logging.basicConfig` prints them, so
   the caller reads them as it reads the tool's stderr.
2. values: oslo_values.check_file, each file in a ConfigOpts of its own.

Standard library and OpenStack packages only: it must not import the project.
Usage: python oslo_check.py < {"namespaces": [...], "files": [{"path", "exclude_groups", "aliases"}]}
Prints one JSON object on stdout: {"unloadable": {...}, "names_error": str | null,
"files": [{"returncode": int, "log": str, "values": {...} | null, "values_error": str | null}]}.
"""

import io
import json
import logging
import sys
import traceback
from typing import Any

import oslo_values
from oslo_config import cfg, generator, validator

# The validator's namespace branch lists the opts again on every call; its --opt-data branch asks
# this function for the data, so it gets the data built once.
_OPT_DATA = "(built once by oslo_check.py)"


def _validator_conf(args: list[str]) -> cfg.ConfigOpts:
    """A ConfigOpts as oslo-config-validator's main() parses its command line.

    No default config files: the tool would also read an oslo-config-validator.conf from /etc or
    ~, which no machine here has and no test wants.
    """
    conf = cfg.ConfigOpts()
    validator._register_cli_opts(conf)
    conf(args, default_config_files=[], default_config_dirs=[])
    return conf


def build_opt_data(namespaces: list[str], first_file: str) -> dict[str, Any]:
    conf = _validator_conf(["--input-file", first_file, *[a for ns in namespaces for a in ("--namespace", ns)]])
    conf.register_opts(validator._validator_opts)
    groups = generator._get_groups(generator._list_opts(conf.namespace))
    return generator._generate_machine_readable_data(groups, conf)


def check_names(path: str, exclude_groups: list[str], log: logging.StreamHandler) -> tuple[int, str]:
    """oslo-config-validator's exit code and log on one file."""
    captured = io.StringIO()
    log.setStream(captured)
    try:
        excluded = [a for g in exclude_groups for a in ("--exclude-group", g)]
        conf = _validator_conf(["--input-file", path, "--opt-data", _OPT_DATA, *excluded])
        returncode = validator._validate(conf)
    except Exception:  # the tool would crash: exit 1 with the traceback, as the caller expects
        returncode = 1
        captured.write(traceback.format_exc())
    finally:
        log.setStream(sys.stderr)
    return returncode, captured.getvalue()


def main() -> int:
    request = json.load(sys.stdin)
    namespaces: list[str] = request["namespaces"]
    files: list[dict[str, Any]] = request["files"]
    # Imported projects may print; keep stdout for the one JSON document.
    out, sys.stdout = sys.stdout, sys.stderr
    # What the tool's logging.basicConfig(level=INFO) sets up; the stream is swapped per file.
    log = logging.StreamHandler(sys.stderr)
    log.setFormatter(logging.Formatter(logging.BASIC_FORMAT))
    logging.root.addHandler(log)
    logging.root.setLevel(logging.INFO)

    groups, unloadable = oslo_values.load_namespaces(namespaces)
    names_error, opt_data = None, {}
    try:
        opt_data = build_opt_data(namespaces, files[0]["path"]) if files else {}
    except Exception:  # the tool would crash on every file: the caller reports it
        names_error = traceback.format_exc()
    validator.load_opt_data = lambda conf: opt_data

    results = []
    for entry in files:
        result: dict[str, Any] = {"returncode": None, "log": "", "values": None, "values_error": None}
        if names_error is None:
            result["returncode"], result["log"] = check_names(entry["path"], entry["exclude_groups"], log)
        try:
            result["values"] = oslo_values.check_file(entry["path"], groups, unloadable, entry["aliases"])
        except Exception:
            result["values_error"] = traceback.format_exc()
        results.append(result)
    json.dump({"unloadable": unloadable, "names_error": names_error, "files": results}, out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
