"""The issue's proof with a real Ceph (tests/lab/cloud/ceph.py's stand-in), run by tests/lab/cloud/scenario.py.

Only for a stack that keeps data in Ceph (CEPH_USERS, the settings that do, from tests/lab/cloud/run.py).
What OpenStack says is checked against what the cluster holds, read with the rbd module (Debian's
python3-rbd, linked into the OpenStack venv) as the cluster's administrator (CEPH_CONF, CEPH_ID):

- the guest image uploaded to Glance is an RBD image in the images pool with its protected `snap`;
- vm1, booted from it, has its disk `vms/<uuid>_disk` cloned from that snapshot (no copy);
- a volume made from the image is a clone too, and a server boots from it (boot_index 0);
- a second volume attached to that running server: the guest writes a marker on it (tests/lab/cloud/
  guest.py's disk markers), reads it back after a detach and a re-attach, and the volume's RBD image
  holds it;
- a snapshot of that volume is an RBD snapshot; its backup (cinder-backup's Ceph driver) becomes
  available with its image in the backups pool;
- the boot-from-volume server live-migrates with block_migration False (its disk stays in Ceph, no
  copy) and its guest goes on counting.
Each check's failure is recorded in `errors`, not raised; the server it booted is deleted at the end.
"""

from __future__ import annotations

import json
import os
import time
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from tests.lab.cloud.guest import parse_console

if TYPE_CHECKING:  # the scenario runs in the OpenStack venv; its tests in the program's, without the SDK
    import openstack

VOLUME_TIMEOUT, SERVER_TIMEOUT, CONSOLE_TIMEOUT, BACKUP_TIMEOUT, MIGRATION_TIMEOUT = 300, 600, 300, 600, 600
GLANCE_SNAPSHOT = "snap"  # glance_store's rbd driver snapshots each image under this name


def users() -> list[str]:
    return list(json.loads(os.environ.get("CEPH_USERS") or "[]"))


def pool(kind: str) -> str:
    return str(json.loads(os.environ["CEPH_POOLS"])[kind])


@contextmanager
def ioctx(pool_name: str) -> Iterator[Any]:
    """A connection to the cluster as its administrator, opened on one pool."""
    import rados  # Debian's python3-rados, in the OpenStack venv (tests/lab/realenv/openstack_venv.py)

    conf = {"client_mount_timeout": "30", "rados_mon_op_timeout": "30", "rados_osd_op_timeout": "60"}
    cluster = rados.Rados(conffile=os.environ["CEPH_CONF"], rados_id=os.environ.get("CEPH_ID", "admin"), conf=conf)
    with cluster, cluster.open_ioctx(pool_name) as io:
        yield io


def rbd_image(pool_name: str, name: str) -> dict[str, Any]:
    """What the cluster holds under a name: size, snapshots, parent (pool, image, snapshot) if a clone."""
    import rbd

    with ioctx(pool_name) as io, rbd.Image(io, name, read_only=True) as image:
        try:
            parent: list[str] | None = list(image.parent_info())
        except rbd.ImageNotFound:
            parent = None
        return {"pool": pool_name, "name": name, "id": image.id(), "size": image.size(),
                "snapshots": sorted(s["name"] for s in image.list_snaps()), "parent": parent,
                "head": image.read(0, 64).rstrip(b"\0").decode(errors="replace")}  # fmt: skip


def rbd_names(pool_name: str) -> list[str]:
    import rbd

    with ioctx(pool_name) as io:
        return sorted(rbd.RBD().list(io))


def _until(what: str, check: Callable[[], Any], timeout: float, interval: float = 3) -> Any:
    deadline = time.monotonic() + timeout
    while not (found := check()):
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what}: not after {timeout:.0f}s")
        time.sleep(interval)
    return found


def _console(conn: openstack.connection.Connection, server_id: str) -> Any:
    return parse_console(conn.compute.get_server_console_output(server_id)["output"])


class CephProof:
    def __init__(self, conn: openstack.connection.Connection, made: dict[str, Any], facts: dict[str, Any]) -> None:
        self.conn, self.made, self.found = conn, made, facts
        self.hosts = os.environ["COMPUTE_HOSTS"].split(",")

    def image(self) -> None:
        image_id = self.made["image"].id
        held = rbd_image(pool("images"), image_id)
        self.found["image"] = {**held, "protected_snapshot": GLANCE_SNAPSHOT in held["snapshots"]}

    def clone(self) -> None:
        if not any(u.startswith("compute.") for u in users()):
            self.found["clone"] = {"not_run": "Nova's disks are not in Ceph in this stack"}
            return
        server_id = self.made["vm1"]
        disk = rbd_image(pool("vms"), f"{server_id}_disk")
        expected = [pool("images"), self.made["image"].id, GLANCE_SNAPSHOT]
        self.found["clone"] = {"disk": f"{pool('vms')}/{server_id}_disk", "parent": disk["parent"],
                               "parent_is_image": disk["parent"] == expected}  # fmt: skip

    def boot_from_volume(self) -> None:
        block = self.conn.block_storage
        volume = block.create_volume(size=1, image_id=self.made["image"].id, name="ceph-boot")
        volume = block.wait_for_status(volume, status="available", failures=["error"], wait=VOLUME_TIMEOUT)
        self.made["boot_volume"] = volume
        held = rbd_image(pool("volumes"), f"volume-{volume.id}")
        server = self.conn.compute.create_server(
            name="vm-ceph", flavor_id=self.made["flavor"].id, networks=[{"uuid": self.made["network"].id}],
            availability_zone=f"nova:{self.hosts[0]}",
            block_device_mapping=[{"boot_index": 0, "uuid": volume.id, "source_type": "volume",
                                   "destination_type": "volume", "delete_on_termination": False}],
        )  # fmt: skip
        self.made["server"] = server
        server = self.conn.compute.wait_for_server(server, status="ACTIVE", failures=["ERROR"], wait=SERVER_TIMEOUT)
        _until("vm-ceph's guest counting", lambda: _console(self.conn, server.id).alive, CONSOLE_TIMEOUT, 5)
        console = _console(self.conn, server.id)  # what the guest said of itself, not that the wait ended
        self.found["boot_from_volume"] = {"volume_parent": held["parent"], "status": server.status,
                                          "host": server.compute_host, "image_ref": server.image.get("id") or None,
                                          "booted": console.booted, "alive_lines": console.alive}  # fmt: skip

    def attach(self) -> None:
        compute, block = self.conn.compute, self.conn.block_storage
        server = self.made["server"]
        data = block.create_volume(size=1, name="ceph-data")
        data = block.wait_for_status(data, status="available", failures=["error"], wait=VOLUME_TIMEOUT)
        self.made["data_volume"] = data

        def attach_and_wait() -> None:
            compute.create_volume_attachment(server, volume=data)
            block.wait_for_status(data, status="in-use", failures=["error"], wait=VOLUME_TIMEOUT)

        def detach_and_wait() -> None:
            compute.delete_volume_attachment(server, data)
            block.wait_for_status(data, status="available", failures=["error"], wait=VOLUME_TIMEOUT)
            # nova-compute deletes its own record (the block device mapping) only after Cinder's
            # attachment: until then Nova refuses a new attachment of the volume to this server
            # ("already attached"). Tempest waits for the same (waiters.wait_for_volume_attachment_
            # remove_from_server).
            _until(
                "Nova's record of the detached volume gone",
                lambda: all(a.volume_id != data.id for a in compute.volume_attachments(server)),
                VOLUME_TIMEOUT,
                2,
            )

        attach_and_wait()
        wrote = _until("the guest's marker on the attached disk", lambda: _console(self.conn, server.id).disk_wrote,
                       CONSOLE_TIMEOUT, 5)[-1]  # fmt: skip
        detach_and_wait()
        in_rbd = rbd_image(pool("volumes"), f"volume-{data.id}")["head"]
        attach_and_wait()
        read = _until("the guest reading the re-attached disk", lambda: _console(self.conn, server.id).disk_read,
                      CONSOLE_TIMEOUT, 5)[-1]  # fmt: skip
        detach_and_wait()
        self.found["attach"] = {"wrote": wrote, "read_back": read, "read_back_matches": read == wrote,
                                "in_rbd": in_rbd.startswith(wrote)}  # fmt: skip

    def snapshot(self) -> None:
        block, data = self.conn.block_storage, self.made["data_volume"]
        snap = block.create_snapshot(volume_id=data.id, name="ceph-snap")
        snap = block.wait_for_status(snap, status="available", failures=["error"], wait=VOLUME_TIMEOUT)
        held = rbd_image(pool("volumes"), f"volume-{data.id}")["snapshots"]
        self.found["snapshot"] = {"status": snap.status, "rbd_snapshots": held,
                                  "in_rbd": f"snapshot-{snap.id}" in held}  # fmt: skip

    def backup(self) -> None:
        if "cinder.backup" not in users():
            self.found["backup"] = {"not_run": "cinder-backup does not back up to Ceph in this stack"}
            return
        block, data = self.conn.block_storage, self.made["data_volume"]
        backup = block.create_backup(volume_id=data.id, name="ceph-backup")
        backup = block.wait_for_status(backup, status="available", failures=["error"], wait=BACKUP_TIMEOUT)
        names = rbd_names(pool("backups"))
        self.found["backup"] = {"status": backup.status, "rbd_images": names,
                                "in_rbd": any(data.id in n for n in names)}  # fmt: skip

    def live_migration(self) -> None:
        if len(self.hosts) < 2:
            self.found["live_migration"] = {"not_run": "one compute node"}
            return
        compute, server = self.conn.compute, self.made["server"]
        before = _console(self.conn, server.id).alive_values
        disk = f"volume-{self.made['boot_volume'].id}"
        disk_before = rbd_image(pool("volumes"), disk)
        source = compute.get_server(server.id).compute_host
        other = next(h for h in self.hosts if h != source)
        started = time.monotonic()
        # Its disk is in Ceph: no block migration (nova refuses one of shared storage), nothing copied.
        compute.live_migrate_server(server, host=None, block_migration=False)

        def arrived() -> Any:
            found = compute.get_server(server.id)
            return found if found.status == "ACTIVE" and found.compute_host == other else None

        moved = _until(f"vm-ceph on {other}", arrived, MIGRATION_TIMEOUT)
        seconds = round(time.monotonic() - started, 1)
        time.sleep(25)  # two more alive lines, from the destination's QEMU
        after = _console(self.conn, server.id).alive_values
        from tests.lab.cloud.migration_check import _counter_kept  # imports the SDK

        kept = _counter_kept(before, after)
        disk_after = rbd_image(pool("volumes"), disk)
        # Observed, not asked for: the guest's disk is the same RBD image (its id) on the destination, unchanged
        # in size and parent, so nothing of it was copied (a block migration writes a new disk there).
        same_disk = {k: disk_before[k] for k in ("id", "size", "parent")} == {
            k: disk_after[k] for k in ("id", "size", "parent")
        }
        self.found["live_migration"] = {"from": source, "to": moved.compute_host, "seconds": seconds,
                                        "disk_image": disk_before["id"], "same_disk_image": same_disk,
                                        "counter_kept": kept}  # fmt: skip

    def cleanup(self) -> None:
        """The server goes (the CPUs are few); the volumes stay for whoever looks at the cloud after."""
        server = self.made.get("server")
        if server is not None:
            self.conn.compute.delete_server(server)
            self.conn.compute.wait_for_delete(server, wait=300)


def run(conn: openstack.connection.Connection, made: dict[str, Any], facts: dict[str, Any]) -> None:
    if not users():
        facts["ceph"] = {"not_run": "the stack keeps no data in Ceph"}
        return
    found: dict[str, Any] = {"uses": users(), "errors": {}}
    facts["ceph"] = found
    proof = CephProof(conn, made, found)
    steps = [("image", proof.image), ("clone", proof.clone), ("boot_from_volume", proof.boot_from_volume),
             ("attach", proof.attach), ("snapshot", proof.snapshot), ("backup", proof.backup),
             ("live_migration", proof.live_migration), ("cleanup", proof.cleanup)]  # fmt: skip
    for name, step in steps:
        needs = {"attach": "server", "live_migration": "server", "snapshot": "data_volume", "backup": "data_volume"}
        if name in needs and needs[name] not in made:
            found[name] = {"not_run": f"no {needs[name].replace('_', ' ')} from an earlier step"}
            continue
        try:
            step()
        except Exception as error:  # each check's failure is a finding of the report
            found["errors"][name] = f"{type(error).__name__}: {error}\n{traceback.format_exc()[-1200:]}"
