"""Builds the whole cloud from settings: infrastructure, Keystone, then the enabled services."""

from __future__ import annotations

import pulumi
import pulumi_kubernetes as k8s

from components.cinder import Cinder
from components.compute import ComputeNodes
from components.credentials import Credentials
from components.glance import Glance
from components.graph import DeployGraph
from components.horizon import Horizon
from components.isolation import DataStoreIsolation
from components.keystone import Keystone
from components.maintenance import MaintenanceAccess
from components.maintenance import enabled as maintenance_enabled
from components.mariadb import MariaDB
from components.memcached import Memcached
from components.meta import labels
from components.neutron import Neutron
from components.nova import Nova
from components.openstack_service import BuildContext
from components.placement import Placement
from components.rabbitmq import RabbitMQ
from components.settings import Settings

# In an order where whatever a service waits for is declared before it.
SERVICES = {
    "glance": Glance,
    "placement": Placement,
    "nova": Nova,
    "neutron": Neutron,
    "cinder": Cinder,
    "horizon": Horizon,
}


def build(settings: Settings) -> DeployGraph:
    namespace = k8s.core.v1.Namespace(
        "namespace",
        metadata={
            "name": settings.namespace,
            "labels": {
                **labels("openstack", "namespace"),
                # Compute and network pods need host access, so admission cannot enforce more
                # than 'privileged' here; the policy pack holds every other pod to its profile.
                "pod-security.kubernetes.io/enforce": "privileged",
                "pod-security.kubernetes.io/warn": "baseline",
            },
        },
    )
    in_namespace = pulumi.ResourceOptions(depends_on=[namespace])
    graph = DeployGraph()
    credentials = Credentials("credentials")
    MariaDB(settings, credentials, graph, in_namespace)
    RabbitMQ(settings, graph, in_namespace)
    Memcached(settings, graph, in_namespace)
    DataStoreIsolation(settings, in_namespace)
    ctx = BuildContext(settings, credentials, graph)
    Keystone(ctx, in_namespace)
    for name in settings.services.enabled():
        SERVICES[name](ctx, in_namespace)
    if maintenance_enabled(settings):
        MaintenanceAccess(settings, graph, in_namespace)
    if settings.services.nova:
        ComputeNodes(ctx, in_namespace)
    return graph
