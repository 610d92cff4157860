"""Kolla's own recipe of the images: `kolla-build --template-only`, from a pinned, cached install.

kolla's stable/2026.1 branch is its 22.x series (22.0.0 was tagged on it in May 2026; 23.0.0 of
October 2026 belongs to 2026.2); 22.2.0 (2026-09-08) is the newest 2026.1 release on PyPI.
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

from tools.imagecheck.fetch import cache_dir
from tools.realenv.openstack_venv import UV_VERSION

KOLLA_VERSION = "22.2.0"
BASE, BASE_TAG = "ubuntu", "24.04"  # noble: the base of the `2026.1-ubuntu-noble` tags
OPENSTACK_RELEASE = "2026.1"
# kolla and everything it imports, as pip resolved them on 2026-11-24; uv resolves the
# images' Python packages (tools/imagecheck/pypi.py).
TOOL_REQUIREMENTS = (
    f"kolla=={KOLLA_VERSION}",
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


def tool_venv() -> Path:
    """The venv holding the pinned kolla (and uv), built once."""
    base = cache_dir()
    path = base / f"kolla-{KOLLA_VERSION}-{_key(TOOL_REQUIREMENTS, sys.version_info[:2])}"
    with (base / "kolla.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (path / "installed").exists():
            shutil.rmtree(path, ignore_errors=True)
            subprocess.run([sys.executable, "-m", "venv", path], check=True)
            install: list[str | Path] = [path / "bin/python", "-m", "pip", "install", "--quiet", "--no-deps"]
            install += TOOL_REQUIREMENTS
            done = subprocess.run(install, capture_output=True, text=True)
            if done.returncode != 0:
                raise RuntimeError(f"installing kolla {KOLLA_VERSION} failed:\n{done.stdout}{done.stderr}")
            (path / "installed").write_text("\n".join(TOOL_REQUIREMENTS) + "\n")
    return path


def render(images: list[str]) -> dict[str, Rendered]:
    """Every image of `images` and its parents, rendered once per image set (cached)."""
    wanted = sorted(set(images))
    work = cache_dir() / f"kolla-render-{_key(TOOL_REQUIREMENTS, BASE, BASE_TAG, OPENSTACK_RELEASE, wanted)}"
    marker = work / "rendered.json"
    if not marker.exists():
        venv = tool_venv()
        shutil.rmtree(work, ignore_errors=True)
        work.mkdir(parents=True)
        regex = "^(" + "|".join(re.escape(name) for name in wanted) + ")$"
        command: list[str | Path] = [
            venv / "bin/kolla-build",
            "--template-only",
            *("--base", BASE, "--base-tag", BASE_TAG, "--openstack-release", OPENSTACK_RELEASE),
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
            raise KeyError(f"kolla {KOLLA_VERSION} renders no image {current!r}")
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
