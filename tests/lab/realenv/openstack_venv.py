"""Separate, cached virtualenvs, one per OpenStack release the program deploys.

The OpenStack projects must never enter the program's own environment, so they live
in their own venv, built once per release and requirement set and reused (keyed by a hash
of everything that decides its contents). Build one ahead of the tests with
`python -m tests.lab.realenv.openstack_venv [--release 2025.2 | --all]` (default: the stacks' release).
"""

import argparse
import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from components.settings.releases import DEFAULT_RELEASE
from tools.release_pins import RELEASES, UV_VERSION, cache_base

# Not pulled in by the services, but needed to run them here: PyMySQL for the
# mysql+pymysql:// URLs; uWSGI, which the images run and the program configures
# (*-uwsgi.ini), built from its sdist (needs gcc and Python headers); python-memcached
# and pymemcache for the memcache backends of oslo.cache and keystonemiddleware (pymemcache
# also Horizon's Django cache), and python-binary-memcached, the client both take for memcached
# on TLS (oslo_cache/backends/memcache_pool.py, keystonemiddleware/auth_token/_cache.py), as
# Kolla's openstack-base image installs it (docker/openstack-base/Dockerfile.j2);
# libvirt-python, which Kolla takes from the distribution (python3-libvirt) and nova-compute
# imports, built from its sdist against Debian's libvirt-dev.
EXTRA = ("PyMySQL", "uWSGI", "python-memcached", "pymemcache", "python-binary-memcached", "libvirt-python")
MARKER = "openstack-venv.json"
# What Kolla's Dockerfiles change in the installed virtualenv (docker/horizon/Dockerfile.j2):
# Horizon reads its settings from /etc/openstack-dashboard through this link. Bump
# LAYOUT when the list changes, so cached venvs are rebuilt.
IMAGE_LINKS = {
    "openstack_dashboard/local/local_settings.py": "/etc/openstack-dashboard/local_settings.py",
    # Ceph's Python bindings, which Kolla's images take from the distribution (python3-rados and
    # python3-rbd; Ceph publishes no wheels) and glance_store, os-brick, cinder's RBD and backup
    # drivers and nova's RBD image backend import: Debian 12's compiled modules (CPython 3.11's ABI,
    # as the venv's interpreter) and their egg-info, linked one by one, never the whole dist-packages.
    **{
        name: f"/usr/lib/python3/dist-packages/{name}"
        for module in ("rados", "rbd")
        for name in (f"{module}.cpython-311-x86_64-linux-gnu.so", f"{module}-2.0.0.egg-info")
    },
}
# 2: built relocatable; 3: with bytecode; 4: with Ceph's rados and rbd modules
LAYOUT = 4


@dataclass(frozen=True)
class VenvRecipe:
    """What decides a cached virtualenv's contents: its pins, the date that stands in for
    upper-constraints, and what is changed after the install. Built by ensure_built()."""

    name: str  # the cache directory's prefix, e.g. openstack-venv-2026.1
    pinned: dict[str, str]  # taken at these versions even when newer than the cutoff
    cutoff: str  # every other package as PyPI stood at this instant
    extra: tuple[str, ...] = ()  # unpinned packages installed beside the pins
    links: dict[str, str] = field(default_factory=dict)  # site-packages path → symlink target
    layout: int = 1  # bumped when `links` changes

    def requirements(self) -> list[str]:
        return [f"{name}=={version}" for name, version in self.pinned.items()] + list(self.extra)

    def cache_key(self) -> str:
        decisive = {
            "requirements": self.requirements(),
            "cutoff": self.cutoff,
            "uv": UV_VERSION,
            "python": f"{sys.version_info.major}.{sys.version_info.minor}",
            "layout": self.layout,
        }
        return hashlib.sha256(json.dumps(decisive, sort_keys=True).encode()).hexdigest()[:12]


def recipe(release: str) -> VenvRecipe:
    """The venv recipe of a release the program deploys."""
    if release not in RELEASES:
        raise KeyError(f"no OpenStack venv for release {release!r}; known: {', '.join(RELEASES)}")
    pins = RELEASES[release]
    return VenvRecipe(f"openstack-venv-{release}", pins.pinned, pins.cutoff, EXTRA + pins.extra, IMAGE_LINKS, LAYOUT)


@dataclass(frozen=True)
class OpenStackVenv:
    path: Path
    release: str

    @property
    def python(self) -> Path:
        return self.path / "bin" / "python"

    def bin(self, name: str) -> Path:
        """A console script of the venv, e.g. bin("keystone-manage")."""
        script = self.path / "bin" / name
        if not script.exists():
            raise FileNotFoundError(f"{name} is not installed in {self.path}")
        return script

    def env(self, base: dict[str, str] | None = None) -> dict[str, str]:
        """An environment whose PATH finds this venv's scripts first, as in an image."""
        env = dict(os.environ if base is None else base)
        env["PATH"] = f"{self.path / 'bin'}{os.pathsep}{env.get('PATH', '')}"
        env["VIRTUAL_ENV"] = str(self.path)
        env.pop("PYTHONPATH", None)
        return env


def _run(args: list[str | Path], log: Path, env: dict[str, str] | None = None) -> None:
    with log.open("a") as out:
        out.write(f"$ {' '.join(map(str, args))}\n")
        out.flush()
        done = subprocess.run(args, stdout=out, stderr=subprocess.STDOUT, env=env)
    if done.returncode != 0:
        tail = "".join(log.read_text().splitlines(keepends=True)[-40:])
        raise RuntimeError(f"building the virtualenv failed (log {log}):\n{tail}")


def _uv(base: Path, log: Path) -> Path:
    """uv, pinned, in a small virtualenv of its own beside the builds."""
    tools = base / f"uv-{UV_VERSION}"
    uv = tools / "bin" / "uv"
    if not uv.exists():
        shutil.rmtree(tools, ignore_errors=True)
        _run([sys.executable, "-m", "venv", tools], log)
        _run([tools / "bin" / "python", "-m", "pip", "install", "--quiet", f"uv=={UV_VERSION}"], log)
    return uv


def _build(recipe: VenvRecipe, path: Path, uv_cache: Path, log: Path) -> None:
    env = dict(os.environ, UV_CACHE_DIR=str(uv_cache), UV_PYTHON_DOWNLOADS="never")
    uv = _uv(path.parent, log)
    # Relocatable: its scripts find their interpreter next to themselves, not at the path they were
    # built at. The lab mounts it where Kolla's images keep theirs (/var/lib/kolla/venv), and a
    # container's own /tmp hides the build path of a checkout under /tmp (tests/lab/cloud/container.py).
    _run([uv, "venv", "--no-config", "--relocatable", "--seed", "--python", sys.executable, path], log, env)
    python = path / "bin" / "python"
    exempt = [arg for name in recipe.pinned for arg in ("--exclude-newer-package", f"{name}=false")]
    # --compile-bytecode: as pip installs into Kolla's venv, with the .pyc files. The lab's services run as
    # Kolla's users, who cannot write into this root-owned venv, so without them every process compiles
    # what it imports at each start (a fresh clone's prod deploy took 2.3 times as long: 420 s, not 180).
    install = ["install", "--no-config", "--compile-bytecode", "--python", str(python)]
    install += ["--exclude-newer", recipe.cutoff, *exempt]
    _run([uv, "pip", *install, *recipe.requirements()], log, env)
    freeze = subprocess.run(
        [uv, "pip", "freeze", "--python", python],
        capture_output=True,
        text=True,
        check=True,
        env=env,
    ).stdout
    (path / "freeze.txt").write_text(freeze)
    site_packages = path / "lib" / f"python{sys.version_info.major}.{sys.version_info.minor}" / "site-packages"
    for link, target in recipe.links.items():
        (site_packages / link).symlink_to(target)


def _prune_other_builds(base: Path, recipe: VenvRecipe, keep: Path) -> None:
    # Builds for other requirement sets are hundreds of MB each and never used again.
    for other in base.glob(f"{recipe.name}-*"):
        if other != keep and other.is_dir():
            shutil.rmtree(other, ignore_errors=True)
            (base / f"{other.name}.log").unlink(missing_ok=True)


def ensure_built(recipe: VenvRecipe, base: Path | None = None) -> Path:
    """The recipe's venv under the cache, built if missing or left half-built by an earlier run."""
    base = base or cache_base()
    base.mkdir(parents=True, exist_ok=True)
    path = base / f"{recipe.name}-{recipe.cache_key()}"
    marker = path / MARKER
    # Parallel test sessions (or CI jobs sharing a cache) must not build it twice.
    with (base / f"{recipe.name}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not marker.exists():
            shutil.rmtree(path, ignore_errors=True)
            log = base / f"{path.name}.log"
            log.unlink(missing_ok=True)
            started = time.monotonic()
            _build(recipe, path, base / "uv-cache", log)
            seconds = round(time.monotonic() - started, 1)
            _prune_other_builds(base, recipe, keep=path)
            built = {"name": recipe.name, "requirements": recipe.requirements(), "cutoff": recipe.cutoff}
            marker.write_text(json.dumps(built | {"build_seconds": seconds}, indent=2))
    return path


def ensure_venv(release: str = DEFAULT_RELEASE, base: Path | None = None) -> OpenStackVenv:
    """The venv of a release, built if missing or left half-built by an earlier run."""
    return OpenStackVenv(ensure_built(recipe(release), base), release)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m tests.lab.realenv.openstack_venv", description=__doc__)
    which = parser.add_mutually_exclusive_group()
    which.add_argument("--release", choices=list(RELEASES), default=DEFAULT_RELEASE)
    which.add_argument("--all", action="store_true", help="every release's (what make test uses)")
    args = parser.parse_args(argv)
    for release in RELEASES if args.all else [args.release]:
        started = time.monotonic()
        venv = ensure_venv(release)
        print(f"{release}: {venv.path} ready in {time.monotonic() - started:.1f}s")


if __name__ == "__main__":
    main()
