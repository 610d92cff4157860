"""A laptop outside the cluster: the public names in its hosts file, the public CA its only trust.

It stands for a user on the internet: a network namespace on a network of its own (TEST-NET-2)
behind the fabric, which routes it to the Gateway's LoadBalancer address and nowhere else (no
node, pod or Service address: they are the cluster's). It knows the cloud's public names only
from its hosts file (no resolver answers it), every one at the Gateway's address, as the public
DNS would have them; it trusts the CA file it is given and nothing else (the clients are pointed
at that file: OS_CACERT, REQUESTS_CA_BUNDLE).
"""

from __future__ import annotations

import ipaddress
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.lab.cloud.cluster import FABRIC_NETNS
from tests.lab.cloud.node import run, tx_checksum_off
from tests.lab.cloud.userpod import isolated_command

NETNS = "cloud-laptop"
OUTSIDE = ipaddress.ip_network("198.51.100.0/24")  # TEST-NET-2: the world beyond the cluster's network
ROUTER = str(OUTSIDE.network_address + 1)  # the fabric's side: the cluster's edge router
ADDRESS = str(OUTSIDE.network_address + 2)
FABRIC_SIDE = "laptop"


@dataclass
class Laptop:
    state: Path
    hosts: Mapping[str, str]  # public name → address
    ca_bundle: str  # PEM: the only CA it trusts
    load_balancer: str  # the Gateway's address, routed to `via`
    via: str  # the node the load balancer sends it to

    @property
    def ca_file(self) -> Path:
        return self.state / "public-ca.pem"

    @property
    def home(self) -> Path:
        return self.state / "home"

    def start(self) -> None:
        self.home.mkdir(parents=True, exist_ok=True)
        self.ca_file.write_text(self.ca_bundle)
        # No resolver: a name outside the hosts file does not resolve (nothing listens on the loopback).
        (self.state / "resolv.conf").write_text("nameserver 127.0.0.1\noptions attempts:1 timeout:1\n")
        lines = ["127.0.0.1\tlocalhost", *(f"{address}\t{name}" for name, address in sorted(self.hosts.items()))]
        (self.state / "hosts").write_text("\n".join(lines) + "\n")
        run("ip", "netns", "add", NETNS)
        run("ip", "link", "add", "eth0", "netns", NETNS, "type", "veth", "peer", "name", FABRIC_SIDE,
            "netns", FABRIC_NETNS)  # fmt: skip
        for args in (
            ("ip", "link", "set", "lo", "up"),
            ("ip", "addr", "add", f"{ADDRESS}/24", "dev", "eth0"),
            ("ip", "link", "set", "eth0", "up"),
            ("ip", "route", "add", "default", "via", ROUTER),
        ):
            run(*args, netns=NETNS)
        tx_checksum_off(NETNS, "eth0")  # a node's OVS userspace datapath may read these frames (uplink.py)
        edge = lambda *a: run(*a, netns=FABRIC_NETNS)  # noqa: E731
        edge("ip", "addr", "add", f"{ROUTER}/24", "dev", FABRIC_SIDE)
        edge("ip", "link", "set", FABRIC_SIDE, "up")
        edge("sysctl", "-qw", "net.ipv4.ip_forward=1")
        # The load balancer's address is announced by the node that runs the proxy (BGP mode).
        edge("ip", "route", "add", f"{self.load_balancer}/32", "via", self.via)
        # From outside, only the load balancer's address; replies to it pass (conntrack).
        edge("iptables", "-A", "FORWARD", "-i", FABRIC_SIDE, "-d", f"{self.load_balancer}/32", "-j", "ACCEPT")
        edge("iptables", "-A", "FORWARD", "-i", FABRIC_SIDE, "-j", "DROP")

    def environment(self) -> dict[str, str]:
        """Its clients verify with the public CA only."""
        return {"OS_CACERT": str(self.ca_file), "REQUESTS_CA_BUNDLE": str(self.ca_file), "PUBLIC_CA": str(self.ca_file)}

    def command(self, argv: list[str]) -> list[str]:
        return isolated_command(NETNS, self.state, argv)

    def run(self, argv: list[str], **kwargs: Any) -> subprocess.CompletedProcess[str]:
        return subprocess.run(self.command(argv), text=True, **kwargs)

    def stop(self) -> None:
        if Path(f"/run/netns/{NETNS}").exists():
            run("ip", "netns", "delete", NETNS, check=False)
