"""The scenario's Ceph proof (tests/lab/cloud/ceph_check.py) and its report line, without a cloud."""

from __future__ import annotations

import json
from types import SimpleNamespace
from typing import Any

import pytest

from tests.lab.cloud import ceph_check
from tests.lab.cloud.report import _ceph_line

POOLS = {"images": "images", "volumes": "volumes", "vms": "ephemeral", "backups": "backups"}


@pytest.fixture
def ceph_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CEPH_USERS", json.dumps(["compute.ephemeralStorage", "glance.backend"]))
    monkeypatch.setenv("CEPH_POOLS", json.dumps(POOLS))
    monkeypatch.setenv("COMPUTE_HOSTS", "node-c1,node-c2")


def test_a_stack_without_ceph_skips_the_proof(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CEPH_USERS", "[]")
    facts: dict[str, Any] = {}
    ceph_check.run(SimpleNamespace(), {}, facts)  # type: ignore[arg-type]
    assert facts == {"ceph": {"not_run": "the stack keeps no data in Ceph"}}


def test_vm1s_disk_is_a_clone_of_the_images_snapshot_in_the_stacks_pools(
    ceph_env: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    asked = []

    def rbd_image(pool: str, name: str) -> dict[str, Any]:
        asked.append((pool, name))
        return {"parent": ["images", "img-1", "snap"]}

    monkeypatch.setattr(ceph_check, "rbd_image", rbd_image)
    found: dict[str, Any] = {}
    proof = ceph_check.CephProof(SimpleNamespace(), {"image": SimpleNamespace(id="img-1"), "vm1": "u-1"}, found)  # type: ignore[arg-type]
    proof.clone()
    assert asked == [("ephemeral", "u-1_disk")]
    assert found["clone"]["parent_is_image"] is True
    monkeypatch.setattr(ceph_check, "rbd_image", lambda pool, name: {"parent": None})  # a full copy
    proof.clone()
    assert found["clone"]["parent_is_image"] is False


def test_steps_that_need_an_earlier_steps_server_say_so(ceph_env: None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ceph_check.CephProof, "image", lambda self: None)
    monkeypatch.setattr(ceph_check.CephProof, "clone", lambda self: None)

    def fails(self: object) -> None:
        raise TimeoutError("vm-ceph ACTIVE: not after 600s")

    monkeypatch.setattr(ceph_check.CephProof, "boot_from_volume", fails)
    facts: dict[str, Any] = {}
    ceph_check.run(SimpleNamespace(), {}, facts)  # type: ignore[arg-type]
    assert facts["ceph"]["errors"]["boot_from_volume"].startswith("TimeoutError: vm-ceph ACTIVE")
    assert facts["ceph"]["attach"] == {"not_run": "no server from an earlier step"}
    assert facts["ceph"]["backup"] == {"not_run": "no data volume from an earlier step"}


def test_the_summary_line_names_each_check() -> None:
    line = _ceph_line({"image": {"protected_snapshot": True}, "attach": {"read_back_matches": False},
                       "errors": {"backup": "x"}})  # fmt: skip
    assert "image in RBD True" in line and "guest read back False" in line and "errors ['backup']" in line
    assert _ceph_line({"not_run": "no Ceph"}) == "not run (no Ceph)"


class _Cloud:
    """Nova and Cinder as the attach step sees them (a double: no cloud here). Cinder reports the
    volume available before Nova drops its own record of the attachment, as nova-compute does
    (Cinder's attachment first, then the block device mapping), for `lingering` more polls."""

    def __init__(self, lingering: int) -> None:
        self.lingering, self.attached, self.polls = lingering, False, 0
        self.compute = SimpleNamespace(
            create_volume_attachment=self.create_attachment,
            delete_volume_attachment=self.delete_attachment,
            volume_attachments=self.attachments,
            get_server_console_output=lambda server_id: {"output": "guest: disk wrote m-1\nguest: disk read m-1\n"},
        )
        self.block_storage = SimpleNamespace(
            create_volume=lambda **kw: SimpleNamespace(id="vol-1", status="available"),
            wait_for_status=lambda volume, **kw: volume,
        )

    def create_attachment(self, server: Any, volume: Any) -> None:
        if self.attached:
            raise RuntimeError(f"volume {volume.id} is already attached to instances: {server.id}")
        self.attached = True

    def delete_attachment(self, server: Any, volume: Any) -> None:
        self.polls = self.lingering

    def attachments(self, server: Any) -> list[Any]:
        if self.polls:
            self.polls -= 1
        else:
            self.attached = False
        return [SimpleNamespace(volume_id="vol-1")] if self.attached else []


def test_a_volume_is_attached_again_only_after_nova_forgets_the_detached_one(
    ceph_env: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(ceph_check, "rbd_image", lambda pool, name: {"head": "m-1"})
    monkeypatch.setattr(ceph_check.time, "sleep", lambda seconds: None)
    cloud, found = _Cloud(lingering=3), dict[str, Any]()
    proof = ceph_check.CephProof(cloud, {"server": SimpleNamespace(id="srv-1")}, found)  # type: ignore[arg-type]
    proof.attach()
    assert found["attach"]["read_back_matches"] is True and found["attach"]["in_rbd"] is True
