"""The one node the cloud runs on: its network, its cgroups and its filesystem for hostPath volumes.

Everything lives in namespaces and directories of its own, so the machine is left as it was:
- the node's network namespace (`ip netns`) holds the node address, the pod bridge (the CNI's
  job) and the provider network's NIC; host-network pods run in it, every other pod gets a
  namespace of its own on the bridge with an address of the pod range;
- the node's hostPath volumes are directories of the run's state, except the host's devices,
  kernel modules and cgroup tree, which a node really shares with its pods;
- each pod gets a cgroup in every v1 controller (and in the v2 tree), under `kubepods`.
"""

from __future__ import annotations

import contextlib
import ipaddress
import os
import signal
import subprocess
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

NODE_NAME = "node-1"
POD_GATEWAY = "10.244.0.1"
POD_PREFIX = 16
# The node's own address, on the network its pods and host-network daemons use (the "InternalIP").
NODE_CIDR = "192.168.200.10/24"
# The provider network behind the node's second NIC: its gateway lives in a namespace of its own.
PROVIDER_NIC = "eth1"
PROVIDER_GATEWAY_CIDR = "172.24.4.1/24"
CGROUP_ROOT = Path("/sys/fs/cgroup")
KUBEPODS = "kubepods"
# Host paths that are the machine's own, not the node's state: devices, modules and cgroups.
SHARED_WITH_MACHINE = ("/dev", "/sys/fs/cgroup", "/lib/modules")


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
    state: Path  # the run's directory: hostPath volumes, pod directories
    labels: dict[str, str]
    name: str = NODE_NAME
    netns: str = "cloud-node"
    provider_netns: str = "cloud-provider"
    _next_ip: int = 2
    pod_netns: list[str] = field(default_factory=list)

    @property
    def ip(self) -> str:
        return NODE_CIDR.split("/")[0]

    @property
    def netns_path(self) -> str:
        return f"/run/netns/{self.netns}"

    # -- network -------------------------------------------------------------------------------

    def create_layers(self) -> Path:
        """A tmpfs for the image layers: overlayfs refuses a lower layer inside another ('/')."""
        layers = self.state / "images"
        layers.mkdir(parents=True, exist_ok=True)
        run("mount", "-t", "tmpfs", "-o", "size=512m,mode=755", "image-layers", str(layers))
        return layers

    def create_network(self) -> None:
        # Network namespaces are named by files in /run/netns: a tmpfs of this run's own (the
        # harness runs in a mount namespace of its own), so none is left on the machine.
        Path("/run/netns").mkdir(exist_ok=True)
        run("mount", "-t", "tmpfs", "-o", "size=1m,mode=755", "cloud-netns", "/run/netns")
        run("ip", "netns", "add", self.netns)
        run("ip", "netns", "add", self.provider_netns)
        inside = lambda *a: run(*a, netns=self.netns)  # noqa: E731
        inside("ip", "link", "set", "lo", "up")
        # The node's primary NIC carrying the node address (a veth: this kernel has no dummy module).
        inside("ip", "link", "add", "eth0", "type", "veth", "peer", "name", "eth0-peer")
        inside("ip", "addr", "add", NODE_CIDR, "dev", "eth0")
        inside("ip", "link", "set", "eth0", "up")
        inside("ip", "link", "set", "eth0-peer", "up")
        inside("ip", "link", "add", "cni0", "type", "bridge")
        inside("ip", "addr", "add", f"{POD_GATEWAY}/{POD_PREFIX}", "dev", "cni0")
        inside("ip", "link", "set", "cni0", "up")
        inside("sysctl", "-qw", "net.ipv4.ip_forward=1")
        # The provider network's NIC, cabled to a gateway in a namespace of its own; it carries
        # no address on the node: neutron's external bridge takes it (neutron.externalInterfaces).
        run("ip", "link", "add", PROVIDER_NIC, "netns", self.netns, "type", "veth", "peer", "name", "uplink",
            "netns", self.provider_netns)  # fmt: skip
        inside("ip", "link", "set", PROVIDER_NIC, "up")
        run("ip", "link", "set", "lo", "up", netns=self.provider_netns)
        run("ip", "addr", "add", PROVIDER_GATEWAY_CIDR, "dev", "uplink", netns=self.provider_netns)
        run("ip", "link", "set", "uplink", "up", netns=self.provider_netns)

    def allocate_ip(self) -> str:
        network = ipaddress.ip_network(f"{POD_GATEWAY}/{POD_PREFIX}", strict=False)
        address = str(network.network_address + self._next_ip)
        self._next_ip += 1
        return address

    def create_pod_network(self, netns: str, address: str) -> None:
        """A pod's own network namespace with one veth on the node's pod bridge (the CNI's work)."""
        run("ip", "netns", "add", netns)
        self.pod_netns.append(netns)
        host_side = f"veth{len(self.pod_netns):04d}"
        run("ip", "link", "add", host_side, "netns", self.netns, "type", "veth", "peer", "name", "eth0",
            "netns", netns)  # fmt: skip
        run("ip", "link", "set", host_side, "master", "cni0", "up", netns=self.netns)
        for args in (
            ("ip", "link", "set", "lo", "up"),
            ("ip", "addr", "add", f"{address}/{POD_PREFIX}", "dev", "eth0"),
            ("ip", "link", "set", "eth0", "up"),
            ("ip", "route", "add", "default", "via", POD_GATEWAY),
        ):
            run(*args, netns=netns)

    def delete_network(self) -> None:
        for netns in [*self.pod_netns, self.netns, self.provider_netns]:
            if Path(f"/run/netns/{netns}").exists():
                _kill(_pids_in_netns(netns))
                run("ip", "netns", "delete", netns, check=False)
        self.pod_netns.clear()

    # -- filesystem ------------------------------------------------------------------------------

    def host_path(self, path: str) -> Path:
        """Where the node keeps a hostPath volume."""
        if any(path == shared or path.startswith(shared + "/") for shared in SHARED_WITH_MACHINE):
            return Path(path)
        return self.state / "node" / path.lstrip("/")

    # -- cgroups ---------------------------------------------------------------------------------

    def cgroup_dirs(self, *parts: str) -> list[Path]:
        return [controller / KUBEPODS / Path(*parts) for controller in cgroup_controllers()]

    def kill_cgroups(self) -> None:
        """Kill every process of every pod, then remove the cgroups (deepest first)."""
        for controller in cgroup_controllers():
            top = controller / KUBEPODS
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
        # What a libvirt pod that moved out of its cgroup (option 5) leaves: empty groups of its
        # own and of its guests, once their processes are gone (they are the node network's).
        for controller in cgroup_controllers():
            for pattern in ("machine.slice/libvirtd-pod", "machine/qemu-*"):
                for directory in controller.glob(pattern):
                    _rmdir(directory)


def _rmdir(directory: Path) -> None:
    with contextlib.suppress(OSError):
        directory.rmdir()


def _pids_in_netns(netns: str) -> list[int]:
    done = run("ip", "netns", "pids", netns, check=False)
    # The harness itself lives in the node's namespace (tools/cloud/run.py): never itself.
    return [int(p) for p in done.stdout.split() if int(p) != os.getpid()]


def _kill(pids: Iterable[int]) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
