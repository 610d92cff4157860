"""Memcached: token and session cache for Keystone, the APIs and Horizon.

A StatefulSet behind a headless Service: every client lists each server by name
(`oslo.memcached_servers`) and spreads keys over them, so one key lives on one server.
"""

from __future__ import annotations

import pulumi

from components import kube
from components.graph import DeployGraph
from components.images import profile
from components.memory import SHARES
from components.oslo import MEMCACHED, MEMCACHED_PORT
from components.settings import Settings
from components.workload import Container, Probe, control_plane_pod

IMAGE = "memcached"  # Kolla's


class Memcached(pulumi.ComponentResource):
    def __init__(self, settings: Settings, graph: DeployGraph, opts: pulumi.ResourceOptions | None = None):
        super().__init__("openstack:infra:Memcached", MEMCACHED, None, opts)
        ns = settings.namespace
        resources = settings.resources_of(MEMCACHED)
        # Item memory is a share of the container's memory limit (components/memory.py).
        memory_mb = SHARES[MEMCACHED].mib(resources.limits_memory)
        container = Container(
            name=MEMCACHED,
            image=settings.image(IMAGE),
            command=(
                "memcached",
                "-p",
                str(MEMCACHED_PORT),
                "-U",
                "0",
                "-m",
                str(memory_mb),
                "-c",
                "8192",
                "-l",
                "0.0.0.0",
            ),
            ports=(MEMCACHED_PORT,),
            probe=Probe(MEMCACHED_PORT),
            resources=resources,
        )
        pod = control_plane_pod(
            settings, service=MEMCACHED, component="server", containers=(container,), uid=profile(IMAGE).uid
        )
        replicas = settings.replicas_of(MEMCACHED)
        self.servers = kube.statefulset(MEMCACHED, ns, pod, replicas, self, ())
        kube.service(MEMCACHED, ns, MEMCACHED, "server", {"memcache": MEMCACHED_PORT}, self, headless=True)
        if settings.ha and replicas > 1:
            kube.disruption_budget(MEMCACHED, ns, MEMCACHED, "server", self)
        graph.add(MEMCACHED, self.servers)
        self.register_outputs({})
