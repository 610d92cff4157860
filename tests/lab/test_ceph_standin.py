"""The lab's Ceph stand-in (tests/lab/cloud/ceph.py), as far as it is built without running it."""

from __future__ import annotations

from pathlib import Path

import pytest

from components.settings.ceph import Ceph
from tests.lab.cloud import ceph
from tests.lab.cloud.ceph import CEPH_ADDRESS, CEPH_NETNS, CephStandIn, monitors_override
from tests.lab.cloud.node import Node

FSID = "5c3f8a2e-7d41-4b9e-a6c0-2f1e9d8b7a63"
CEPH = {"external": {"fsid": FSID, "monitors": ["10.20.0.11"]}}


def standin(tmp_path: Path, **ceph: object) -> CephStandIn:
    return CephStandIn(Ceph.model_validate({**CEPH, **ceph}), tmp_path)


def test_clients_get_kolla_ansibles_capabilities_on_the_stacks_pools(tmp_path: Path) -> None:
    lab = standin(tmp_path, pools={"vms": "ephemeral"})
    commands = {c[c.index("get-or-create") + 1]: c for c in lab.client_commands() if "get-or-create" in c}
    assert set(commands) == {"client.glance", "client.cinder", "client.cinder-backup"}
    cinder = commands["client.cinder"]
    assert cinder[cinder.index("osd") + 1] == (
        "profile rbd pool=volumes, profile rbd pool=ephemeral, profile rbd-read-only pool=images"
    )
    assert cinder[cinder.index("mgr") + 1] == "profile rbd pool=volumes, profile rbd pool=ephemeral"
    glance = commands["client.glance"]
    assert glance[glance.index("mon") + 1 : glance.index("-o")] == [
        "profile rbd", "osd", "profile rbd pool=images", "mgr", "profile rbd pool=images"]  # fmt: skip
    pools = [c[c.index("init") + 1] for c in lab.client_commands() if "init" in c]
    assert pools == ["images", "volumes", "ephemeral", "backups"]
    # First, as the README tells the administrator: no client older than Mimic, so clones are v2.
    assert lab.client_commands()[0][-2:] == ["set-require-min-compat-client", "mimic"]


def test_novas_own_client_gets_cinders_capabilities(tmp_path: Path) -> None:
    lab = standin(tmp_path, clients={"nova": {"user": "nova", "keyringSecret": "ceph-client-nova"}})
    assert lab.caps("nova") == lab.caps("cinder")
    assert "client.nova" in [c[c.index("get-or-create") + 1] for c in lab.client_commands() if "get-or-create" in c]


def test_the_daemons_conf_carries_the_stacks_fsid_and_the_hosts_address(tmp_path: Path) -> None:
    conf = standin(tmp_path).conf()
    assert f"fsid = {FSID}\n" in conf and f"mon_host = [v2:{CEPH_ADDRESS}:3300,v1:{CEPH_ADDRESS}:6789]" in conf
    # BlueStore's block file outside the OSD's directory (proto/ceph: inside it, mkfs fails with ELOOP).
    assert f"bluestore_block_path = {tmp_path}/blk/osd.$id.block" in conf


def test_the_ceph_host_routes_each_nodes_pods_back_through_that_node(tmp_path: Path) -> None:
    nodes = [Node("node-cp", 1, tmp_path / "cp", {}), Node("node-c1", 2, tmp_path / "c1", {})]
    commands = standin(tmp_path).network_commands(nodes, "cloud-fabric")
    routes = [c[4:] for c in commands if c[:4] == ["ip", "netns", "exec", CEPH_NETNS] and "route" in c]
    assert routes == [
        ["ip", "route", "add", "10.244.1.0/24", "via", "192.168.200.11"],
        ["ip", "route", "add", "10.244.2.0/24", "via", "192.168.200.12"],
    ]
    assert ["ip", "netns", "exec", CEPH_NETNS, "ip", "addr", "add", f"{CEPH_ADDRESS}/24", "dev", "eth0"] in commands


def test_the_keyring_secrets_are_the_ones_the_stack_names(tmp_path: Path) -> None:
    lab = standin(tmp_path, clients={"glance": {"keyringSecret": "glance-keyring"}})
    (tmp_path / "client").mkdir()
    for user in ("glance", "cinder", "cinder-backup"):
        (tmp_path / "client" / f"ceph.client.{user}.keyring").write_text(f"[client.{user}]\n\tkey = K{user}\n")
    secrets = lab.keyring_secrets()
    assert set(secrets) == {"glance-keyring", "ceph-client-cinder", "ceph-client-cinder-backup"}
    assert secrets["ceph-client-cinder"] == {"keyring": "[client.cinder]\n\tkey = Kcinder\n"}


def test_the_stack_meets_the_lab_cluster_at_its_address() -> None:
    override = monitors_override(CEPH)
    assert override["external"] == {"fsid": FSID, "monitors": [CEPH_ADDRESS]}
    assert Ceph.model_validate(override).fsid == FSID


def test_the_conf_gives_bluestore_its_size_in_bytes_and_keeps_logs_in_the_state(tmp_path: Path) -> None:
    conf = standin(tmp_path).conf()
    assert "bluestore_block_size = 10737418240\n" in conf
    # Without these, the monitor writes its cluster log and crash reports under /var.
    assert f"mon_cluster_log_file = {tmp_path}/log/$cluster.log\n" in conf and f"crash_dir = {tmp_path}/crash" in conf


def test_the_monitor_is_made_with_the_stacks_fsid_at_the_hosts_address(tmp_path: Path) -> None:
    commands = standin(tmp_path).mon_mkfs_commands()
    monmap = next(c for c in commands if c[0] == "monmaptool")
    assert monmap[monmap.index("--fsid") + 1] == FSID
    assert monmap[monmap.index("--addv") + 1 : monmap.index("--addv") + 3] == [
        "a", f"[v2:{CEPH_ADDRESS}:3300,v1:{CEPH_ADDRESS}:6789]"]  # fmt: skip
    mkfs = commands[-1]
    assert mkfs[:4] == ["ip", "netns", "exec", CEPH_NETNS] and "--mkfs" in mkfs


def test_a_daemon_runs_in_the_foreground_in_the_hosts_namespace_and_cgroups(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(ceph, "cgroup_controllers", lambda: [Path("/sys/fs/cgroup/memory"), Path("/sys/fs/cgroup")])
    lab = standin(tmp_path)
    assert lab.daemon_command("osd", "0") == ["ceph-osd", "-f", "-c", f"{tmp_path}/ceph.conf", "-i", "0"]
    script = lab.launch_script(lab.daemon_command("mon", "a")).splitlines()
    assert script == [
        "echo $$ > /sys/fs/cgroup/memory/lab-nodes/ceph-host/cgroup.procs",
        "echo $$ > /sys/fs/cgroup/lab-nodes/ceph-host/cgroup.procs",
        f"exec ip netns exec {CEPH_NETNS} ceph-mon -f -c {tmp_path}/ceph.conf -i a",
    ]


def test_the_osd_takes_the_id_ceph_osd_new_prints(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    lab = standin(tmp_path)
    (tmp_path / "data").mkdir(parents=True)
    ran: list[tuple[list[str], str | None]] = []

    def check(command: list[str], stdin: str | None = None, timeout: float = 30) -> str:
        ran.append((command, stdin))
        return {"--gen-print-key": "S3CRET==\n", "new": "3\n"}.get(next(
            (a for a in command if a in ("--gen-print-key", "new")), ""), "")  # fmt: skip

    monkeypatch.setattr(lab, "_check", check)
    assert lab._create_osd() == "3"
    new = next((c, stdin) for c, stdin in ran if "new" in c)
    assert new[1] == '{"cephx_secret": "S3CRET=="}'
    keyring = next(c for c, _ in ran if "--create-keyring" in c)
    assert keyring[keyring.index("--name") + 1] == "osd.3" and keyring[-1] == "S3CRET=="
    assert (tmp_path / "data" / "osd.3").is_dir()
    mkfs = ran[-1][0]
    assert mkfs[mkfs.index("-i") + 1] == "3" and mkfs[mkfs.index("--osd-uuid") + 1] == new[0][new[0].index("new") + 1]


def test_a_client_conf_finds_each_clients_keyring_in_the_client_directory(tmp_path: Path) -> None:
    conf = standin(tmp_path).client_conf()
    assert f"keyring = {tmp_path}/client/$cluster.$name.keyring\n" in conf
    assert f"mon_host = [v2:{CEPH_ADDRESS}:3300,v1:{CEPH_ADDRESS}:6789]\n" in conf


def test_every_admin_command_runs_on_the_ceph_host(tmp_path: Path) -> None:
    for command in standin(tmp_path).client_commands():
        assert command[:4] == ["ip", "netns", "exec", CEPH_NETNS]
