"""Ubuntu noble's package indexes: which packages an `apt-get install` brings, and their files.

The images' sources are noble, noble-updates and noble-security, main and universe (kolla's
base/ubuntu.sources), plus the Ubuntu Cloud Archive (gazpacho) and a few vendors' repositories,
which are not reachable from here: their packages are taken at noble's own versions (see
`limits()`). The Release file of each suite is fetched once and kept: it pins the indexes,
whose SHA256 is checked against it. apt's choices are modelled as apt makes them for a fresh
install: the newest version of the three suites; Pre-Depends and Depends (and Recommends, unless
`--no-install-recommends`); the first alternative of `a | b` unless another is already there; a
virtual package by a provider already there, or else its most important one.

The distribution's own image (ubuntu:24.04) is taken as noble's `Priority: required` packages
plus apt, and what they depend on; that is what Canonical's minimal OCI image is built from.
"""

from __future__ import annotations

import gzip
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

from tools.imagecheck.debversion import newer
from tools.imagecheck.fetch import FetchError, cache_dir, download

MIRROR = "http://archive.ubuntu.com/ubuntu"
SUITES = ("noble", "noble-updates", "noble-security")
COMPONENTS = ("main", "universe")
BASE_IMAGE_EXTRA = ("apt",)
_PRIORITY = {"required": 0, "important": 1, "standard": 2, "optional": 3, "extra": 4}


@dataclass(frozen=True)
class Package:
    name: str
    version: str
    suite: str
    priority: str
    depends: tuple[tuple[str, ...], ...]  # Pre-Depends and Depends: groups of alternatives
    recommends: tuple[tuple[str, ...], ...]
    provides: tuple[str, ...]
    filename: str  # its .deb under MIRROR


def _release_checksums(release: str) -> dict[str, str]:
    """Path → SHA256 of the SHA256 section of a Release file."""
    section = release.split("\nSHA256:\n", 1)[1]
    sums = {}
    for line in section.splitlines():
        if not line.startswith(" "):
            break
        digest, _size, path = line.split()
        sums[path] = digest
    return sums


def _suite_file(suite: str, path: str, verified: bool = True) -> Path:
    """An index of `suite`, fetched once and checked against the suite's kept Release file.

    The Contents indexes are generated apart from the rest and may lag behind their Release
    (noble-updates' did on 2026-11-24): an unverified one is kept as first downloaded, and
    `unverified()` names it.
    """
    base = cache_dir("ubuntu", suite)
    release = download(f"{MIRROR}/dists/{suite}/Release", base / "Release").read_text()
    sha256 = _release_checksums(release)[path]
    dest = base / path.replace("/", "_")
    url = f"{MIRROR}/dists/{suite}/{path}"
    try:
        return download(url, dest, sha256)
    except FetchError:
        if verified:
            raise
        download(url, dest)
        dest.with_name(dest.name + ".unverified").write_text(f"{sha256} listed in Release\n")
        return dest


def unverified() -> list[str]:
    return sorted(
        f"{p.parent.name}/{p.name.removesuffix('.unverified')}" for p in cache_dir("ubuntu").glob("*/*.unverified")
    )


def release_dates() -> dict[str, str]:
    """When each kept Release file was published: what pins noble-updates and noble-security."""
    dates = {}
    for suite in SUITES:
        release = download(f"{MIRROR}/dists/{suite}/Release", cache_dir("ubuntu", suite) / "Release").read_text()
        match = re.search(r"^Date: (.+)$", release, re.M)
        dates[suite] = match.group(1) if match else "?"
    return dates


def _groups(field: str) -> tuple[tuple[str, ...], ...]:
    groups = []
    for group in field.split(","):
        names = tuple(re.split(r"[\s(:\[]", alt.strip(), maxsplit=1)[0] for alt in group.split("|"))
        if names and names[0]:
            groups.append(names)
    return tuple(groups)


def parse_packages(text: str, suite: str) -> Iterator[Package]:
    for stanza in text.split("\n\n"):
        fields: dict[str, str] = {}
        key = ""
        for line in stanza.splitlines():
            if line.startswith((" ", "\t")):
                fields[key] += line
            elif ":" in line:
                key, _, value = line.partition(":")
                fields[key] = value.strip()
        if "Package" not in fields:
            continue
        depends = ", ".join(v for v in (fields.get("Pre-Depends"), fields.get("Depends")) if v)
        yield Package(
            fields["Package"],
            fields["Version"],
            suite,
            fields.get("Priority", "optional"),
            _groups(depends),
            _groups(fields.get("Recommends", "")),
            tuple(g[0] for g in _groups(fields.get("Provides", ""))),
            fields.get("Filename", ""),
        )


class Archive:
    """The newest version of every package of the suites, and apt's choices among them."""

    def __init__(self, packages: Iterable[Package]) -> None:
        self.packages: dict[str, Package] = {}
        for package in packages:
            known = self.packages.get(package.name)
            if known is None or newer(package.version, known.version):
                self.packages[package.name] = package

    @classmethod
    def noble(cls) -> Archive:
        def read() -> Iterator[Package]:
            for suite in SUITES:
                for component in COMPONENTS:
                    path = _suite_file(suite, f"{component}/binary-amd64/Packages.gz")
                    yield from parse_packages(gzip.decompress(path.read_bytes()).decode(), suite)

        return cls(read())

    @cached_property
    def providers(self) -> dict[str, list[str]]:
        found: dict[str, list[str]] = {}
        for package in self.packages.values():
            for virtual in package.provides:
                found.setdefault(virtual, []).append(package.name)
        for names in found.values():
            names.sort(key=lambda n: (_PRIORITY.get(self.packages[n].priority, 5), n))
        return found

    def base_image(self) -> tuple[set[str], list[str]]:
        required = [p.name for p in self.packages.values() if p.priority == "required"]
        return self.install([*required, *BASE_IMAGE_EXTRA], set(), recommends=False)

    def install(self, names: Iterable[str], installed: set[str], recommends: bool) -> tuple[set[str], list[str]]:
        """What `apt-get install names` adds to `installed`, and the names it could not find.

        The packages asked for are marked first, as apt does, so that a dependency with an
        alternative among them takes that alternative.
        """
        added: set[str] = set()
        missing: list[str] = []
        for name in names:
            real = self._choose((name,), installed | added)
            if real is None:
                missing.append(name)
            elif real not in installed:
                added.add(real)
        queue = sorted(added)
        while queue:
            package = self.packages[queue.pop()]
            for group in package.depends + (package.recommends if recommends else ()):
                chosen = self._choose(group, installed | added)
                if chosen is None:
                    if group in package.depends:
                        missing.append(f"{' | '.join(group)} (for {package.name})")
                elif chosen not in installed and chosen not in added:
                    added.add(chosen)
                    queue.append(chosen)
        return added, sorted(set(missing))

    def _choose(self, alternatives: tuple[str, ...], present: set[str]) -> str | None:
        for name in alternatives:
            if name in present:
                return name
            for provider in self.providers.get(name, ()):
                if provider in present:
                    return provider
        for name in alternatives:
            if name in self.packages:
                return name
            if self.providers.get(name):
                return self.providers[name][0]
        return None


def contents_files(wanted: dict[str, str]) -> dict[str, list[str]]:
    """The files (no leading slash) of each wanted package (`wanted`: package → the suite its
    version comes from), from that suite's Contents index, or another suite's where that one
    does not list the package (a lagging index)."""
    by_suite: dict[str, dict[str, list[str]]] = {suite: {} for suite in SUITES}
    for suite in SUITES:
        found = by_suite[suite]
        with gzip.open(_suite_file(suite, "Contents-amd64.gz", verified=False), "rt", errors="replace") as lines:
            for line in lines:
                path, _, owners = line.rstrip("\n").rpartition(" ")
                for owner in owners.split(","):
                    name = owner.rpartition("/")[2]
                    if name in wanted:
                        found.setdefault(name, []).append(path.rstrip())
    files = {}
    for name, suite in wanted.items():
        order = [suite, *(s for s in reversed(SUITES) if s != suite)]
        files[name] = next((by_suite[s][name] for s in order if name in by_suite[s]), [])
    return files
