"""RabbitMQ through the RabbitMQ Cluster Operator: one node, or three under HA.

The operator creates the `rabbitmq` Service and the `rabbitmq-default-user` Secret
(admin credentials, generated in the cluster); services get their own vhost and user
from their rabbit-init Jobs.
"""

from __future__ import annotations

import pulumi
import pulumi_kubernetes as k8s

from components.graph import DeployGraph
from components.meta import metadata
from components.operator_chart import operator_chart
from components.settings import Settings
from components.workload import resources_manifest

CHART = "oci://registry-1.docker.io/bitnamicharts/rabbitmq-cluster-operator"
WAIT_READY = {"pulumi.com/waitFor": "condition=AllReplicasReady", "pulumi.com/timeoutSeconds": "1200"}


class RabbitMQ(pulumi.ComponentResource):
    def __init__(self, settings: Settings, graph: DeployGraph, opts: pulumi.ResourceOptions | None = None):
        super().__init__("openstack:infra:RabbitMQ", "rabbitmq", None, opts)
        ns = settings.namespace
        chart = operator_chart("rabbitmq-cluster-operator", CHART, settings.operators.rabbitmq, ns, self)
        persistence = {"storage": settings.storage.rabbitmq_size}
        if settings.storage.storage_class:
            persistence["storageClassName"] = settings.storage.storage_class
        spec = {
            "replicas": 3 if settings.ha else 1,
            "persistence": persistence,
            "resources": resources_manifest(settings.resources_of("rabbitmq")),
            "affinity": {
                "nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [
                            {
                                "matchExpressions": [
                                    {"key": key, "operator": "In", "values": [value]}
                                    for key, value in settings.node_selectors.control_plane.items()
                                ]
                            }
                        ]
                    }
                }
            },
            # Quorum queues need a majority; pause the minority side of a partition.
            "rabbitmq": {"additionalConfig": "cluster_partition_handling = pause_minority\n"},
        }
        self.cluster = k8s.apiextensions.CustomResource(
            "rabbitmq",
            api_version="rabbitmq.com/v1beta1",
            kind="RabbitmqCluster",
            metadata={**metadata("rabbitmq", ns, "rabbitmq", "messaging"), "annotations": WAIT_READY},
            spec=spec,
            opts=pulumi.ResourceOptions(parent=self, depends_on=[chart] if chart else []),
        )
        graph.add("rabbitmq", self.cluster)
        self.register_outputs({})
