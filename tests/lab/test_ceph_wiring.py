"""How a run meets its Ceph stand-in: the stack's monitors, the keyring Secrets, the scenario's view, the report."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from components.cloud.stack_config import settings_from_config
from tests.lab.cloud import run
from tests.lab.cloud.ceph import CEPH_ADDRESS, CephStandIn
from tools.runtime import stack_config, stack_with


def prod_settings() -> Any:
    return settings_from_config(stack_with(stack_config("prod"), run.machine_overrides("prod", "qemu")))


def test_prod_keeps_its_data_in_ceph_whose_one_monitor_is_the_stand_in() -> None:
    settings = prod_settings()
    assert settings.ceph.external.monitors == (CEPH_ADDRESS,)
    assert settings.ceph.fsid == "5c3f8a2e-7d41-4b9e-a6c0-2f1e9d8b7a63"  # the cluster is made with it
    assert (settings.glance.backend, settings.cinder.backends, settings.cinder.backup) == ("rbd", ("rbd",), "ceph")
    assert ("compute", "nodeGroups", "0", "ephemeralStorage") in settings.ceph_users() or (
        "compute", "ephemeralStorage") in settings.ceph_users()  # fmt: skip


def test_staging_has_no_ceph_and_gets_none() -> None:
    assert run.ceph_override(stack_config("staging")) == {}
    assert "ceph" not in run.machine_overrides("staging", "qemu")


class FakeApi:
    def __init__(self) -> None:
        self.secrets: list[tuple[str, dict[str, Any]]] = []

    def add_secret(self, namespace: str, manifest: dict[str, Any]) -> None:
        self.secrets.append((namespace, manifest))


def test_the_keyring_secrets_reach_the_api_and_the_kubelet_after_the_cluster_started(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = prod_settings()
    ceph = CephStandIn(settings.ceph, tmp_path / "ceph")
    started: list[str] = []

    def start(nodes: object, fabric: str) -> None:
        started.append(fabric)
        ceph.client_dir.mkdir(parents=True)
        for user in ("glance", "cinder", "cinder-backup"):
            (ceph.client_dir / f"ceph.client.{user}.keyring").write_text(f"[client.{user}]\n\tkey = K{user}\n")

    monkeypatch.setattr(ceph, "start", start)
    api, cloud = FakeApi(), SimpleNamespace(plan=SimpleNamespace(settings=settings), objects={})
    run.start_ceph(ceph, SimpleNamespace(nodes=[]), cloud, api)  # type: ignore[arg-type]
    assert started == ["cloud-fabric"]
    names = {manifest["metadata"]["name"] for _, manifest in api.secrets}
    assert names == {"ceph-client-glance", "ceph-client-cinder", "ceph-client-cinder-backup"}
    assert {ns for ns, _ in api.secrets} == {settings.namespace}
    assert cloud.objects[("Secret", "ceph-client-cinder")] == {"keyring": "[client.cinder]\n\tkey = Kcinder\n"}


def test_the_scenario_learns_what_keeps_data_in_ceph_and_how_to_reach_it(tmp_path: Path) -> None:
    settings = prod_settings()
    ceph = CephStandIn(settings.ceph, tmp_path / "ceph")
    env = run.ceph_env(ceph, SimpleNamespace(plan=SimpleNamespace(settings=settings)))  # type: ignore[arg-type]
    assert {"glance.backend", "cinder.backends", "cinder.backup"} <= set(json.loads(env["CEPH_USERS"]))
    assert json.loads(env["CEPH_POOLS"])["vms"] == "vms"
    assert env["CEPH_CONF"] == str(tmp_path / "ceph" / "client" / "ceph.conf") and env["CEPH_ID"] == "admin"
    assert run.ceph_env(None, SimpleNamespace()) == {"CEPH_USERS": "[]"}  # type: ignore[arg-type]
