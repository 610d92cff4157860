"""The lab's external Ceph cluster: a real one (Debian 12's Ceph 16), standing in for the operator's.

Written from the recipe proven in /work/proto/ceph (start.sh): one monitor, one manager and one
OSD whose BlueStore lives on a sparse file outside its data directory (no LVM, device-mapper or
kernel module: QEMU and the services use librbd), every path under the run's state directory,
the pools and clients of kolla-ansible's cephadm role (roles/cephadm/defaults/main.yml).

Where it runs: a host of its own on the lab's fabric, the network namespace `cloud-ceph` cabled to
the node network's bridge at CEPH_ADDRESS, as an external cluster sits on a network the nodes
reach. Host-network pods (cinder-volume, nova-compute, libvirt) reach it from their node's address;
other pods (glance-api, cinder-backup) leave their node with their own address (the lab routes pod
ranges without NAT, tests/lab/cloud/cluster.py), so the Ceph host routes each node's pod range back
through that node, as the nodes do among themselves.

What the stack gets: its monitors replaced by CEPH_ADDRESS (a machine difference, like the virt
type), its fsid kept (the cluster is created with it), and the keyring Secrets its
`ceph.clients` name, made from the keyrings the cluster wrote.

How it runs: each daemon (`ceph-mon`, `ceph-mgr`, `ceph-osd`, in the foreground, logging under the
state directory) is a child of the lab, started inside CEPH_NETNS and in a cgroup of the lab's tree
(lab-nodes/ceph-host), so that stop() ends it and a run killed before its teardown leaves nothing
the next run's kill_cgroups() does not end. start() returns once `ceph health` says HEALTH_OK, or
raises CephStartError with what the cluster said and the ends of the daemons' logs.

start_alone() starts the same daemons with no fabric: in a network namespace of its own, on its
loopback, without pools or clients, for a test whose Rook stand-in (tests/lab/cloud/rook_standin.py)
makes those as Rook's operator does.
"""

from __future__ import annotations

import contextlib
import ipaddress
import json
import os
import shlex
import shutil
import signal
import subprocess
import time
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from components.settings.ceph import KEYRING_KEY, Ceph, CephClient
from tests.lab.cloud.node import LAB_NODES, NODE_NETWORK, Node, cgroup_controllers, make_cgroup, run, tx_checksum_off

CEPH_NETNS = "cloud-ceph"
CEPH_ADDRESS = str(NODE_NETWORK.network_address + 5)  # below the nodes (.11 on), above the fabric's .1
CEPH_CGROUP = "ceph-host"  # under lab-nodes: kill_cgroups() ends what a killed run left
MON, MGR = "a", "x"
# kolla-ansible's cephadm_ceph_users; Nova's own client, when the stack names one, gets cinder's.
CAPS = {
    "glance": {"osd": "profile rbd pool={images}", "mgr": "profile rbd pool={images}"},
    "cinder": {
        "osd": "profile rbd pool={volumes}, profile rbd pool={vms}, profile rbd-read-only pool={images}",
        "mgr": "profile rbd pool={volumes}, profile rbd pool={vms}",
    },
    "cinder_backup": {"osd": "profile rbd pool={backups}", "mgr": "profile rbd pool={backups}"},
}
OSD_SIZE = 10 * 1024**3  # a sparse file: what the lab's images and volumes use of it (bytes: bluestore's unit)
PG_NUM = 8  # per pool: 4 pools of 8 on one OSD, far below mon_max_pg_per_osd
HEALTH_TIMEOUT = 120.0  # the prototype reached HEALTH_OK in 13 s on an idle machine
STOP_TIMEOUT = 15.0


class CephStartError(RuntimeError):
    pass


@dataclass
class CephStandIn:
    ceph: Ceph  # the stack's settings: its fsid, pools and clients
    state: Path  # everything of the cluster lives here
    log: Callable[[str], None] = print
    # Where it runs: the lab's Ceph host by default; a test that starts it alone (start_alone) gives its own.
    address: str = CEPH_ADDRESS
    netns: str = CEPH_NETNS
    cgroup: str = CEPH_CGROUP  # under lab-nodes
    fsid: str | None = None  # the cluster's; None: the stack's (an external cluster's, its settings name it)
    processes: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)  # daemon name → its process
    started_seconds: float | None = None

    @property
    def cluster_fsid(self) -> str:
        return self.fsid or self.ceph.fsid

    @property
    def conf_path(self) -> Path:
        return self.state / "ceph.conf"

    @property
    def client_dir(self) -> Path:
        return self.state / "client"

    @property
    def client_conf_path(self) -> Path:
        """A client's ceph.conf, for the scenario's checks with the rados and rbd modules."""
        return self.client_dir / "ceph.conf"

    def clients(self) -> dict[str, CephClient]:
        """Each client the stack names, once, by the caps it gets."""
        clients = self.ceph.clients
        found = {"glance": clients.glance, "cinder": clients.cinder, "cinder_backup": clients.cinder_backup}
        if clients.nova is not None:
            found["nova"] = clients.nova
        return found

    def caps(self, name: str) -> list[str]:
        """`ceph auth get-or-create` capability arguments of a client (its kind's: nova takes cinder's)."""
        pools = self.ceph.pools.model_dump()
        kind = CAPS["cinder" if name == "nova" else name]
        return ["mon", "profile rbd", "osd", kind["osd"].format(**pools), "mgr", kind["mgr"].format(**pools)]

    def conf(self) -> str:
        """The daemons' ceph.conf: proto/ceph/start.sh's, with the stack's fsid and one copy of everything."""
        d = self.state
        return f"""[global]
fsid = {self.cluster_fsid}
mon_initial_members = {MON}
mon_host = [v2:{self.address}:3300,v1:{self.address}:6789]
public_addr = {self.address}
cluster_addr = {self.address}
auth_cluster_required = cephx
auth_service_required = cephx
auth_client_required = cephx
auth_allow_insecure_global_id_reclaim = false
mon_warn_on_insecure_global_id_reclaim_allowed = false
run_dir = {d}/run
log_file = {d}/log/$cluster-$name.log
mon_cluster_log_file = {d}/log/$cluster.log
crash_dir = {d}/crash
mon_data = {d}/data/mon.$id
mgr_data = {d}/data/mgr.$id
osd_data = {d}/data/osd.$id
osd_pool_default_size = 1
osd_pool_default_min_size = 1
mon_allow_pool_size_one = true
osd_crush_chooseleaf_type = 0
mon_warn_on_pool_no_redundancy = false
osd_pool_default_pg_num = {PG_NUM}
osd_pool_default_pgp_num = {PG_NUM}
osd_pool_default_pg_autoscale_mode = off
mon_allow_pool_delete = true
mon_max_pg_per_osd = 500
mon_pg_warn_min_per_osd = 0
mon_data_avail_warn = 5
mon_data_avail_crit = 2
paxos_propose_interval = 0.2

[mon]
keyring = $mon_data/keyring

[mgr]
keyring = $mgr_data/keyring

[osd]
keyring = $osd_data/keyring
osd_objectstore = bluestore
bluestore_block_path = {d}/blk/osd.$id.block
bluestore_block_create = true
bluestore_block_size = {OSD_SIZE}
bluestore_block_db_create = false
bluestore_block_wal_create = false
bluestore_fsck_on_mount = false
osd_memory_target = 939524096
osd_op_num_shards = 1
osd_op_num_threads_per_shard = 2
osd_class_update_on_start = false

[client.admin]
keyring = {d}/ceph.client.admin.keyring
"""

    def client_conf(self) -> str:
        """What a client needs (the stack's services get theirs from the program): the monitors, its keyrings."""
        return f"""[global]
fsid = {self.cluster_fsid}
mon_host = [v2:{self.address}:3300,v1:{self.address}:6789]
auth_cluster_required = cephx
auth_service_required = cephx
auth_client_required = cephx
keyring = {self.client_dir}/$cluster.$name.keyring
"""

    def network_commands(self, nodes: list[Node], fabric_netns: str) -> list[list[str]]:
        """The Ceph host on the fabric: its namespace, a NIC on the node bridge, routes to the pod ranges."""
        inside = ["ip", "netns", "exec", self.netns]
        prefix = ipaddress.ip_network(NODE_NETWORK).prefixlen
        commands = [
            ["ip", "netns", "add", self.netns],
            [*inside, "ip", "link", "set", "lo", "up"],
            ["ip", "link", "add", "eth0", "netns", self.netns, "type", "veth", "peer", "name", "n-ceph",
             "netns", fabric_netns],
            ["ip", "netns", "exec", fabric_netns, "ip", "link", "set", "n-ceph", "master", "nodes", "up"],
            [*inside, "ip", "addr", "add", f"{self.address}/{prefix}", "dev", "eth0"],
            [*inside, "ip", "link", "set", "eth0", "up"],
        ]  # fmt: skip
        commands += [[*inside, "ip", "route", "add", str(node.pod_cidr), "via", node.ip] for node in nodes]
        return commands

    def ceph_command(self, *args: str) -> list[str]:
        """The admin's `ceph` command, run on the Ceph host (the monitor listens only there)."""
        return ["ip", "netns", "exec", self.netns, "ceph", "-c", str(self.conf_path), "--connect-timeout", "30", *args]

    def rbd_command(self, *args: str) -> list[str]:
        """The admin's `rbd` command, run on the Ceph host."""
        return ["ip", "netns", "exec", self.netns, "rbd", "-c", str(self.conf_path), *args]

    def client_commands(self) -> list[list[str]]:
        """Clients of Mimic or later only (so RBD clones are v2), the pools (rbd pool init enables the rbd
        application) and each client's key, written to a keyring: the README's steps for the administrator."""
        pools = list(dict.fromkeys(self.ceph.pools.model_dump().values()))
        # librbd clones v2 when the cluster admits no client older than Mimic (rbd_default_clone_format
        # auto): a v2 clone does not pin its parent's snapshot, so Glance can delete an image that VM
        # disks, volumes or snapshots were cloned from (glance_store moves it to the trash), which
        # Tempest's ImageDependencyTests expect; with v1 clones Glance answers 409.
        commands = [self.ceph_command("osd", "set-require-min-compat-client", "mimic")]
        commands += [self.ceph_command("osd", "pool", "create", pool, str(PG_NUM), str(PG_NUM), "replicated")
                     for pool in pools]  # fmt: skip
        commands += [self.rbd_command("pool", "init", pool) for pool in pools]
        for name, client in self.clients().items():
            keyring = self.client_dir / f"ceph.client.{client.user}.keyring"
            entity = f"client.{client.user}"
            commands.append(self.ceph_command("auth", "get-or-create", entity, *self.caps(name), "-o", str(keyring)))
        return commands

    def mon_mkfs_commands(self) -> list[list[str]]:
        """start.sh's monitor: its key and the admin's, one monmap with the host's address, the store."""
        tmp, d = self.state / "tmp", self.state
        admin = d / "ceph.client.admin.keyring"
        return [
            ["ceph-authtool", "--create-keyring", str(tmp / "mon.keyring"), "--gen-key", "-n", "mon.",
             "--cap", "mon", "allow *"],
            ["ceph-authtool", "--create-keyring", str(admin), "--gen-key", "-n", "client.admin", "--cap", "mon",
             "allow *", "--cap", "osd", "allow *", "--cap", "mds", "allow *", "--cap", "mgr", "allow *"],
            ["ceph-authtool", str(tmp / "mon.keyring"), "--import-keyring", str(admin)],
            ["monmaptool", "--create", "--addv", MON, f"[v2:{self.address}:3300,v1:{self.address}:6789]",
             "--fsid", self.cluster_fsid, str(tmp / "monmap")],
            ["ip", "netns", "exec", self.netns, "ceph-mon", "-c", str(self.conf_path), "--mkfs", "-i", MON,
             "--monmap", str(tmp / "monmap"), "--keyring", str(tmp / "mon.keyring")],
        ]  # fmt: skip

    def daemon_command(self, kind: str, ident: str) -> list[str]:
        """A daemon in the foreground (-f: the lab keeps its process), logging to the state's log files."""
        return [f"ceph-{kind}", "-f", "-c", str(self.conf_path), "-i", ident]

    def launch_script(self, argv: list[str]) -> str:
        """Join the Ceph host's cgroups, then run argv in its network namespace."""
        joins = "".join(f"echo $$ > {shlex.quote(str(c))}/cgroup.procs\n" for c in self.cgroups())
        return f"{joins}exec ip netns exec {self.netns} {shlex.join(argv)}\n"

    def cgroups(self) -> list[Path]:
        return [controller / LAB_NODES / self.cgroup for controller in cgroup_controllers()]

    # -- running it --------------------------------------------------------------------------------

    def start(self, nodes: list[Node], fabric_netns: str, timeout: float = HEALTH_TIMEOUT) -> None:
        """The cluster, from nothing to HEALTH_OK with the stack's pools and clients (start.sh's steps)."""
        started = time.monotonic()
        self._prepare()
        for command in self.network_commands(nodes, fabric_netns):
            run(*command)
        # The nodes' NICs compute their own checksums (tests/lab/cloud/node.py): Open vSwitch's userspace
        # datapath on each node's eth0 passes frames on as they are, unfinished checksums included.
        tx_checksum_off(self.netns, "eth0")
        self._daemons(started, timeout)
        for command in self.client_commands():
            self._check(command, timeout=120)
        self.client_conf_path.write_text(self.client_conf())
        shutil.copy(self.state / "ceph.client.admin.keyring", self.client_dir / "ceph.client.admin.keyring")
        self._healthy_by(started, timeout)

    def start_alone(self, timeout: float = HEALTH_TIMEOUT) -> None:
        """The cluster alone in a network namespace of its own, on its loopback (self.address, e.g.
        127.0.0.1), without pools or clients: for a test whose operator stand-in makes those."""
        started = time.monotonic()
        self._prepare()
        run("ip", "netns", "add", self.netns)
        run("ip", "netns", "exec", self.netns, "ip", "link", "set", "lo", "up")
        self._daemons(started, timeout)
        self._healthy_by(started, timeout)

    def _prepare(self) -> None:
        if self.state.exists():
            shutil.rmtree(self.state)
        for sub in ("run", "log", "data", "tmp", "blk", "crash", "client"):
            (self.state / sub).mkdir(parents=True)
        self.conf_path.write_text(self.conf())
        for cgroup in self.cgroups():
            make_cgroup(cgroup)

    def _daemons(self, started: float, timeout: float) -> None:
        """The monitor, the manager and the OSD running, the OSD up (start.sh's steps)."""
        (self.state / "data" / f"mon.{MON}").mkdir()
        for command in self.mon_mkfs_commands():
            self._check(command)
        self._launch(f"mon.{MON}", self.daemon_command("mon", MON))
        (self.state / "data" / f"mgr.{MGR}").mkdir()
        self._check(self.ceph_command("auth", "get-or-create", f"mgr.{MGR}", "mon", "allow profile mgr", "osd",
                                      "allow *", "mds", "allow *", "-o", str(self.state / "data" / f"mgr.{MGR}" /
                                      "keyring")), timeout=60)  # fmt: skip
        self._launch(f"mgr.{MGR}", self.daemon_command("mgr", MGR))
        osd = self._create_osd()
        self._launch(f"osd.{osd}", self.daemon_command("osd", osd))
        self._wait("the OSD up", lambda: self._osds_up() >= 1, timeout, started)

    def _healthy_by(self, started: float, timeout: float) -> None:
        self._wait("HEALTH_OK", self._healthy, timeout, started)
        self.started_seconds = round(time.monotonic() - started, 1)
        self.log(f"ceph: HEALTH_OK after {self.started_seconds}s at {self.address}")

    def _create_osd(self) -> str:
        """`ceph osd new` with a key of its own; the id it prints names the OSD's directory; its mkfs."""
        osd_uuid = str(uuid.uuid4())
        secret = self._check(["ceph-authtool", "--gen-print-key"]).strip()
        ident = self._check(self.ceph_command("osd", "new", osd_uuid, "-i", "-"),
                            stdin=json.dumps({"cephx_secret": secret}), timeout=60).strip()  # fmt: skip
        if not ident.isdigit():
            raise CephStartError(f"`ceph osd new` printed {ident!r}, not an OSD id")
        data = self.state / "data" / f"osd.{ident}"
        data.mkdir()
        self._check(["ceph-authtool", "--create-keyring", str(data / "keyring"), "--name", f"osd.{ident}",
                     "--add-key", secret])  # fmt: skip
        mkfs = ["ceph-osd", "-c", str(self.conf_path), "-i", ident, "--mkfs", "--osd-uuid", osd_uuid]
        self._check(["ip", "netns", "exec", self.netns, *mkfs], timeout=180)
        return ident

    def _launch(self, name: str, argv: list[str]) -> None:
        script = self.state / "run" / f"{name}.sh"
        script.write_text(self.launch_script(argv))
        with (self.state / "log" / f"{name}.out").open("ab") as out:
            self.processes[name] = subprocess.Popen(["/bin/sh", str(script)], stdout=out, stderr=subprocess.STDOUT)

    def _check(self, command: list[str], stdin: str | None = None, timeout: float = 30) -> str:
        try:
            done = subprocess.run(command, input=stdin, capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired as expired:
            raise CephStartError(f"`{shlex.join(command)}` did not end in {timeout:.0f}s{self._dead()}") from expired
        if done.returncode != 0:
            raise CephStartError(
                f"`{shlex.join(command)}` exited {done.returncode}: {done.stderr.strip()[-1500:]}{self._dead()}"
            )
        return done.stdout

    def _osds_up(self) -> int:
        done = subprocess.run(self.ceph_command("osd", "stat", "-f", "json"), capture_output=True, text=True,
                              timeout=40)  # fmt: skip
        try:
            return int(json.loads(done.stdout)["num_up_osds"])
        except (ValueError, KeyError, TypeError):
            return 0

    def _healthy(self) -> bool:
        done = subprocess.run(self.ceph_command("health"), capture_output=True, text=True, timeout=40)
        return done.stdout.startswith("HEALTH_OK")

    def _wait(self, what: str, check: Callable[[], bool], timeout: float, since: float) -> None:
        while not check():
            if self._dead():
                raise CephStartError(f"waiting for {what}:{self._dead()}")
            if time.monotonic() - since > timeout:
                detail = subprocess.run(self.ceph_command("health", "detail"), capture_output=True, text=True,
                                        timeout=40)  # fmt: skip
                raise CephStartError(
                    f"no {what} {timeout:.0f}s after the start: {(detail.stdout + detail.stderr).strip()[-1500:]}"
                    f"{self._log_tails()}"
                )
            time.sleep(1)

    def _dead(self) -> str:
        """The daemons that exited, with the end of their logs ('' while all run)."""
        dead = {name: p.returncode for name, p in self.processes.items() if p.poll() is not None}
        if not dead:
            return ""
        return "; exited: " + ", ".join(f"{name} ({code})" for name, code in dead.items()) + self._log_tails(dead)

    def _log_tails(self, names: Iterable[str] | None = None) -> str:
        tails = []
        for name in names if names is not None else self.processes:
            for log in (self.state / "log" / f"{name}.out", self.state / "log" / f"ceph-{name}.log"):
                if log.exists() and log.stat().st_size:
                    tails.append(f"\n--- {log.name}:\n" + "\n".join(log.read_text(errors="replace").splitlines()[-15:]))
        return "".join(tails)

    def stop(self) -> None:
        """End the daemons (TERM, then KILL), the Ceph host's namespace and cgroups, and the cluster's state."""
        for process in self.processes.values():
            if process.poll() is None:
                process.terminate()
        deadline = time.monotonic() + STOP_TIMEOUT
        for process in self.processes.values():
            try:
                process.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=10)
        for cgroup in self.cgroups():
            if cgroup.exists():
                for pid in (cgroup / "cgroup.procs").read_text().split():
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(int(pid), signal.SIGKILL)
        if Path(f"/run/netns/{self.netns}").exists():
            run("ip", "netns", "delete", self.netns, check=False)
        shutil.rmtree(self.state, ignore_errors=True)

    def facts(self) -> dict[str, object]:
        """What the report says of the stand-in (report.json's stand_ins.ceph): its daemons count as the
        pods of the other stand-ins do (pods, ready: running), beside where it ran and how soon it was healthy."""
        running = sum(p.poll() is None for p in self.processes.values())
        return {"kind": "Ceph 16 (Debian 12)", "address": self.address, "daemons": sorted(self.processes),
                "pods": len(self.processes), "ready": running, "healthy_after_s": self.started_seconds}  # fmt: skip

    def keyring_secrets(self) -> dict[str, dict[str, str]]:
        """The Secrets the stack's clients name (keyringSecret → {keyring: the keyring file}), as a user makes them."""
        return {
            client.keyring_secret: {KEYRING_KEY: (self.client_dir / f"ceph.client.{client.user}.keyring").read_text()}
            for client in self.clients().values()
        }


def monitors_override(ceph_setting: dict) -> dict:
    """The stack's `ceph` with the lab's Ceph host as its one monitor (fsid, pools and clients kept)."""
    external = {**ceph_setting.get("external", {}), "monitors": [CEPH_ADDRESS]}
    return {**ceph_setting, "external": external}
