"""Tempest, OpenStack's own test suite, in a cached virtualenv of its own.

Tempest is a client of the cloud: it never shares the services' environment (its oslo
libraries are newer than the release's), so it gets its own venv, built like the OpenStack
one (tests/lab/realenv/openstack_venv.py) and cached beside it. Build it ahead of a run with
`python -m tests.lab.realenv.tempest_venv`.

Only Tempest itself, no plugin: the API tests of every service a stack deploys (Keystone,
Glance, Nova, Neutron, Cinder) are in tempest/api/. Placement has none in Tempest or any
plugin (its API is tested by its own gabbits; Tempest reaches it through Nova's tests).
neutron-tempest-plugin's API tests are left out: most of them test extensions and service
plugins the stacks do not enable (QoS, trunk, segments, BGP, FWaaS, ...), where they would be
skipped, and the rest would more than double the run on two cores.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

from tests.lab.realenv.openstack_venv import VenvRecipe, ensure_built

# How these were determined (PyPI JSON API, 2026-11): tempest 47.0.0 was uploaded on
# 2026-09-09 and is the newest release; Tempest is branchless and 47 still supports the
# maintained 2026.1 (its 46.x series were the releases of the 2026.1 cycle). Its own
# dependencies are resolved as PyPI stood the day after, standing in for the
# upper-constraints its gates ran with.
TEMPEST_VERSION = "47.0.0"
TEMPEST = VenvRecipe("tempest-venv", {"tempest": TEMPEST_VERSION}, "2026-09-10T00:00:00Z")


@dataclass(frozen=True)
class TempestVenv:
    path: Path

    @property
    def tempest(self) -> Path:
        return self.path / "bin" / "tempest"

    @property
    def site_packages(self) -> Path:
        return next((self.path / "lib").glob("python3.*/site-packages"))


def ensure_tempest_venv(base: Path | None = None) -> TempestVenv:
    return TempestVenv(ensure_built(TEMPEST, base))


if __name__ == "__main__":
    started = time.monotonic()
    venv = ensure_tempest_venv()
    print(f"{venv.path} ready in {time.monotonic() - started:.1f}s")
