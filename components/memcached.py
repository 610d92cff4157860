"""Memcached: token and session cache for Keystone, the APIs and Horizon."""

from __future__ import annotations

import pulumi

from components import kube
from components.graph import DeployGraph
from components.images import profile
from components.oslo import MEMCACHED_PORT
from components.settings import Settings
from components.workload import Container, Probe, control_plane_pod


class Memcached(pulumi.ComponentResource):
    def __init__(self, settings: Settings, graph: DeployGraph, opts: pulumi.ResourceOptions | None = None):
        super().__init__("openstack:infra:Memcached", "memcached", None, opts)
        memory_mb = 512
        container = Container(
            name="memcached",
            image=settings.image("memcached"),
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
            resources=settings.resources_of("memcached"),
        )
        pod = control_plane_pod(
            settings, service="memcached", component="server", containers=(container,), uid=profile("memcached").uid
        )
        replicas = settings.replicas_of("memcached")
        self.deployment = kube.deployment("memcached", settings.namespace, pod, replicas, self, ())
        kube.service("memcached", settings.namespace, "memcached", "server", {"memcache": MEMCACHED_PORT}, self)
        if settings.ha and replicas > 1:
            kube.disruption_budget("memcached", settings.namespace, "memcached", "server", self)
        graph.add("memcached", self.deployment)
        self.register_outputs({})
