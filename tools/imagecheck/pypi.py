"""The Python packages of an image's venv: resolved as Kolla installs them, read from PyPI.

Kolla installs each venv with `pip install -c upper-constraints.txt ...`, the constraints of
openstack/requirements' stable branch of the release, which is not on PyPI and not reachable from
here. What stands in for it is the release's pins (tools/release_pins.py): the OpenStack projects
at the release's pinned versions (where an image's `pip install` names them), everything else as
PyPI stood the day after the release (its cutoff), resolved by uv for noble's Python 3.12 on
x86_64 (glibc 2.39). Each image's venv is resolved from its own Dockerfiles' `pip install` lines.

What a distribution puts in the venv is read from its wheel without downloading it: the zip's
index and entry_points.txt, by HTTP range. A distribution with no wheel for the image is read
from its sdist: its egg-info, setup.cfg, pyproject.toml or the literal arguments of setup.py
(`sdist_contents`), where only top-level modules can be known.
"""

from __future__ import annotations

import configparser
import hashlib
import json
import os
import re
import subprocess
import zipfile
from dataclasses import asdict, dataclass

from packaging.tags import Tag, compatible_tags, cpython_tags
from packaging.utils import canonicalize_name, parse_sdist_filename, parse_wheel_filename

from components.settings.releases import DEFAULT_RELEASE
from tools.imagecheck.fetch import RemoteFile, cache_dir, download, get_json, parallel
from tools.imagecheck.kolla import tool_venv
from tools.imagecheck.sdist import sdist_contents
from tools.release_pins import RELEASES, cache_base

SIMPLE = "https://pypi.org/simple"
PYTHON = (3, 12)  # noble's python3
PLATFORM = "x86_64-manylinux_2_39"  # noble's glibc
_PLATFORMS = [f"manylinux_2_{minor}_x86_64" for minor in range(39, 4, -1)] + [
    "manylinux2014_x86_64",
    "manylinux2010_x86_64",
    "manylinux1_x86_64",
    "linux_x86_64",
]
_TAGS: list[Tag] = [*cpython_tags(PYTHON, platforms=_PLATFORMS), *compatible_tags(PYTHON, "cp312", _PLATFORMS)]
_RANK = {tag: i for i, tag in enumerate(_TAGS)}
# A kolla source repository whose PyPI name differs from the repository's.
_PYPI_NAMES = {"placement": "openstack-placement"}


@dataclass(frozen=True)
class DistContents:
    name: str
    version: str
    modules: tuple[str, ...]  # dotted names it installs (top-level only when `partial`)
    scripts: tuple[str, ...]  # what it puts in the venv's bin
    data: tuple[str, ...]  # other files, relative to the venv (etc/nova/api-paste.ini, ...)
    partial: bool = False  # from an sdist: submodules of `modules` are unknown
    origin: str = "wheel"


def pypi_name(location: str) -> str:
    """'$tarballs_base/openstack/placement/placement-${openstack_branch}.tar.gz' → 'openstack-placement'."""
    repository = location.rstrip("/").split("/")[-2]
    return _PYPI_NAMES.get(repository, repository)


def requirement(word: str, sources: dict[str, str], table: dict[str, dict[str, str]], image: str) -> list[str]:
    """What one word of `pip install` asks PyPI for: a name as written, or the project of a
    kolla source tree (`/nova`, `/keystone[ldap]`), or the image's plugins (`/plugins/*`)."""
    if not word.startswith("/"):
        return [word]
    path, _, extras = word.partition("[")
    if path == "/plugins/*":
        prefix = f"{image}-plugin-"
        return [pypi_name(entry["location"]) for key, entry in table.items() if key.startswith(prefix)]
    source = sources.get(path)
    if source is None or source not in table:
        raise KeyError(f"pip installs {word!r}, which is no kolla source the check knows")
    name = pypi_name(table[source]["location"])
    return [name + (f"[{extras}" if extras else "")]


def _pinned(requirements: list[str], pinned: dict[str, str]) -> list[str]:
    out = []
    for entry in requirements:
        name = re.split(r"[\[=<>!~ ]", entry, maxsplit=1)[0]
        version = pinned.get(name)
        out.append(f"{entry}=={version}" if version and "=" not in entry else entry)
    return out


def resolve(requirements: list[str], release: str = DEFAULT_RELEASE) -> dict[str, str]:
    """Distribution → version of the venv `pip install requirements` makes (cached per set)."""
    release_pins = RELEASES[release]
    wanted = _pinned(sorted(set(requirements)), release_pins.pinned)
    key = hashlib.sha256(json.dumps([wanted, release_pins.cutoff, PYTHON, PLATFORM]).encode()).hexdigest()[:12]
    out = cache_dir("pypi") / f"resolved-{key}.txt"
    if not out.exists():
        venv = tool_venv(release)
        source = out.with_suffix(".in")
        source.write_text("\n".join(wanted) + "\n")
        exempt = [a for name in release_pins.pinned for a in ("--exclude-newer-package", f"{name}=false")]
        command = [
            str(venv / "bin/uv"),
            *("pip", "compile", "--no-config", "--quiet", "--no-header", "--no-annotate"),
            *("--python", str(venv / "bin/python"), "--python-version", ".".join(map(str, PYTHON))),
            *("--python-platform", PLATFORM, "--exclude-newer", release_pins.cutoff, *exempt),
            *(str(source), "-o", str(out.with_suffix(".part"))),
        ]
        env = dict(os.environ, UV_CACHE_DIR=str(cache_base() / "uv-cache"), UV_PYTHON_DOWNLOADS="never")
        done = subprocess.run(command, capture_output=True, text=True, env=env)
        if done.returncode != 0:
            raise RuntimeError(f"uv could not resolve {source}:\n{done.stderr[-3000:]}")
        out.with_suffix(".part").replace(out)
    pins: dict[str, str] = {}
    for line in out.read_text().splitlines():
        if "==" in line and not line.startswith((" ", "#")):
            name, _, version = line.partition("==")
            pins[name.strip()] = version.split(";")[0].strip()
    return pins


def _modules(paths: list[str]) -> set[str]:
    modules: set[str] = set()
    for path in paths:
        parts = path.split("/")
        stem = parts[-1]
        if stem.endswith(".py"):
            stem = stem[:-3]
        elif stem.endswith(".so"):
            stem = stem.split(".")[0]
        else:
            continue
        dotted = [*parts[:-1], stem] if stem != "__init__" else parts[:-1]
        if not dotted or not all(p.isidentifier() for p in dotted):
            continue
        modules.update(".".join(dotted[: i + 1]) for i in range(len(dotted)))
    return modules


def _entry_scripts(text: str) -> set[str]:
    parser = configparser.RawConfigParser(delimiters=("=",))
    parser.optionxform = str  # type: ignore[assignment,method-assign]
    parser.read_string(text)
    return {
        name
        for section in ("console_scripts", "gui_scripts")
        if parser.has_section(section)
        for name in parser[section]
    }


def wheel_contents(name: str, version: str, url: str) -> DistContents:
    with zipfile.ZipFile(RemoteFile(url)) as wheel:
        names = wheel.namelist()
        dist_info = next(n.split("/")[0] for n in names if n.split("/")[0].endswith(".dist-info"))
        entry = f"{dist_info}/entry_points.txt"
        scripts = _entry_scripts(wheel.read(entry).decode()) if entry in names else set()
    code, data = [], []
    for path in names:
        parts = path.split("/")
        if parts[0].endswith(".dist-info") or path.endswith("/"):
            continue
        if parts[0].endswith(".data") and len(parts) > 2:
            kind, rest = parts[1], "/".join(parts[2:])
            if kind in ("purelib", "platlib"):
                code.append(rest)
            elif kind == "scripts":
                scripts.add(parts[-1])
            elif kind == "data":
                data.append(rest)
        else:
            code.append(path)
    return DistContents(name, version, tuple(sorted(_modules(code))), tuple(sorted(scripts)), tuple(sorted(data)))


def _best_file(name: str, version: str) -> tuple[str, str, str | None]:
    """('wheel' or 'sdist', url, sha256) of the file pip would install for noble's Python."""
    index = get_json(f"{SIMPLE}/{name}/", "application/vnd.pypi.simple.v1+json")
    wheels, sdists = [], []
    for entry in index["files"]:
        filename = entry["filename"]
        try:
            if filename.endswith(".whl"):
                _, wheel_version, _, tags = parse_wheel_filename(filename)
                rank = min((_RANK[t] for t in tags if t in _RANK), default=None)
                if str(wheel_version) == version and rank is not None:
                    wheels.append((rank, entry))
            elif filename.endswith((".tar.gz", ".zip")) and str(parse_sdist_filename(filename)[1]) == version:
                sdists.append(entry)
        except ValueError:
            continue
    if wheels:
        entry = min(wheels, key=lambda pair: pair[0])[1]
        return "wheel", entry["url"], entry.get("hashes", {}).get("sha256")
    if sdists:
        return "sdist", sdists[0]["url"], sdists[0].get("hashes", {}).get("sha256")
    raise LookupError(f"PyPI has no file of {name} {version} for Python 3.12 on x86_64")


def _read(pin: tuple[str, str]) -> DistContents:
    name, version = pin
    kind, url, sha256 = _best_file(name, version)
    if kind == "wheel":
        return wheel_contents(name, version, url)
    archive = download(url, cache_dir("pypi", "sdists") / url.rsplit("/", 1)[-1], sha256)
    return sdist_contents(name, version, archive)


def contents(pins: dict[str, str]) -> dict[str, DistContents]:
    """What each distribution of `pins` installs (cached per name and version)."""
    store = cache_dir("pypi") / "contents.json"
    known: dict[str, dict[str, object]] = json.loads(store.read_text()) if store.exists() else {}
    todo = sorted({(canonicalize_name(n), v) for n, v in pins.items()} - {tuple(k.split("==")) for k in known})
    if todo:
        for found in parallel(_read, todo):
            known[f"{found.name}=={found.version}"] = asdict(found)
        store.write_text(json.dumps(known, sort_keys=True))
    out = {}
    for name, version in pins.items():
        record = known[f"{canonicalize_name(name)}=={version}"]
        out[str(name)] = DistContents(**{k: tuple(v) if isinstance(v, list) else v for k, v in record.items()})  # type: ignore[arg-type]
    return out
