"""Installs an operator from its Helm chart at a pinned version, or trusts the cluster's own."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from components.settings import Operator


def operator_chart(
    name: str,
    chart: str,
    repository: str | None,
    operator: Operator,
    namespace: str,
    parent: pulumi.Resource,
    values: Mapping[str, Any] | None = None,
    depends_on: list[pulumi.Resource] | None = None,
) -> k8s.helm.v4.Chart | None:
    """None when `install: false`: the stack then relies on an operator already running."""
    if not operator.install:
        return None
    return k8s.helm.v4.Chart(
        name,
        chart=chart,
        version=operator.chart_version,
        namespace=namespace,
        repository_opts=k8s.helm.v4.RepositoryOptsArgs(repo=repository) if repository else None,
        values=dict(values or {}),
        opts=pulumi.ResourceOptions(parent=parent, depends_on=depends_on or []),
    )
