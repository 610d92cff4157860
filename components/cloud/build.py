"""Builds the whole cloud from settings: the deploy graph first, then its resources in its order."""

from __future__ import annotations

from collections.abc import Callable

import pulumi
import pulumi_kubernetes as k8s

from components.cloud import upgrade
from components.cloud.graph import INFRASTRUCTURE, CloudGraph, Node, cloud_graph
from components.cloud.openstack_service import BuildContext, OpenStackService
from components.infrastructure import mariadb_backup, memcached, rook
from components.infrastructure.credentials import Credentials
from components.infrastructure.front_door import FrontDoor
from components.infrastructure.isolation import DataStoreIsolation, FrontDoorIsolation
from components.infrastructure.mariadb import MariaDB
from components.infrastructure.rabbitmq import RabbitMQ
from components.mechanism import oslo
from components.mechanism.created import DeployGraph
from components.mechanism.internal_tls import InternalCertificates
from components.mechanism.meta import labels
from components.nodes import libvirt_tls, maintenance
from components.services.specs import public_routes
from components.settings.model import Settings

# The components that build the infrastructure nodes of the graph, by node name.
Builder = Callable[[BuildContext, pulumi.ResourceOptions], pulumi.Resource]


def _infrastructure_builders(settings: Settings, graph: CloudGraph) -> dict[str, Builder]:
    return {
        oslo.MARIADB: lambda ctx, opts: MariaDB(settings, ctx.credentials, ctx.graph, opts),
        oslo.RABBITMQ: lambda ctx, opts: RabbitMQ(settings, ctx.graph, opts),
        maintenance.cluster_name(settings): lambda ctx, opts: maintenance.MaintenanceAccess(settings, ctx.graph, opts),
        libvirt_tls.access_name(settings): lambda ctx, opts: libvirt_tls.LibvirtNodeAccess(settings, ctx.graph, opts),
        rook.CLIENTS_NODE: lambda ctx, opts: rook.RookCeph(settings, ctx.graph, opts),
        upgrade.backup_name(settings): lambda ctx, opts: _upgrade_backup(settings, graph, ctx, opts),
    }


def _upgrade_backup(
    settings: Settings, graph: CloudGraph, ctx: BuildContext, opts: pulumi.ResourceOptions
) -> pulumi.Resource:
    name = upgrade.backup_name(settings)
    node = graph[name]
    waits = ctx.graph.resolve((need.name for need in node.needs), waiter=name)
    return ctx.graph.add(name, mariadb_backup.backup_before_upgrade(name, settings, waits, opts))


def build(settings: Settings, credentials: Credentials) -> CloudGraph:
    """Create every resource of the stack's graph, each after what it needs; returns the graph.

    `credentials` makes every generated secret; the caller keeps it for the stack's outputs."""
    graph = cloud_graph(settings)
    # A patch, not a Namespace of the stack's own: the namespace may exist before the first
    # `pulumi up` (the user puts Ceph keyrings and S3 keys there first), which a Namespace's create
    # refuses (AlreadyExists: pulumi-kubernetes creates client-side unless upsertExistingObjects);
    # and `pulumi destroy` must not delete it, which would take the database volumes and the
    # backup claim the program keeps (retainOnDelete) with it. A patch creates the namespace
    # where there is none (server-side apply) and on delete gives up its labels only.
    namespace = k8s.core.v1.NamespacePatch(
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
    services: dict[str, OpenStackService] = {}
    ctx = BuildContext(settings, credentials, DeployGraph(), services)
    services |= {spec.name: OpenStackService(spec, ctx, in_namespace) for spec in graph.specs}
    infrastructure = _infrastructure_builders(settings, graph)
    for node in graph.order():
        _emit(node, ctx, services, infrastructure, in_namespace)
    for service in services.values():
        service.finish()
    DataStoreIsolation(settings, in_namespace)
    if settings.tls.internal_enabled:
        # No edge in the graph: a pod whose Secret is not issued yet waits in ContainerCreating
        # until cert-manager writes it, as the gateway waits for public-tls.
        InternalCertificates(settings, {oslo.MEMCACHED: memcached.dns_names(settings)}, in_namespace)
    if libvirt_tls.enabled(settings):
        libvirt_tls.LibvirtCertificates(settings, in_namespace)
    if settings.gateway is not None:
        routes = public_routes(settings)
        FrontDoor(settings, ctx.credentials, routes, in_namespace)
        FrontDoorIsolation(settings, routes, in_namespace)
    return graph


def _emit(
    node: Node,
    ctx: BuildContext,
    services: dict[str, OpenStackService],
    infrastructure: dict[str, Builder],
    opts: pulumi.ResourceOptions,
) -> None:
    if node.owner == INFRASTRUCTURE:
        # A data store waits for what its pods mount (the CA bundle); the backup resolves its own needs.
        waits = ctx.graph.resolve((need.name for need in node.needs), waiter=node.key) if node.kind in (
            "MariaDB", "RabbitmqCluster") else []  # fmt: skip
        inside = pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(depends_on=waits)) if waits else opts
        infrastructure[node.name](ctx, inside)  # registers itself in ctx.graph under node.name
    else:
        services[node.owner].emit(node)
