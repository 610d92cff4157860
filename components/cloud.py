"""Builds the whole cloud from settings: infrastructure, Keystone, then the enabled services."""

from __future__ import annotations

import pulumi
import pulumi_kubernetes as k8s

from components.credentials import Credentials
from components.graph import DeployGraph
from components.isolation import DataStoreIsolation
from components.maintenance import MaintenanceAccess
from components.maintenance import enabled as maintenance_enabled
from components.mariadb import MariaDB
from components.memcached import Memcached
from components.meta import labels
from components.openstack_service import BuildContext, OpenStackService
from components.rabbitmq import RabbitMQ
from components.services import service_specs
from components.settings import Settings


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
    for spec in service_specs(settings):
        OpenStackService(spec, ctx, in_namespace)
        if spec.name == "nova" and maintenance_enabled(settings):
            MaintenanceAccess(settings, graph, in_namespace)
    return graph
