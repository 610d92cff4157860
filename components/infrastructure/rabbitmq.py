"""RabbitMQ through the RabbitMQ Cluster Operator: one node, or three under HA.

The operator creates the `rabbitmq` Service and the `rabbitmq-default-user` Secret
(admin credentials, generated in the cluster); services get their own vhost and user
from their rabbit-init Jobs.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from components.infrastructure.child_transforms import KEEP_DEFINITIONS, ChildTransform
from components.mechanism import certificates, internal_tls
from components.mechanism.created import DeployGraph
from components.mechanism.meta import metadata
from components.mechanism.oslo import RABBITMQ
from components.mechanism.workload import resources_manifest
from components.settings import scheduling
from components.settings.model import RabbitmqOperator, Settings

# The operator's own release manifest (Bitnami's chart pulled images Bitnami removed from
# docker.io in 2025). It installs the operator into the namespace rabbitmq-system, watching
# every namespace. Its version is pinned in settings (v2.21.1): from v2.22.0 the manifest
# adds cert-manager Certificates and webhooks that fail closed (cluster-operator #2187).
MANIFEST = "https://github.com/rabbitmq/cluster-operator/releases/download/{version}/cluster-operator.yml"
# The official image, pinned; the same minor as the operator's default (4.2.6 in v2.21.1).
IMAGE = "rabbitmq:4.2.8-management"
# Why `replicas.rabbitmq` is no setting: the nodes follow `ha`.
REPLICAS = "one node, or three under ha (quorum queues need a majority)"
# The certificate RabbitMQ serves under internal TLS (spec.tls.secretName).
TLS_SECRET = f"{RABBITMQ}-internal-tls"
WAIT_READY = {"pulumi.com/waitFor": "condition=AllReplicasReady", "pulumi.com/timeoutSeconds": "1200"}


OPERATOR_DEPLOYMENT = "rabbitmq-cluster-operator"  # in config/manager/manager.yaml of the release
# The labels of the operator's pods (config/manager/manager.yaml of the release).
OPERATOR_POD_LABELS = {"app.kubernetes.io/name": "rabbitmq-cluster-operator"}


def watch_only(namespaces: Sequence[str]) -> ChildTransform:
    """A transform of the release manifest: the operator watches these namespaces alone.

    OPERATOR_SCOPE_NAMESPACE limits what the operator reads and manages; cmd/main.go of
    v2.21.1 splits it at each comma, without trimming spaces. The manifest's ClusterRole stays
    as released, so its rights remain cluster-wide (README). The manifest's names are
    cluster-wide (its Namespace, CRD, ClusterRole and ClusterRoleBinding): one stack installs
    it, watching the namespaces of the others too (operators.rabbitmq.watchNamespaces).
    """
    scope = ",".join(namespaces)

    def transform(args: pulumi.ResourceTransformArgs) -> pulumi.ResourceTransformResult | None:
        # The manifest's objects arrive as plain values (dicts and lists), not as Outputs.
        props: Mapping[str, Any] = args.props
        if args.type_ != "kubernetes:apps/v1:Deployment" or props["metadata"]["name"] != OPERATOR_DEPLOYMENT:
            return None
        props = copy.deepcopy(props)
        for container in props["spec"]["template"]["spec"]["containers"]:
            env = [e for e in container.get("env", []) if e["name"] != "OPERATOR_SCOPE_NAMESPACE"]
            container["env"] = [*env, {"name": "OPERATOR_SCOPE_NAMESPACE", "value": scope}]
        return pulumi.ResourceTransformResult(props, args.opts)

    return ChildTransform(f"OPERATOR_SCOPE_NAMESPACE={scope} on Deployment {OPERATOR_DEPLOYMENT}", transform)


def operator_manifest(
    name: str, operator: RabbitmqOperator, namespace: str, parent: pulumi.Resource
) -> k8s.yaml.v2.ConfigFile | None:
    """None when `install: false`: the stack then relies on an operator already running.

    Depending on the ConfigFile waits for all its objects, the operator's Deployment ready.
    Its CustomResourceDefinition stays in the cluster when the ConfigFile goes: deleting it
    would delete every RabbitmqCluster of every stack.
    """
    if not operator.install:
        return None
    return k8s.yaml.v2.ConfigFile(
        name,
        file=MANIFEST.format(version=operator.version),
        opts=pulumi.ResourceOptions(
            parent=parent, transforms=[watch_only(operator.scope(namespace)), KEEP_DEFINITIONS]
        ),
    )


def replicas(settings: Settings) -> int:
    return 3 if settings.ha else 1


def tls_spec(settings: Settings) -> dict[str, Any]:
    """spec.tls where tls.internal names a CA: AMQP and the management API on TLS alone.

    `disableNonTLSListeners` leaves amqps (5671) and management-tls (15671) only, and the
    operator then calls the management API over https, trusting `caSecretName`'s ca.crt
    (internal/rabbitmqclient of v2.21.1): the internal CA's bundle. Naming a CA also makes the
    operator write `ssl_options.verify = verify_peer` (internal/resource/configmap.go): RabbitMQ
    asks for a client certificate but, fail_if_no_peer_cert being false by default, admits
    clients without one (users authenticate with passwords). Erlang distribution between the
    nodes (25672) stays unencrypted: the NetworkPolicy admits only the RabbitMQ pods to it.
    """
    if not settings.tls.internal_enabled:
        return {}
    tls = {"secretName": TLS_SECRET, "caSecretName": internal_tls.CA_BUNDLE, "disableNonTLSListeners": True}
    return {"tls": tls}


def certificate(settings: Settings, parent: pulumi.Resource) -> None:
    """The Certificate of spec.tls.secretName, from the internal CA."""
    internal = settings.tls.internal
    if internal is None or not internal.enabled:
        return
    names = internal_tls.rabbitmq_dns_names(settings, RABBITMQ, replicas(settings))
    spec = internal_tls.server_certificate(TLS_SECRET, names, internal)
    certificates.cert_manager("Certificate", TLS_SECRET, settings.namespace, spec, parent, owner=internal_tls.OWNER)


def _priority_override(priority_class: str | None) -> dict[str, Any]:
    if priority_class is None:
        return {}
    # The CRD requires `containers` in the override's pod spec; the operator applies the override as a
    # strategic merge patch, which merges containers by name, so an empty list changes none of them.
    pod = {"spec": {"containers": [], "priorityClassName": priority_class}}
    return {"override": {"statefulSet": {"spec": {"template": pod}}}}


class RabbitMQ(pulumi.ComponentResource):
    def __init__(self, settings: Settings, graph: DeployGraph, opts: pulumi.ResourceOptions | None = None):
        super().__init__("openstack:infra:RabbitMQ", RABBITMQ, None, opts)
        ns = settings.namespace
        operator = operator_manifest("rabbitmq-cluster-operator", settings.operators.rabbitmq, ns, self)
        persistence = {"storage": settings.storage.rabbitmq_size}
        queue_class = settings.storage.class_for("queue")
        if queue_class:
            persistence["storageClassName"] = queue_class
        spec = {
            "image": IMAGE,
            "replicas": replicas(settings),
            "persistence": persistence,
            "resources": resources_manifest(settings.resources_of(RABBITMQ)),
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
            **scheduling.pod_fields(settings.tolerations.control_plane, None),
            # The CR has no priorityClassName: the operator takes it from its StatefulSet override.
            **_priority_override(settings.priority_classes.data_stores),
            # Quorum queues need a majority; pause the minority side of a partition.
            "rabbitmq": {"additionalConfig": "cluster_partition_handling = pause_minority\n"},
            **tls_spec(settings),
        }
        # No dependency: the pods wait in ContainerCreating until cert-manager writes the Secret.
        certificate(settings, self)
        self.cluster = k8s.apiextensions.CustomResource(
            "rabbitmq",
            api_version="rabbitmq.com/v1beta1",
            kind="RabbitmqCluster",
            metadata={**metadata("rabbitmq", ns, "rabbitmq", "messaging"), "annotations": WAIT_READY},
            spec=spec,
            opts=pulumi.ResourceOptions(parent=self, depends_on=[operator] if operator else []),
        )
        graph.add(RABBITMQ, self.cluster)
        self.register_outputs({})
