"""Builds, once, the record of what each Kolla image contains, and keeps it in the cache.

Cold, it renders the images with kolla (tools/imagecheck/kolla.py), reads their Dockerfiles
(dockerfile.py), installs their apt packages into noble's indexes (ubuntu.py, alternatives.py)
and resolves their venvs on PyPI (pypi.py, sdist.py): a few minutes and ~250 MB of indexes the
first time. The record is keyed by the image names and everything pinned here; `contents.load`
reads it in about a second.
"""

from __future__ import annotations

import fcntl
import fnmatch
import gzip
import hashlib
import json
import posixpath
import time
from collections.abc import Iterable
from dataclasses import asdict
from pathlib import Path
from typing import Any

from packaging.utils import canonicalize_name

from components.settings import releases
from components.settings.releases import DEFAULT_RELEASE
from tools.imagecheck import kolla, pypi, ubuntu
from tools.imagecheck.alternatives import alternatives
from tools.imagecheck.dockerfile import Recipe, recipe
from tools.imagecheck.fetch import cache_dir
from tools.release_pins import RELEASES

# Bump when what the record holds or how it is derived changes: older records are rebuilt.
RECORD_VERSION = 2


def uca_note(release: str) -> str:
    """kolla's base image adds the Ubuntu Cloud Archive of its release (docker/base/ubuntu.sources of
    stable/2026.1: noble-updates/gazpacho; sources.list.ubuntu of stable/2025.2: noble-updates/flamingo)."""
    archive = f"noble-updates/{releases.of(release).codename.lower()}"
    return (
        f"packages kolla takes from the Ubuntu Cloud Archive ({archive}: Open vSwitch, libvirt, "
        "QEMU, Ceph and their libraries) are taken at noble's own versions: the archive is not reachable here"
    )


def record_path(images: list[str], release: str = DEFAULT_RELEASE) -> Path:
    """The record of `images` (or of a set that includes them) for the release, built when there is none."""
    wanted = sorted(set(images))
    pins = RELEASES[release]
    decisive = [RECORD_VERSION, kolla.tool_requirements(release), pins.pinned, pins.cutoff, ubuntu.SUITES]
    prefix = "contents-" + hashlib.sha256(json.dumps(decisive).encode()).hexdigest()[:12]
    base = cache_dir()
    with (base / "contents.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        for listed in sorted(base.glob(f"{prefix}-*.images.json")):
            if set(wanted) <= set(json.loads(listed.read_text())):
                return listed.with_name(listed.name.replace(".images.json", ".json.gz"))
        key = hashlib.sha256(json.dumps(wanted).encode()).hexdigest()[:8]
        path = base / f"{prefix}-{key}.json.gz"
        record = build(wanted, release)
        partial = path.with_suffix(".part")
        partial.write_bytes(gzip.compress(json.dumps(record, sort_keys=True).encode()))
        partial.replace(path)
        path.with_name(path.name.replace(".json.gz", ".images.json")).write_text(json.dumps(wanted))
    return path


def _dpkg_filters(recipes: dict[str, Recipe], rendered: dict[str, kolla.Rendered]) -> list[tuple[bool, str]]:
    """(include?, pattern) of the dpkg path filters the images copy to /etc/dpkg/dpkg.cfg.d."""
    rules = []
    for name in sorted({n for r in recipes.values() for n in r.chain}):
        directory = rendered[name].directory
        for path in sorted(f for r in recipes.values() for f in r.files if f.startswith("/etc/dpkg/dpkg.cfg.d/")):
            local = directory / posixpath.basename(path)
            if local.exists():
                for line in local.read_text().splitlines():
                    kind, _, pattern = line.partition(" ")
                    if kind in ("path-exclude", "path-include"):
                        rules.append((kind == "path-include", pattern.strip()))
    return list(dict.fromkeys(rules))


def _kept(path: str, rules: list[tuple[bool, str]]) -> bool:
    keep = True
    for include, pattern in rules:
        if fnmatch.fnmatchcase(path, pattern):
            keep = include
    return keep


def _venv_requirements(found: Recipe, venv: str, table: dict[str, dict[str, str]]) -> list[str]:
    return [
        wanted
        for step in found.pip
        if step.venv == venv
        for word in step.requirements
        for wanted in pypi.requirement(word, found.sources, table, step.image)
    ]


def build(wanted: Iterable[str], release: str = DEFAULT_RELEASE) -> dict[str, Any]:
    started = time.monotonic()
    names = sorted(set(wanted))
    rendered = kolla.render(names, release)
    table = kolla.sources(rendered)
    recipes = {name: recipe(kolla.chain(rendered, name)) for name in names}
    archive = ubuntu.Archive.noble()
    base, base_missing = archive.base_image()

    debs: dict[str, set[str]] = {}
    notes: dict[str, list[str]] = {}
    for name, found in recipes.items():
        installed = set(base)
        missing = list(base_missing)
        for step in found.apt:
            added, lost = archive.install(step.packages, installed, step.recommends)
            installed |= added
            missing += lost
        debs[name] = installed
        notes[name] = [f"apt package not in noble's indexes (files unknown): {m}" for m in missing]
        notes[name] += [
            f"adds the apt repository {s}, not reachable here: its packages at noble's versions"
            for s in found.apt_sources
        ]

    union = sorted(set().union(*debs.values()))
    rules = _dpkg_filters(recipes, rendered)
    package_files = ubuntu.contents_files({n: archive.packages[n].suite for n in union})
    packages = {
        n: {"version": archive.packages[n].version, "files": [f for f in package_files[n] if _kept("/" + f, rules)]}
        for n in union
    }
    links = alternatives([archive.packages[n] for n in union])

    venvs: dict[str, dict[str, Any]] = {}
    all_pins: dict[str, str] = {}
    for name, found in recipes.items():
        venvs[name] = {}
        for venv, system_site in found.venvs.items():
            pins = pypi.resolve(_venv_requirements(found, venv, table), release)
            all_pins.update(pins)
            venvs[name][venv] = {"system_site_packages": system_site, "pins": pins}
    dists = pypi.contents(all_pins)

    images: dict[str, dict[str, Any]] = {}
    for name, found in recipes.items():
        files = set(found.files)
        image_venvs = {}
        for venv, data in venvs[name].items():
            members = [dists[d] for d in data["pins"]]
            image_venvs[venv] = {
                "system_site_packages": data["system_site_packages"],
                "dists": [f"{d.name}=={d.version}" for d in members],
            }
            notes[name] += [
                f"{venv}: {d.name} {d.version} has no wheel: only its top-level modules are known"
                for d in members
                if d.partial
            ]
            by_name = {canonicalize_name(d.name): d for d in members}
            for source, inner, dest in found.source_copies:
                project = by_name.get(canonicalize_name(pypi.pypi_name(table[source]["location"])))
                prefix = inner.rstrip("*")
                if project is not None and prefix.endswith("/"):
                    files.update(posixpath.join(dest, d[len(prefix) :]) for d in project.data if d.startswith(prefix))
        images[name] = {
            "chain": found.chain,
            "env": found.env,
            "user": found.user,
            "entrypoint": found.entrypoint,
            "cmd": found.cmd,
            "users": found.users,
            "debs": sorted(debs[name]),
            "venvs": image_venvs,
            "files": sorted(files),
            "dirs": sorted(found.dirs | set(found.venvs)),
            "removed": sorted(found.removed),
            "notes": notes[name],
        }
    return {
        "meta": {
            "kolla": kolla.KOLLA_VERSIONS[release],
            "release": release,
            "release_dates": ubuntu.release_dates(),
            "unverified_indexes": ubuntu.unverified(),
            "uca": uca_note(release),
            "pypi_cutoff": RELEASES[release].cutoff,
            "build_seconds": round(time.monotonic() - started, 1),
        },
        "packages": packages,
        "alternatives": {n: links.get(n, []) for n in union if links.get(n)},
        "dists": {f"{d.name}=={d.version}": asdict(d) for d in dists.values()},
        "images": images,
    }
