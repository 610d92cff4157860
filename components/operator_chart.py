"""Installs an operator from its Helm chart at a pinned version, or trusts the cluster's own."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from components.settings import ChartOperator


def operator_chart(
    name: str,
    chart: str,
    operator: ChartOperator,
    namespace: str,
    parent: pulumi.Resource,
    values: Mapping[str, Any] | None = None,
    depends_on: list[pulumi.Resource] | None = None,
    retain_on_delete: bool = False,
) -> k8s.helm.v4.Chart | None:
    """None when `install: false`: the stack then relies on an operator already running.

    `chart` is an OCI reference (oci://...), which needs no repository options. With
    `retain_on_delete` the chart's objects stay in the cluster when Pulumi deletes or
    replaces them: set on a component, the option passes to every child (Pulumi's
    retainOnDelete documentation).
    """
    if not operator.install:
        return None
    return k8s.helm.v4.Chart(
        name,
        chart=chart,
        version=operator.chart_version,
        namespace=namespace,
        values=dict(values or {}),
        opts=pulumi.ResourceOptions(parent=parent, depends_on=depends_on or [], retain_on_delete=retain_on_delete),
    )
