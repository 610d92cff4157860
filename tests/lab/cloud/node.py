"""One node of the lab's cluster: its network namespace, its pods' addresses, cgroups and hostPaths.

A node is what a kubelet manages on a real cluster, kept apart from the machine and from the
other nodes:
- its network namespace (`ip netns`) holds its address on the node network (eth0, cabled to the
  cluster's fabric, tests/lab/cloud/cluster.py), its pod bridge `cni0` with a pod range of its own
  (the CNI's job), routes to the other nodes' pod ranges and, on the network node, the provider
  network's NIC; host-network pods run in it, every other pod gets a namespace of its own on the
  bridge;
- its hostPath volumes are directories of its own, except the host's devices and kernel modules,
  which a node really shares with its pods (and here, the nodes with each other);
- its cgroup tree is a subtree of the machine's (`lab-nodes/<node>` in every v1 controller and in
  the v2 tree): its containers run in a cgroup namespace rooted there, and its hostPath
  /sys/fs/cgroup shows that subtree, so that a pod that manages cgroups of its own (libvirt for
  its guests, and under option 5 for itself) does so within its node, as on a machine of its own;
- each pod gets a cgroup in every controller, `kubepods/<pod>/<container>` of its node's tree.
"""

from __future__ import annotations

import contextlib
import ipaddress
import os
import signal
import subprocess
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# The node network: node i has NODE_NETWORK's address .(10+i); the fabric's bridge is .1.
NODE_NETWORK = ipaddress.ip_network("192.168.200.0/24")
FABRIC_GATEWAY = str(NODE_NETWORK.network_address + 1)
# Node i's pods get 10.244.i.0/24, its bridge cni0 the first address.
POD_NETWORK = ipaddress.ip_network("10.244.0.0/16")
CGROUP_ROOT = Path("/sys/fs/cgroup")
LAB_NODES = "lab-nodes"
KUBEPODS = "kubepods"
# Host paths that are the machine's own, not the node's state: devices and kernel modules.
SHARED_WITH_MACHINE = ("/dev", "/lib/modules")
CGROUP_FS = "/sys/fs/cgroup"


def run(
    *args: str, check: bool = True, netns: str | None = None, stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    command = ["ip", "netns", "exec", netns, *args] if netns else list(args)
    done = subprocess.run(command, capture_output=True, text=True, input=stdin)
    if check and done.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} exited {done.returncode}: {done.stderr.strip()}")
    return done


def cgroup_controllers() -> list[Path]:
    """The v1 controller hierarchies of this machine, and the v2 tree if it has one."""
    found = []
    for entry in sorted(CGROUP_ROOT.iterdir()):
        if (entry / "cgroup.procs").exists():
            found.append(entry)
    if (CGROUP_ROOT / "cgroup.controllers").exists():
        found.append(CGROUP_ROOT)
    return found


@dataclass
class Node:
    name: str  # its hostname, and so Nova's host name of a compute node
    index: int  # 1, 2, ...: picks its addresses
    state: Path  # the node's directory: hostPath volumes, pods
    labels: dict[str, str]
    taints: list[dict[str, Any]] = field(default_factory=list)
    annotations: dict[str, str] = field(default_factory=dict)
    unschedulable: bool = False
    _next_ip: int = 2
    _pod_networks_made: int = 0  # names each pod's veth: never reused, though pods come and go
    # Controllers start pods side by side (tests/lab/cloud/apply.py): addresses and veth names one at a time.
    _counting: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)
    pod_netns: list[str] = field(default_factory=list)

    @property
    def ip(self) -> str:
        return str(NODE_NETWORK.network_address + 10 + self.index)

    @property
    def netns(self) -> str:
        return f"cloud-{self.name}"

    @property
    def netns_path(self) -> str:
        return f"/run/netns/{self.netns}"

    @property
    def pod_cidr(self) -> ipaddress.IPv4Network:
        return ipaddress.IPv4Network(f"10.244.{self.index}.0/24")

    @property
    def pod_gateway(self) -> str:
        return str(self.pod_cidr.network_address + 1)

    def as_kubernetes(self) -> dict[str, Any]:
        """What the API server says of the node (the fields the plan's pods and the lab read)."""
        return {
            "name": self.name,
            "labels": {"kubernetes.io/hostname": self.name, **self.labels},
            "annotations": dict(self.annotations),
            "taints": list(self.taints),
            "unschedulable": self.unschedulable,
            "address": self.ip,
        }

    # -- network -------------------------------------------------------------------------------

    def create_network(self, fabric_netns: str, others: Iterable[Node]) -> None:
        """The node's namespace, its NIC on the fabric's bridge, its pod bridge and routes."""
        run("ip", "netns", "add", self.netns)
        inside = lambda *a: run(*a, netns=self.netns)  # noqa: E731
        inside("ip", "link", "set", "lo", "up")
        peer = f"n-{self.name}"[:15]
        run("ip", "link", "add", "eth0", "netns", self.netns, "type", "veth", "peer", "name", peer,
            "netns", fabric_netns)  # fmt: skip
        run("ip", "link", "set", peer, "master", "nodes", "up", netns=fabric_netns)
        inside("ip", "addr", "add", f"{self.ip}/{NODE_NETWORK.prefixlen}", "dev", "eth0")
        inside("ip", "link", "set", "eth0", "up")
        # A veth leaves checksums to "hardware" that does not exist; a real NIC computes them. Open
        # vSwitch's userspace datapath reads eth0's frames as they are (br-phy, tests/lab/cloud/uplink.py)
        # and would pass on UDP and TCP with unfinished checksums, which the receiver drops.
        tx_checksum_off(self.netns, "eth0")
        # Anything not on the node network or a pod range (Service addresses before their DNAT)
        # has a route, as a real node has its default gateway.
        inside("ip", "route", "add", "default", "via", FABRIC_GATEWAY)
        inside("ip", "link", "add", "cni0", "type", "bridge")
        inside("ip", "addr", "add", f"{self.pod_gateway}/{self.pod_cidr.prefixlen}", "dev", "cni0")
        inside("ip", "link", "set", "cni0", "up")
        inside("sysctl", "-qw", "net.ipv4.ip_forward=1")
        # Pods on one bridge talk at layer 2; kube-proxy's NAT must still see their replies
        # (br_netfilter), as every kubeadm node sets.
        inside("sysctl", "-qw", "net.bridge.bridge-nf-call-iptables=1")
        for other in others:
            if other is not self:
                inside("ip", "route", "add", str(other.pod_cidr), "via", other.ip)

    def allocate_ip(self) -> str:
        with self._counting:
            address = str(self.pod_cidr.network_address + self._next_ip)
            self._next_ip += 1
        return address

    def create_pod_network(self, netns: str, address: str) -> None:
        """A pod's own network namespace with one veth on the node's pod bridge (the CNI's work)."""
        run("ip", "netns", "add", netns)
        self.pod_netns.append(netns)
        with self._counting:
            self._pod_networks_made += 1
            host_side = f"v{self.index}p{self._pod_networks_made:04d}"
        run("ip", "link", "add", host_side, "netns", self.netns, "type", "veth", "peer", "name", "eth0",
            "netns", netns)  # fmt: skip
        run("ip", "link", "set", "dev", host_side, "master", "cni0", "up", netns=self.netns)
        # A pod that reaches itself through its own Service gets its packets back on its port
        # (the CNI bridge plugin's hairpinMode).
        run("ip", "link", "set", "dev", host_side, "type", "bridge_slave", "hairpin", "on", netns=self.netns)
        for args in (
            ("ip", "link", "set", "lo", "up"),
            ("ip", "addr", "add", f"{address}/{self.pod_cidr.prefixlen}", "dev", "eth0"),
            ("ip", "link", "set", "eth0", "up"),
            ("ip", "route", "add", "default", "via", self.pod_gateway),
        ):
            run(*args, netns=netns)

    def delete_pod_network(self, netns: str) -> None:
        if Path(f"/run/netns/{netns}").exists():
            _kill(_pids_in_netns(netns))
            run("ip", "netns", "delete", netns, check=False)
        with contextlib.suppress(ValueError):
            self.pod_netns.remove(netns)

    def delete_network(self) -> None:
        for netns in [*self.pod_netns, self.netns]:
            if Path(f"/run/netns/{netns}").exists():
                _kill(_pids_in_netns(netns))
                run("ip", "netns", "delete", netns, check=False)
        self.pod_netns.clear()

    # -- filesystem ------------------------------------------------------------------------------

    def host_path(self, path: str) -> Path:
        """Where the node keeps a hostPath volume."""
        if any(path == shared or path.startswith(shared + "/") for shared in SHARED_WITH_MACHINE):
            return Path(path)
        if path == CGROUP_FS or path.startswith(CGROUP_FS + "/"):
            return self.cgroup_view / path[len(CGROUP_FS) :].lstrip("/")
        return self.state / "host" / path.lstrip("/")

    # -- cgroups ---------------------------------------------------------------------------------

    @property
    def cgroup_view(self) -> Path:
        """The node's /sys/fs/cgroup: each hierarchy's mount point showing the node's subtree."""
        return self.state / "cgroup"

    def cgroup_roots(self) -> list[Path]:
        """The node's own root group in each hierarchy of the machine."""
        return [controller / LAB_NODES / self.name for controller in cgroup_controllers()]

    def cgroup_dirs(self, *parts: str) -> list[Path]:
        return [root / KUBEPODS / Path(*parts) for root in self.cgroup_roots()]

    def create_cgroups(self) -> None:
        """The node's subtrees, and its /sys/fs/cgroup view of them (bind mounts, in the harness's mounts)."""
        for root in self.cgroup_roots():
            make_cgroup(root)
        view = self.cgroup_view
        view.mkdir(parents=True, exist_ok=True)
        run("mount", "-t", "tmpfs", "-o", "mode=755", f"cgroup-{self.name}", str(view))
        for controller in cgroup_controllers():
            target = view if controller == CGROUP_ROOT else view / controller.name
            target.mkdir(exist_ok=True)
            run("mount", "--bind", str(controller / LAB_NODES / self.name), str(target))
        for entry in CGROUP_ROOT.iterdir():
            if entry.is_symlink():  # e.g. cpu -> cpu,cpuacct on machines that co-mount them
                (view / entry.name).symlink_to(os.readlink(entry))


_TX_CSUM = """
import array, fcntl, socket, struct, sys
data = array.array("B", struct.pack("II", 0x17, 0))  # ETHTOOL_STXCSUM, off
request = struct.pack("16sP", sys.argv[1].encode(), data.buffer_info()[0])
fcntl.ioctl(socket.socket(socket.AF_INET, socket.SOCK_DGRAM), 0x8946, request)  # SIOCETHTOOL
"""


def tx_checksum_off(netns: str, device: str) -> None:
    """`ethtool -K <device> tx off` (no ethtool here): the kernel computes checksums before sending."""
    run("python3", "-c", _TX_CSUM, device, netns=netns)


def make_cgroup(cgroup: Path) -> None:
    """Create a cgroup and its parents; a new cpuset group gets its parent's CPUs and memory nodes."""
    if cgroup.exists():
        return
    make_cgroup(cgroup.parent)
    cgroup.mkdir()
    for inherited in ("cpuset.cpus", "cpuset.mems"):
        if (cgroup / inherited).exists():
            (cgroup / inherited).write_text((cgroup.parent / inherited).read_text())


def kill_cgroups() -> None:
    """Kill every process of every node (pods, and what left them: libvirt, its guests), then remove
    the cgroups (deepest first)."""
    for controller in cgroup_controllers():
        top = controller / LAB_NODES
        if not top.exists():
            continue
        for _ in range(20):
            pids = [int(p) for f in top.rglob("cgroup.procs") for p in f.read_text().split()]
            if not pids:
                break
            _kill(pids)
            time.sleep(0.2)
        for directory in sorted((d for d in top.rglob("*") if d.is_dir()), key=lambda d: -len(d.parts)):
            _rmdir(directory)
        _rmdir(top)


def _rmdir(directory: Path) -> None:
    with contextlib.suppress(OSError):
        directory.rmdir()


def _pids_in_netns(netns: str) -> list[int]:
    done = run("ip", "netns", "pids", netns, check=False)
    # The harness itself may have threads in a node's namespace (tests/lab/cloud/run.py): never itself.
    return [int(p) for p in done.stdout.split() if int(p) != os.getpid()]


def _kill(pids: Iterable[int]) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def kill_all(pids: Iterable[int]) -> None:
    _kill(pids)
