"""Installs an operator from its Helm chart at a pinned version, or trusts the cluster's own."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

import pulumi
import pulumi_kubernetes as k8s

from components.infrastructure.child_transforms import KEEP_DEFINITIONS


class PinnedChart(Protocol):
    """What a stack says of a chart it may install (operators.*, gateway.envoyGateway)."""

    @property
    def install(self) -> bool: ...

    @property
    def chart_version(self) -> str: ...


def operator_chart(
    name: str,
    chart: str,
    operator: PinnedChart,
    namespace: str,
    parent: pulumi.Resource,
    values: Mapping[str, Any] | None = None,
    depends_on: list[pulumi.Resource] | None = None,
    repository: str | None = None,
) -> k8s.helm.v4.Chart | None:
    """None when `install: false`: the stack then relies on an operator already running.

    `chart` is an OCI reference (oci://...), which needs no repository options, or a chart's name
    in the Helm repository at `repository` (Rook publishes no OCI chart). Every
    CustomResourceDefinition the chart holds stays in the cluster when Pulumi deletes or
    replaces it (components/infrastructure/child_transforms.py: set on the chart, the option would not
    reach it).
    """
    if not operator.install:
        return None
    return k8s.helm.v4.Chart(
        name,
        chart=chart,
        version=operator.chart_version,
        namespace=namespace,
        values=dict(values or {}),
        repository_opts={"repo": repository} if repository else None,
        opts=pulumi.ResourceOptions(parent=parent, depends_on=depends_on or [], transforms=[KEEP_DEFINITIONS]),
    )
