"""Memcached: token and session cache for Keystone, the APIs and Horizon.

A StatefulSet behind a headless Service: every client lists each server by name
(`oslo.memcached_servers`) and spreads keys over them, so one key lives on one server.
Declared as data like the OpenStack services and built by the same mechanism.
"""

from __future__ import annotations

from components.memory import SHARES
from components.oslo import MEMCACHED, MEMCACHED_PORT
from components.settings import Settings
from components.spec import Process, RenderContext, ServiceSpec
from components.workload import Probe

IMAGE = "memcached"  # Kolla's
# Before it was built by the shared mechanism its component had this type; the alias keeps
# the state of its StatefulSet, Service and budget, so an upgrade changes nothing in the cluster.
FORMER_TYPE = "openstack:infra:Memcached"


def _no_files(ctx: RenderContext) -> dict[str, str]:
    return {}


def memcached(settings: Settings) -> ServiceSpec:
    # Item memory is a share of the container's memory limit (components/memory.py).
    memory_mb = SHARES[MEMCACHED].mib(settings.resources_of(MEMCACHED).limits_memory)
    command = ("memcached", "-p", str(MEMCACHED_PORT), "-U", "0", "-m", str(memory_mb), "-c", "8192", "-l", "0.0.0.0")
    return ServiceSpec(
        name=MEMCACHED,
        config_dir="",  # configured on its command line: no config files
        render=_no_files,
        processes=(
            Process(
                name=MEMCACHED,
                image=IMAGE,
                command=command,
                needs=(),
                port=MEMCACHED_PORT,
                port_name="memcache",
                probe=Probe(MEMCACHED_PORT),
                stateful=True,
                component="server",
            ),
        ),
        former_type=FORMER_TYPE,
    )
