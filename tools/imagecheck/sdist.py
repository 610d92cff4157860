"""What a source distribution installs, read without building it.

pip builds a wheel from the sdist; building needs compilers and headers (uWSGI, psycopg2), so
the check reads what the sdist declares instead: its egg-info (top_level.txt, entry_points.txt),
setup.cfg, pyproject.toml, the literal arguments of setup.py's `setup()` call, and failing all
of those the packages at its root. Only top-level modules are known this way (`partial`).
"""

from __future__ import annotations

import ast
import configparser
import tarfile
import tomllib
import zipfile
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tools.imagecheck.pypi import DistContents

# What no metadata of an sdist lists: uWSGI's setup.py compiles the server and installs the
# binary into the scripts directory itself (its `patch_bin_path`, bin_name `uwsgi`).
BUILT_SCRIPTS = {"uwsgi": ("uwsgi",)}


def _members(archive: Path) -> dict[str, bytes]:
    """Small text members of the archive, by path without the leading directory."""
    out: dict[str, bytes] = {}
    wanted = ("top_level.txt", "entry_points.txt", "setup.cfg", "pyproject.toml", "setup.py", "__init__.py")
    if archive.name.endswith(".zip"):
        with zipfile.ZipFile(archive) as z:
            for name in z.namelist():
                if name.endswith(wanted) or (name.count("/") == 1 and name.endswith(".py")):
                    out[name.split("/", 1)[-1]] = z.read(name)
        return out
    with tarfile.open(archive) as tar:
        for member in tar.getmembers():
            name = member.name
            if member.isfile() and (name.endswith(wanted) or (name.count("/") == 1 and name.endswith(".py"))):
                extracted = tar.extractfile(member)
                if extracted is not None:
                    out[name.split("/", 1)[-1]] = extracted.read()
    return out


def _entry_points(text: str) -> set[str]:
    parser = configparser.RawConfigParser(delimiters=("=",))
    parser.optionxform = str  # type: ignore[assignment,method-assign]
    parser.read_string(text)
    return {n for s in ("console_scripts", "gui_scripts") if parser.has_section(s) for n in parser[s]}


def _setup_cfg(text: str) -> tuple[set[str], set[str]]:
    parser = configparser.RawConfigParser()
    parser.read_string(text)
    modules: set[str] = set()
    scripts: set[str] = set()
    for section, key in (("files", "packages"), ("options", "packages"), ("options", "py_modules")):
        if parser.has_option(section, key):
            modules.update(line.strip().split(".")[0] for line in parser.get(section, key).splitlines() if line.strip())
    if parser.has_option("entry_points", "console_scripts"):
        lines = parser.get("entry_points", "console_scripts").splitlines()
        scripts.update(line.split("=")[0].strip() for line in lines if "=" in line)
    modules.discard("find:")
    return modules, scripts


def _setup_py(text: str) -> tuple[set[str], set[str]]:
    """Literal `packages`, `py_modules`, `ext_modules`, `scripts` and `entry_points` of setup()."""
    modules: set[str] = set()
    scripts: set[str] = set()
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return modules, scripts
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and getattr(node.func, "id", getattr(node.func, "attr", "")) == "setup"):
            continue
        for keyword in node.keywords:
            value = keyword.value
            if keyword.arg in ("packages", "py_modules") and isinstance(value, ast.List | ast.Tuple):
                modules.update(str(e.value).split(".")[0] for e in value.elts if isinstance(e, ast.Constant))
            elif keyword.arg == "ext_modules" and isinstance(value, ast.List):
                for element in value.elts:
                    if isinstance(element, ast.Call) and element.args and isinstance(element.args[0], ast.Constant):
                        modules.add(str(element.args[0].value).split(".")[0])
            elif keyword.arg == "scripts" and isinstance(value, ast.List):
                scripts.update(Path(str(e.value)).name for e in value.elts if isinstance(e, ast.Constant))
            elif keyword.arg == "entry_points" and isinstance(value, ast.Dict):
                for k, v in zip(value.keys, value.values, strict=True):
                    if isinstance(k, ast.Constant) and k.value == "console_scripts" and isinstance(v, ast.List):
                        scripts.update(
                            str(e.value).split("=")[0].strip() for e in v.elts if isinstance(e, ast.Constant)
                        )
    return modules, scripts


def sdist_contents(name: str, version: str, archive: Path) -> DistContents:
    from tools.imagecheck.pypi import DistContents

    members = _members(archive)
    modules: set[str] = set()
    scripts: set[str] = set(BUILT_SCRIPTS.get(name, ()))
    for path, data in members.items():
        text = data.decode(errors="replace")
        if path.endswith(".egg-info/top_level.txt"):
            modules.update(line.strip() for line in text.splitlines() if line.strip())
        elif path.endswith(".egg-info/entry_points.txt"):
            scripts |= _entry_points(text)
    if "setup.cfg" in members:
        found_modules, found_scripts = _setup_cfg(members["setup.cfg"].decode(errors="replace"))
        modules |= found_modules
        scripts |= found_scripts
    if "pyproject.toml" in members:
        project = tomllib.loads(members["pyproject.toml"].decode(errors="replace")).get("project", {})
        scripts.update(project.get("scripts", {}))
    if "setup.py" in members:
        found_modules, found_scripts = _setup_py(members["setup.py"].decode(errors="replace"))
        modules |= found_modules
        scripts |= found_scripts
    if not modules:  # the packages and modules at its root, or under src/
        for path in members:
            parts = path.split("/")
            if parts[-1] == "__init__.py" and (len(parts) == 2 or (parts[0] == "src" and len(parts) == 3)):
                modules.add(parts[-2])
            elif len(parts) == 1 and path.endswith(".py") and path not in ("setup.py", "conftest.py"):
                modules.add(path[:-3])
    return DistContents(
        name, version, tuple(sorted(m for m in modules if m.isidentifier())), tuple(sorted(scripts)), (), True, "sdist"
    )
