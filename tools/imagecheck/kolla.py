"""Kolla's own recipe of the images: `kolla-build --template-only`, from a pinned, cached install.

One kolla per OpenStack release, since kolla branches with it (PyPI JSON API, 2026-11-27):
- kolla's stable/2026.1 branch is its 22.x series (22.0.0 was tagged on it in May 2026; 23.0.0 of
  October 2026 belongs to 2026.2); 22.2.0 (2026-09-08) is the newest 2026.1 release on PyPI.
- stable/2025.2 is the 21.x series (openstack/releases deliverables/flamingo/kolla.yaml; kolla
  trails the release: 21.0.0 came on 2025-11-19); 21.3.0 (2026-09-08) is its newest on PyPI. Its
  requirements are 22.x's (requirements.txt of both branches), so both take one set of pins.
`--template-only` renders every Dockerfile of the images asked for and their parents without a
container engine (it still imports the `docker` library, hence its pin). What the images install
from source comes from kolla's SOURCES table (`kolla/common/sources.py`): each image's project
and its plugins (`<image>-plugin-*`, enabled by default).
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from components.settings.releases import DEFAULT_RELEASE
from tools.imagecheck.fetch import cache_dir
from tools.release_pins import UV_VERSION

KOLLA_VERSIONS = {"2025.2": "21.3.0", "2026.1": "22.2.0"}
# noble: the base of the `<release>-ubuntu-noble` tags of both (kolla/common/config.py's
# DEFAULT_BASE_TAGS, and kolla-ansible's kolla_base_distro_version_default_map).
BASE, BASE_TAG = "ubuntu", "24.04"
# What kolla imports, as pip resolved them on 2026-11-24; uv resolves the images' Python
# packages (tools/imagecheck/pypi.py).
_TOOL_DEPENDENCIES = (
    "docker==7.2.0",
    "certifi==2026.10.18",
    "charset-normalizer==3.5.2",
    "gitdb==4.0.12",
    "GitPython==3.2.1",
    "idna==3.20",
    "Jinja2==3.1.6",
    "MarkupSafe==3.0.4",
    "netaddr==1.3.0",
    "oslo.config==10.7.0",
    "oslo.i18n==6.9.0",
    "pbr==7.1.3",
    "PyYAML==6.0.3",
    "requests==2.34.2",
    "rfc3986==2.0.0",
    "smmap==5.0.3",
    "stevedore==5.10.0",
    "urllib3==2.8.0",
    f"uv=={UV_VERSION}",
)


def tool_requirements(release: str = DEFAULT_RELEASE) -> tuple[str, ...]:
    if release not in KOLLA_VERSIONS:
        raise KeyError(f"no kolla known for release {release!r}; known: {', '.join(KOLLA_VERSIONS)}")
    return (f"kolla=={KOLLA_VERSIONS[release]}", *_TOOL_DEPENDENCIES)


_FROM = re.compile(r"^FROM\s+(\S+)", re.M)


@dataclass(frozen=True)
class Rendered:
    """An image's rendered Dockerfile and the directory its COPY sources live in."""

    name: str
    directory: Path
    parent: str | None  # a Kolla image, or None for the distribution's image
    base_image: str | None  # e.g. ubuntu:24.04, for the root of the chain

    @property
    def dockerfile(self) -> str:
        return (self.directory / "Dockerfile").read_text()


def _key(*parts: object) -> str:
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()[:12]


def tool_venv(release: str = DEFAULT_RELEASE) -> Path:
    """The venv holding the release's pinned kolla (and uv), built once."""
    base = cache_dir()
    requirements = tool_requirements(release)
    path = base / f"kolla-{KOLLA_VERSIONS[release]}-{_key(requirements, sys.version_info[:2])}"
    with (base / "kolla.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (path / "installed").exists():
            shutil.rmtree(path, ignore_errors=True)
            subprocess.run([sys.executable, "-m", "venv", path], check=True)
            install: list[str | Path] = [path / "bin/python", "-m", "pip", "install", "--quiet", "--no-deps"]
            install += requirements
            done = subprocess.run(install, capture_output=True, text=True)
            if done.returncode != 0:
                raise RuntimeError(f"installing {requirements[0]} failed:\n{done.stdout}{done.stderr}")
            (path / "installed").write_text("\n".join(requirements) + "\n")
    return path


def render(images: list[str], release: str = DEFAULT_RELEASE) -> dict[str, Rendered]:
    """Every image of `images` and its parents, as the release's kolla renders them: once per image set (cached)."""
    wanted = sorted(set(images))
    work = cache_dir() / f"kolla-render-{_key(tool_requirements(release), BASE, BASE_TAG, release, wanted)}"
    marker = work / "rendered.json"
    if not marker.exists():
        venv = tool_venv(release)
        shutil.rmtree(work, ignore_errors=True)
        work.mkdir(parents=True)
        regex = "^(" + "|".join(re.escape(name) for name in wanted) + ")$"
        command: list[str | Path] = [
            venv / "bin/kolla-build",
            "--template-only",
            *("--base", BASE, "--base-tag", BASE_TAG, "--openstack-release", release),
            *("--work-dir", work, regex),
        ]
        done = subprocess.run(command, capture_output=True, text=True)
        if done.returncode != 0:
            raise RuntimeError(f"kolla-build --template-only failed:\n{done.stderr[-3000:]}")
        sources = subprocess.run(
            [
                venv / "bin/python",
                "-c",
                "import json; from kolla.common.sources import SOURCES; print(json.dumps(SOURCES))",
            ],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        (work / "sources.json").write_text(sources)
        marker.write_text(json.dumps(wanted))
    return _rendered(work / "docker")


def _rendered(docker: Path) -> dict[str, Rendered]:
    found = {}
    for dockerfile in docker.rglob("Dockerfile"):
        text = dockerfile.read_text()
        match = _FROM.search(text)
        if match is None:
            continue
        origin = match.group(1)
        kolla_parent = origin.startswith("kolla/")
        parent = origin.split("/", 1)[1].split(":")[0] if kolla_parent else None
        name = dockerfile.parent.name
        found[name] = Rendered(name, dockerfile.parent, parent, None if kolla_parent else origin)
    return found


def chain(rendered: dict[str, Rendered], image: str) -> list[Rendered]:
    """The image and its parents, the root first (base, openstack-base, nova-base, nova-compute)."""
    out = []
    current: str | None = image
    while current is not None:
        if current not in rendered:
            raise KeyError(f"kolla renders no image {current!r}")
        out.append(rendered[current])
        current = rendered[current].parent
    return out[::-1]


def sources(rendered: dict[str, Rendered]) -> dict[str, dict[str, str]]:
    """kolla's SOURCES table, as the rendering install has it."""
    some = next(iter(rendered.values()))
    root = some.directory
    while root.name != "docker":
        root = root.parent
    data: dict[str, dict[str, str]] = json.loads((root.parent / "sources.json").read_text())
    return data
