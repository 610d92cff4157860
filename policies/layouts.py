"""Where each kind the pack judges keeps its pods: the workload kinds of Kubernetes, and the
custom resources of the operators the program installs, whose pods the operators build.

A layout names the object path of a pod's fields, of its metadata, and of each of its
containers. Kubernetes' kinds keep a whole pod (template) at one path. An operator's
custom resource keeps only the pod fields it lets a user set, at its own paths and
sometimes under its own names (mariadb-operator's `podSecurityContext` is the pod's
`securityContext`, and its main container's fields sit in `spec` itself).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from policies.k8s import K8sObject

SECTIONS = {"containers": "container", "initContainers": "init container", "ephemeralContainers": "ephemeral container"}
# Where each kind keeps its pod template (None: the object is the pod).
TEMPLATE_PATHS: dict[str, tuple[str, ...] | None] = {
    "Pod": None,
    "Deployment": ("spec", "template"),
    "StatefulSet": ("spec", "template"),
    "DaemonSet": ("spec", "template"),
    "ReplicaSet": ("spec", "template"),
    "ReplicationController": ("spec", "template"),
    "Job": ("spec", "template"),
    "CronJob": ("spec", "jobTemplate", "spec", "template"),
    "PodTemplate": ("template",),
}
WORKLOAD_GROUPS = ("core", "apps", "extensions", "batch")


@dataclass(frozen=True)
class Containers:
    section: str  # what they count as: containers | initContainers | ephemeralContainers
    path: tuple[str, ...]  # where they are in the object
    single: str = ""  # the name of one container kept at `path` itself; "" for a list of containers


@dataclass(frozen=True)
class PodLayout:
    spec: tuple[str, ...]  # where the pod's own fields are (hostNetwork, volumes...)
    metadata: tuple[str, ...]  # where its labels and annotations are
    containers: tuple[Containers, ...]
    # Pod fields under the object's own names, e.g. securityContext → podSecurityContext.
    names: Mapping[str, str] = field(default_factory=dict)
    # The custom resource kind whose operator builds the pod ("" for Kubernetes' own kinds):
    # the object holds only the fields the program sets, the operator writes the rest.
    operator: str = ""


def workload_layout(path: tuple[str, ...]) -> PodLayout:
    return PodLayout((*path, "spec"), (*path, "metadata"), tuple(Containers(s, (*path, "spec", s)) for s in SECTIONS))


# RabbitmqCluster: spec.override.statefulSet is merged into the StatefulSet the operator
# builds (rabbitmq/cluster-operator api/v1beta1/rabbitmqcluster_types.go); its template is a
# whole PodTemplateSpec.
RABBITMQ = replace(workload_layout(("spec", "override", "statefulSet", "spec", "template")), operator="RabbitmqCluster")

# mariadb-operator (api/v1alpha1): the pod-running kinds inline a ContainerTemplate (the main
# container: securityContext, env, args, volumeMounts...) and a pod template (podMetadata,
# podSecurityContext, volumes, initContainers, sidecarContainers) in spec. MariaDB adds the
# Galera or replication agent (a sidecar) and init container, and a metrics exporter pod of
# its own; MaxScale the exporter too. Standard pod fields the CRDs lack (hostNetwork...) are
# judged under their own names anyway: the API server drops them, or a later CRD has them.
MARIADB_POD_NAMES = {"securityContext": "podSecurityContext"}
MARIADB_KINDS = ("MariaDB", "MaxScale", "Backup", "PhysicalBackup", "Restore", "SqlJob")


def mariadb_layouts(kind: str) -> tuple[PodLayout, ...]:
    main = PodLayout(
        ("spec",),
        ("spec", "podMetadata"),
        (
            Containers("containers", ("spec",), single=kind.lower()),
            Containers("containers", ("spec", "sidecarContainers")),
            Containers("containers", ("spec", "galera", "agent"), single="agent"),
            Containers("containers", ("spec", "replication", "agent"), single="agent"),
            Containers("initContainers", ("spec", "initContainers")),
            Containers("initContainers", ("spec", "galera", "initContainer"), single="init"),
            Containers("initContainers", ("spec", "replication", "initContainer"), single="init"),
        ),
        MARIADB_POD_NAMES,
        kind,
    )
    exporter = ("spec", "metrics", "exporter")
    metrics = PodLayout(
        exporter, (*exporter, "podMetadata"), (Containers("containers", exporter, single="exporter"),),
        MARIADB_POD_NAMES, kind,
    )  # fmt: skip
    return (main, metrics) if kind in ("MariaDB", "MaxScale") else (main,)


OPERATOR_KINDS: dict[tuple[str, str], tuple[PodLayout, ...]] = {
    ("rabbitmq.com", "RabbitmqCluster"): (RABBITMQ,),
    **{("k8s.mariadb.com", kind): mariadb_layouts(kind) for kind in MARIADB_KINDS},
}


def layouts(obj: K8sObject) -> tuple[PodLayout, ...]:
    """Where the pods an object runs are; () for an object that runs none or of a kind the pack
    does not know (unknown_kinds.py refuses those that look like they run one)."""
    if obj.group in WORKLOAD_GROUPS and obj.kind in TEMPLATE_PATHS:
        return (workload_layout(TEMPLATE_PATHS[obj.kind] or ()),)
    return OPERATOR_KINDS.get((obj.group, obj.kind), ())


def judges(obj: K8sObject) -> bool:
    """Whether the pack knows where an object of this kind keeps its pods, if it runs any."""
    return bool(layouts(obj))


def judged_kinds() -> str:
    """The kinds whose pods the rules judge, for messages."""
    operators: dict[str, list[str]] = {}
    for group, kind in OPERATOR_KINDS:
        operators.setdefault(group, []).append(kind)
    custom = "; ".join(f"{', '.join(kinds)} ({group})" for group, kinds in operators.items())
    return f"{', '.join(TEMPLATE_PATHS)} ({', '.join(WORKLOAD_GROUPS)}); {custom}; and their *Patch types"
