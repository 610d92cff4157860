"""Small queries over a plan (and over settings) that several test modules share."""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from typing import Any
from unittest.mock import MagicMock, patch

import pytest

from components.cloud.stack_config import parse_settings
from components.settings.model import SettingsError
from tools.plan import Plan
from tools.runtime import Registration

# Objects that something can wait for in the deploy graph (everything else is config).
GRAPH_KINDS = {"Job", "Deployment", "DaemonSet", "StatefulSet", "MariaDB", "RabbitmqCluster"}


def name_of(r: Registration) -> str:
    """The object's metadata.name; every object the tests look up by name has one."""
    if r.k8s_name is None:
        raise AssertionError(f"{r.urn} has no metadata.name")
    return r.k8s_name


def waits_for(plan: Plan, k8s_name: str) -> set[str]:
    """The Jobs, workloads and data stores an object waits for directly, by Kubernetes name."""
    urn = next(r.urn for r in plan.custom if r.k8s_name == k8s_name and r.kind in GRAPH_KINDS)
    by_urn = {r.urn: r for r in plan.custom}
    return {name_of(by_urn[d]) for d in plan.dependencies[urn] if by_urn[d].kind in GRAPH_KINDS}


def bundle_job(plan: Plan) -> set[str]:
    """What every pod that mounts the internal CA bundle also waits for, under internal TLS: the Job that
    writes it (components/infrastructure/ca_rotation.py)."""
    return {"internal-ca-bundle"} if plan.settings.tls.internal_enabled else set()


def ancestors(plan: Plan, k8s_name: str) -> set[str]:
    urn = next(r.urn for r in plan.custom if r.k8s_name == k8s_name and r.kind in GRAPH_KINDS)
    by_urn = {r.urn: r for r in plan.custom}
    return {name_of(by_urn[u]) for u in plan.ancestors(urn) if by_urn[u].kind in GRAPH_KINDS}


def objects(plan: Plan, kind: str) -> dict[str, Registration]:
    return {name_of(r): r for r in plan.custom if r.kind == kind}


def pod_template(r: Registration, revealed: bool = False) -> dict[str, Any]:
    inputs = r.revealed if revealed else r.inputs
    if r.kind == "Pod":
        return inputs
    if r.kind == "CronJob":
        return inputs["spec"]["jobTemplate"]["spec"]["template"]
    return inputs["spec"]["template"]


def containers(r: Registration) -> Iterator[dict[str, Any]]:
    spec = pod_template(r)["spec"]
    yield from spec.get("initContainers", [])
    yield from spec["containers"]


def unknown_fields(value: Any, schema: dict[str, Any], where: str = "") -> list[str]:
    """Fields the CRD does not declare: the API server would drop them without a word (pruning)."""
    if isinstance(value, dict) and "properties" in schema:
        found = []
        for key, item in value.items():
            if key not in schema["properties"]:
                found.append(f"{where}.{key}")
            else:
                found += unknown_fields(item, schema["properties"][key], f"{where}.{key}")
        return found
    if isinstance(value, list) and "items" in schema:
        return [f for i, item in enumerate(value) for f in unknown_fields(item, schema["items"], f"{where}[{i}]")]
    return []


def settings_problems(raw: dict[str, Any]) -> list[str]:
    """The problems parse_settings finds in raw settings (it must find some)."""
    with pytest.raises(SettingsError) as error:
        parse_settings(raw)
    return error.value.problems


def horizon_settings(text: str) -> dict[str, Any]:
    """Horizon's local_settings.py run as Python (it must run), with the pod's IP from the downward API.
    Under internal TLS it makes memcached's TLS context from the CA file the pod mounts, which is not
    here: the context is a stand-in, and `_contexts` the calls made for it."""
    namespace: dict[str, Any] = {}
    with patch.dict(os.environ, {"POD_IP": "10.244.0.9"}), patch("ssl.create_default_context") as context:
        context.return_value = MagicMock(name="tls_context")
        exec(compile(text, "local_settings.py", "exec"), namespace)
    namespace["_contexts"] = context.call_args_list
    return namespace


class SecretsOnlyWorld:
    """What the lab's API server (tests/lab/realenv/kubeapi.py) reaches into beyond its own objects, for a Job that
    only writes Secrets: no nodes, no pods (touching one fails the test, naming the Job), and every Secret
    written recorded in order as (namespace, name, data); `secrets` is the last write of each."""

    def __init__(self, job: str) -> None:
        self.job = job
        self.written: list[tuple[str, str, dict[str, str]]] = []

    @property
    def secrets(self) -> dict[tuple[str, str], dict[str, str]]:
        return {(namespace, name): data for namespace, name, data in self.written}

    def api_nodes(self) -> list[dict[str, Any]]:
        return []

    def api_patch_node(self, name: str, patched: dict[str, Any]) -> None:
        raise AssertionError(f"the Job {self.job} touches no node")

    def api_pods(self, namespace: str) -> list[dict[str, Any]]:
        return []

    def api_delete_pod(self, namespace: str, name: str) -> bool:
        raise AssertionError(f"the Job {self.job} deletes no pod")

    def api_update_secret(self, namespace: str, name: str, data: Mapping[str, str]) -> None:
        self.written.append((namespace, name, dict(data)))
