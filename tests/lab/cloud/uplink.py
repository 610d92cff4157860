"""The node's address on an Open vSwitch bridge, as a node whose OVS uses the userspace datapath needs it.

With the kernel datapath, OVS tunnels leave through the kernel's routing and the node's NIC keeps
its address. The userspace datapath (`neutron.datapathType: netdev`, this machine's only choice:
no OVS kernel module) routes tunnel packets itself and sends them only through OVS ports, so the
tunnel's local address must be on an OVS bridge that holds the NIC (Open vSwitch's "userspace
tunneling" guide: br-phy). A real node with OVS-DPDK is set up so by its own network
configuration; here the lab does it for each node with an OVS, once the node's ovsdb answers:

    br-phy (netdev, standalone) with eth0 in it, eth0's MAC, the node address and routes on br-phy

and the kernel stops answering on eth0 itself (rp_filter, arp_ignore, no IPv6), or every frame
would reach the node twice. br-phy is a persistent tap: the address survives a restart of
ovs-vswitchd (the maintenance controller restarts it). This is a machine override, reported.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from tests.lab.cloud.node import FABRIC_GATEWAY, NODE_NETWORK, Node, run

BRIDGE = "br-phy"
NIC = "eth0"
POLL_SECONDS = 2.0


@dataclass
class UplinkBridges:
    nodes: list[Node]
    log: Callable[[str], None]
    configured: dict[str, float] = field(default_factory=dict)  # node → when its address moved
    _stop: threading.Event = field(default_factory=threading.Event)

    def start(self) -> None:
        threading.Thread(target=self._loop, name="uplink-bridges", daemon=True).start()

    def stop(self) -> None:
        self._stop.set()

    def _loop(self) -> None:
        while not self._stop.wait(POLL_SECONDS):
            for node in self.nodes:
                try:
                    self._ensure(node)
                except RuntimeError as error:
                    self.log(f"uplink of {node.name}: {error}")

    def _ensure(self, node: Node) -> None:
        socket = node.host_path("/run/openvswitch/db.sock")
        if not socket.exists():
            return
        if not _has_link(node, BRIDGE):
            mac = Path(f"/sys/class/net/{NIC}/address")  # read in the node's namespace below
            address = run("cat", str(mac), netns=node.netns, check=False).stdout.strip()
            run("ovs-vsctl", f"--db=unix:{socket}", "--timeout=10", "--may-exist", "add-br", BRIDGE, "--", "set",
                "bridge", BRIDGE, "datapath_type=netdev", "fail-mode=standalone", f"other_config:hwaddr={address}",
                "--", "--may-exist", "add-port", BRIDGE, NIC)  # fmt: skip
            return  # ovs-vswitchd makes the tap; the address follows on the next pass
        addresses = run("ip", "-o", "-4", "addr", "show", "dev", BRIDGE, netns=node.netns).stdout
        if f" {node.ip}/" in addresses:
            return
        for setting in (f"net.ipv4.conf.{NIC}.rp_filter=1", f"net.ipv4.conf.{NIC}.arp_ignore=8",
                        f"net.ipv6.conf.{NIC}.disable_ipv6=1"):  # fmt: skip
            run("sysctl", "-qw", setting, netns=node.netns)
        routes = [r for r in run("ip", "-4", "route", "show", netns=node.netns).stdout.splitlines() if " via " in r]
        run("ip", "addr", "flush", "dev", NIC, netns=node.netns)
        run("ip", "addr", "replace", f"{node.ip}/{NODE_NETWORK.prefixlen}", "dev", BRIDGE, netns=node.netns)
        run("ip", "link", "set", "dev", BRIDGE, "up", netns=node.netns)
        # The routes through the node network went with eth0's address: the same, through br-phy.
        for route in routes or [f"default via {FABRIC_GATEWAY}"]:
            destination, gateway = route.split(" via ")[0], route.split(" via ")[1].split()[0]
            run("ip", "route", "replace", destination, "via", gateway, "dev", BRIDGE, netns=node.netns)
        self.configured[node.name] = time.monotonic()
        self.log(f"uplink of {node.name}: {node.ip} on {BRIDGE} (OVS userspace tunnels leave through it)")


def _has_link(node: Node, name: str) -> bool:
    return run("ip", "link", "show", "dev", name, netns=node.netns, check=False).returncode == 0
