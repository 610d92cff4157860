"""What a Kolla image contains, as the check and the lab ask it: files, commands, Python modules.

`load(images, release)` returns an `ImageContents` per image name of that release, from the record
tools/imagecheck/build.py writes once (cached). Paths are compared as the image resolves them: Ubuntu noble has merged
/usr (/bin, /sbin and /lib are links into /usr) and /var/run is /run.

`image_software(images)` is the lab's view: per image, the commands on its PATH (name → path)
and the distributions of its venv, so that a lab container can be held to its image's software.
"""

from __future__ import annotations

import gzip
import importlib.util
import json
import posixpath
import sys
from collections.abc import Iterable
from dataclasses import dataclass, field
from fnmatch import fnmatch
from functools import cache, cached_property
from typing import Any

from components.settings.releases import DEFAULT_RELEASE
from tools.imagecheck.pypi import _modules

PYTHON_VERSION = "3.12"
_MERGED = ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
# Shipped apart from the interpreter on Ubuntu (python3-tk, python3-gdbm): not taken as present.
_SEPARATE_C_MODULES = {"_tkinter", "_gdbm"}
# Modules of Python 3.11 (the host's) that 3.12 removed.
_REMOVED_IN_312 = {"distutils", "imp", "asynchat", "asyncore", "smtpd"}
VENV_PYTHONS = ("python", "python3", f"python{PYTHON_VERSION}")


def canonical(path: str) -> str:
    """The path as noble resolves it: /bin/sh is /usr/bin/sh, /var/run/x is /run/x."""
    path = posixpath.normpath(path)
    if path.startswith("//"):
        path = path[1:]
    for merged in _MERGED:
        if path == merged or path.startswith(merged + "/"):
            return "/usr" + path
    if path == "/var/run" or path.startswith("/var/run/"):
        return path[4:]
    return path


@cache
def c_modules() -> frozenset[str]:
    """The standard library's C modules: Ubuntu builds most into its python3.12 or ships them in
    lib-dynload; the host's list of them stands in for the part built in."""
    found = set()
    for name in sys.stdlib_module_names:
        try:
            spec = importlib.util.find_spec(name)
        except (ImportError, ValueError):
            continue
        origin = spec.origin if spec else None
        if origin in ("built-in",) or (origin or "").endswith(".so"):
            found.add(name)
    return frozenset(found - _SEPARATE_C_MODULES - _REMOVED_IN_312)


@dataclass(frozen=True)
class ModuleIndex:
    """What `import x.y` can find: every dotted module, and the distributions known only by
    their top-level names (from sdists)."""

    modules: frozenset[str]
    partial: frozenset[str] = frozenset()

    def has(self, dotted: str) -> bool:
        return dotted in self.modules or dotted.split(".")[0] in self.partial


@dataclass
class Venv:
    path: str
    system_site_packages: bool
    distributions: dict[str, str]  # name → version
    modules: frozenset[str]
    partial: frozenset[str]
    scripts: frozenset[str]


@dataclass
class ImageContents:
    name: str
    chain: tuple[str, ...]
    env: dict[str, str]
    user: str | None
    packages: dict[str, str]  # Debian package → version
    files: frozenset[str]  # canonical paths of files and links
    venvs: dict[str, Venv]
    notes: tuple[str, ...] = ()  # what the check cannot see in this image
    extra_dirs: frozenset[str] = field(default_factory=frozenset)
    entrypoint: tuple[str, ...] = ()
    cmd: tuple[str, ...] = ()

    @property
    def path_env(self) -> str:
        return self.env.get("PATH", "")

    @cached_property
    def dirs(self) -> frozenset[str]:
        found = set(self.extra_dirs)
        for path in self.files:
            while path not in ("/", "") and path not in found:
                path = posixpath.dirname(path)
                found.add(path)
        found.add("/")
        return frozenset(found)

    def exists(self, path: str) -> bool:
        path = canonical(path)
        return path in self.files or path in self.dirs

    def is_dir(self, path: str) -> bool:
        return canonical(path) in self.dirs

    def which(self, command: str, path_env: str | None = None) -> str | None:
        """Where a command is found: an absolute path that exists, or the first PATH entry that has it."""
        if "/" in command:
            return command if canonical(command) in self.files else None
        for directory in (path_env if path_env is not None else self.path_env).split(":"):
            if directory and canonical(posixpath.join(directory, command)) in self.files:
                return posixpath.join(directory, command)
        return None

    def executables(self, path_env: str | None = None) -> dict[str, str]:
        """Every command name on PATH → the path a shell would run."""
        found: dict[str, str] = {}
        directories = [d for d in (path_env if path_env is not None else self.path_env).split(":") if d]
        for directory in directories:
            prefix = canonical(directory) + "/"
            for path in self.files:
                if path.startswith(prefix) and "/" not in path[len(prefix) :]:
                    found.setdefault(path[len(prefix) :], posixpath.join(directory, path[len(prefix) :]))
        return found

    def venv_of(self, python: str) -> Venv | None:
        directory = posixpath.dirname(canonical(python))
        return next((v for v in self.venvs.values() if canonical(v.path + "/bin") == directory), None)

    @cached_property
    def _python_files(self) -> tuple[list[str], list[str]]:
        """Files of the distribution's Python, relative to sys.path entries: (stdlib, dist-packages)."""
        stdlib_root = f"usr/lib/python{PYTHON_VERSION}/"
        dist_roots = (f"usr/lib/python{PYTHON_VERSION}/dist-packages/", "usr/lib/python3/dist-packages/")
        stdlib, dist = [], []
        for path in self.files:
            inner = path[1:]
            root = next((r for r in dist_roots if inner.startswith(r)), None)
            if root is not None:
                dist.append(inner[len(root) :])
            elif inner.startswith(stdlib_root + "lib-dynload/"):
                stdlib.append(inner[len(stdlib_root + "lib-dynload/") :])
            elif inner.startswith(stdlib_root) and "/site-packages/" not in inner:
                stdlib.append(inner[len(stdlib_root) :])
        return stdlib, dist

    @cached_property
    def stdlib_modules(self) -> frozenset[str]:
        return frozenset(_modules(self._python_files[0])) | c_modules()

    @cached_property
    def system_modules(self) -> ModuleIndex:
        """What /usr/bin/python3 imports: the standard library and the python3-* packages."""
        return ModuleIndex(self.stdlib_modules | frozenset(_modules(self._python_files[1])))

    def modules_for(self, python: str) -> ModuleIndex:
        """What a Python interpreter of this image imports: its venv's, the standard library and,
        when the venv sees them (--system-site-packages) or it is the system's, the python3-* packages."""
        venv = self.venv_of(python)
        if venv is None:
            return self.system_modules
        base = self.system_modules.modules if venv.system_site_packages else self.stdlib_modules
        return ModuleIndex(venv.modules | base, venv.partial)

    def python_path(self, python: str) -> str | None:
        return self.which(python)


@dataclass(frozen=True)
class ImageSoftware:
    """The lab's view of an image."""

    executables: dict[str, str]  # command name → path in the image, over its PATH
    distributions: dict[str, str]  # the venv's distributions → version (empty without a venv)


def from_record(record: dict[str, Any]) -> dict[str, ImageContents]:
    """The images of a record written by tools/imagecheck/build.py."""
    package_files = {n: [canonical("/" + f) for f in p["files"]] for n, p in record["packages"].items()}
    alternatives = record["alternatives"]
    dists = record["dists"]
    images = {}
    for name, image in record["images"].items():
        files: set[str] = set()
        for package in image["debs"]:
            files.update(package_files.get(package, ()))
        for package in image["debs"]:
            for link, target in alternatives.get(package, ()):
                if canonical(target) in files:
                    files.add(canonical(link))
        venvs = {}
        for path, venv in image["venvs"].items():
            members = [dists[key] for key in venv["dists"]]
            scripts = frozenset(s for d in members for s in d["scripts"])
            files.update(canonical(f"{path}/bin/{s}") for s in scripts | set(VENV_PYTHONS))
            files.update(canonical(f"{path}/{data}") for d in members for data in d["data"])
            venvs[path] = Venv(
                path,
                venv["system_site_packages"],
                {d["name"]: d["version"] for d in members},
                frozenset(m for d in members for m in d["modules"]),
                frozenset(m for d in members if d["partial"] for m in d["modules"]),
                scripts,
            )
        removed = [canonical(p) for p in image["removed"]]
        files = {f for f in files if not _removed(f, removed)}
        files.update(canonical(f) for f in image["files"])  # what the Dockerfiles made, last
        images[name] = ImageContents(
            name,
            tuple(image["chain"]),
            image["env"],
            image["user"],
            {p: record["packages"][p]["version"] for p in image["debs"] if p in record["packages"]},
            frozenset(files),
            venvs,
            tuple(image["notes"]),
            frozenset(canonical(d) for d in image["dirs"]),
            tuple(image["entrypoint"]),
            tuple(image["cmd"]),
        )
    return images


def _removed(path: str, removed: Iterable[str]) -> bool:
    return any(path == r or path.startswith(r + "/") or ("*" in r and fnmatch(path, r)) for r in removed)


@cache
def _record(images: frozenset[str], release: str) -> dict[str, Any]:
    from tools.imagecheck.build import record_path  # it builds on this module's neighbours

    path = record_path(sorted(images), release)
    record: dict[str, Any] = json.loads(gzip.decompress(path.read_bytes()))
    return record


def load(images: Iterable[str], release: str = DEFAULT_RELEASE) -> dict[str, ImageContents]:
    """The contents of each of `images` (Kolla image names) of the release, built and cached the first time."""
    wanted = frozenset(images)
    return {name: image for name, image in from_record(_record(wanted, release)).items() if name in wanted}


def limits(images: Iterable[str], release: str = DEFAULT_RELEASE) -> list[str]:
    """What the record of `images` could not see, for the report."""
    wanted = frozenset(images)
    record = _record(wanted, release)
    meta = record["meta"]
    found = [
        f"kolla {meta['kolla']} (--template-only); Ubuntu indexes as published {meta['release_dates']}",
        meta["uca"],
        f"Python packages as PyPI stood on {meta['pypi_cutoff']} "
        f"(standing in for upper-constraints of stable/{release})",
    ]
    found += [
        f"{index} did not match its Release file; kept as first downloaded" for index in meta["unverified_indexes"]
    ]
    by_note: dict[str, list[str]] = {}
    for name, image in sorted(record["images"].items()):
        if name not in wanted:
            continue
        for note in image["notes"]:
            by_note.setdefault(note, []).append(name)
    found += [f"{note} [{', '.join(names)}]" for note, names in by_note.items()]
    return found


def image_software(images: Iterable[str], release: str = DEFAULT_RELEASE) -> dict[str, ImageSoftware]:
    """Per Kolla image name of the release: the commands on its PATH and its venv's distributions."""
    out = {}
    for name, contents in load(images, release).items():
        venv = next((v for v in contents.venvs.values() if contents.path_env.startswith(v.path + "/bin")), None)
        out[name] = ImageSoftware(contents.executables(), dict(venv.distributions) if venv else {})
    return out
