"""Where the cloud's pods may schedule besides their node selectors: tolerations of tainted nodes, per
node role and per compute node group, and the priority classes of the pods a node cannot do without.

A Toleration is checked as the API server checks one (k8s.io/kubernetes pkg/apis/core/validation,
ValidateTolerations), so a bad one is a settings error that names its key, not a refused pod halfway
through `pulumi up`.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, model_validator

from components.settings.base import Model
from components.settings.value_types import DnsSubdomain, LabelKey, LabelValue


class Toleration(Model):
    """A pod's toleration of a node taint, as Kubernetes writes it (core/v1 Toleration)."""

    key: LabelKey | None = Field(None, description="the taint's key; unset: every key (operator Exists)")
    operator: Literal["Equal", "Exists"] = "Equal"
    value: LabelValue | None = None
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute"] | None = Field(
        None, description="unset: every effect"
    )
    toleration_seconds: int | None = Field(None, ge=0, description="NoExecute only: how long the pod stays")

    @model_validator(mode="after")
    def _as_the_api_server_checks_it(self) -> Toleration:
        if self.key is None and self.operator != "Exists":
            raise ValueError("operator must be Exists when key is unset (which tolerates every taint)")
        if self.operator == "Exists" and self.value:
            raise ValueError("value must be unset when operator is Exists")
        if self.toleration_seconds is not None and self.effect != "NoExecute":
            raise ValueError("tolerationSeconds needs effect NoExecute")
        return self

    def manifest(self) -> dict[str, Any]:
        return self.model_dump(by_alias=True, exclude_none=True)


Tolerations = tuple[Toleration, ...]


class NodeTolerations(Model):
    """Per node role, as nodeSelectors: the taints its pods tolerate. The data stores (MariaDB, RabbitMQ,
    memcached), the Jobs and the APIs are control plane."""

    control_plane: Tolerations = ()
    network: Tolerations = ()
    compute: Tolerations = Field((), description="a node group adds its own (compute.nodeGroups[].tolerations)")
    storage: Tolerations = ()


class PriorityClasses(Model):
    """PriorityClass names of the cluster (the program creates none: their values rank the cluster's
    workloads against each other, which is the cluster owner's call). Unset: the cluster's default."""

    node_agents: DnsSubdomain | None = Field(
        None,
        description="the pods on network, compute and storage nodes (libvirt, nova-compute, Open vSwitch, the "
        "Neutron agents, cinder-volume): evicted under node pressure, they take the node's VMs and networks",
    )
    data_stores: DnsSubdomain | None = Field(
        None, description="MariaDB, RabbitMQ and memcached, on which every service depends"
    )


def manifests(tolerations: Tolerations) -> list[dict[str, Any]]:
    return [t.manifest() for t in tolerations]


def pod_fields(tolerations: Tolerations, priority_class: str | None) -> dict[str, Any]:
    """`tolerations` and `priorityClassName` as a pod spec (or an operator's CR that copies them) has them:
    only those set, so a stack that sets neither plans as before."""
    fields: dict[str, Any] = {}
    if tolerations:
        fields["tolerations"] = manifests(tolerations)
    if priority_class:
        fields["priorityClassName"] = priority_class
    return fields
