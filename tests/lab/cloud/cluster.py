"""The lab's cluster: its nodes on one node network, and the provider network outside.

Every node is a network namespace of its own (tests/lab/cloud/node.py) with an address on the node
network, a Linux bridge in a namespace of its own (the "fabric": the switch the nodes are cabled
to). Pod ranges are routed node to node, as a host-gateway CNI does (flannel's host-gw, Calico
without encapsulation): a pod's packets leave with the pod's own address. The network node's
second NIC is cabled to the provider network: a namespace holding the provider network's gateway,
which stands for the world outside the cloud; it has no route to tenant networks, so a guest
reaches it only through its router's SNAT.

Which nodes there are, and their labels, come from the plan's own settings: a node per role
(control plane with the storage role, network, and compute nodes of the first node group).
"""

from __future__ import annotations

import shutil
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from tests.lab.cloud.node import FABRIC_GATEWAY, NODE_NETWORK, Node, kill_cgroups, run, tx_checksum_off

FABRIC_NETNS = "cloud-fabric"
PROVIDER_NETNS = "cloud-provider"
PROVIDER_NIC = "eth1"
PROVIDER_GATEWAY_CIDR = "172.24.4.1/24"
PROVIDER_NETWORK = "172.24.4.0/24"


@dataclass(frozen=True)
class NodeRole:
    """A node of the lab: its name and the settings' label sets it carries."""

    name: str
    roles: tuple[str, ...]  # control_plane, network, compute, storage
    provider_nic: bool = False


# The full lab (the four nodes), and a small one for a stack that needs no more.
FULL = (
    NodeRole("node-cp", ("control_plane", "storage")),
    NodeRole("node-net", ("network",), provider_nic=True),
    NodeRole("node-c1", ("compute",)),
    NodeRole("node-c2", ("compute",)),
)
SMALL = (
    NodeRole("node-cp", ("control_plane", "storage", "network"), provider_nic=True),
    NodeRole("node-c1", ("compute",)),
)
LAYOUTS = {"full": FULL, "small": SMALL}


def node_labels(role: NodeRole, selectors: dict[str, dict[str, str]], group: dict[str, str]) -> dict[str, str]:
    labels: dict[str, str] = {}
    for name in role.roles:
        labels.update(selectors[name])
        if name == "compute":
            labels.update(group)
    return labels


@dataclass
class Cluster:
    state: Path  # the run's directory
    nodes: list[Node] = field(default_factory=list)
    provider_node: Node | None = None

    @classmethod
    def build(
        cls, state: Path, layout: Iterable[NodeRole], selectors: dict[str, dict[str, str]], group: dict[str, str]
    ) -> Cluster:
        cluster = cls(state)
        for index, role in enumerate(layout, start=1):
            node = Node(role.name, index, state / "nodes" / role.name, node_labels(role, selectors, group))
            cluster.nodes.append(node)
            if role.provider_nic:
                cluster.provider_node = node
        return cluster

    def node(self, name: str) -> Node:
        return next(n for n in self.nodes if n.name == name)

    @property
    def control_plane(self) -> Node:
        return self.nodes[0]

    def labelled(self, selector: dict[str, str]) -> list[Node]:
        """The nodes a nodeSelector picks."""
        return [n for n in self.nodes if selector.items() <= n.labels.items()]

    def create(self) -> None:
        if self.state.exists():
            shutil.rmtree(self.state)
        layers = self.state / "images"
        layers.mkdir(parents=True)
        # A tmpfs for the image layers: overlayfs refuses a lower layer inside another ('/').
        run("mount", "-t", "tmpfs", "-o", "size=1g,mode=755", "image-layers", str(layers))
        # Network namespaces are named by files in /run/netns: a tmpfs of this run's own (the
        # harness runs in a mount namespace of its own), so none is left on the machine.
        Path("/run/netns").mkdir(exist_ok=True)
        run("mount", "-t", "tmpfs", "-o", "size=4m,mode=755", "cloud-netns", "/run/netns")
        run("ip", "netns", "add", FABRIC_NETNS)
        fabric = lambda *a: run(*a, netns=FABRIC_NETNS)  # noqa: E731
        fabric("ip", "link", "set", "lo", "up")
        fabric("ip", "link", "add", "nodes", "type", "bridge")
        fabric("ip", "addr", "add", f"{FABRIC_GATEWAY}/{NODE_NETWORK.prefixlen}", "dev", "nodes")
        fabric("ip", "link", "set", "nodes", "up")
        for node in self.nodes:
            node.state.mkdir(parents=True, exist_ok=True)
            node.create_network(FABRIC_NETNS, self.nodes)
            node.create_cgroups()
        if self.provider_node is not None:
            self._provider_network(self.provider_node)

    def _provider_network(self, node: Node) -> None:
        """The provider NIC, cabled to a gateway in a namespace of its own. It carries no address
        on the node: neutron's external bridge takes it (neutron.bridgeInterfaces)."""
        run("ip", "netns", "add", PROVIDER_NETNS)
        run("ip", "link", "add", PROVIDER_NIC, "netns", node.netns, "type", "veth", "peer", "name", "uplink",
            "netns", PROVIDER_NETNS)  # fmt: skip
        run("ip", "link", "set", PROVIDER_NIC, "up", netns=node.netns)
        run("ip", "link", "set", "lo", "up", netns=PROVIDER_NETNS)
        run("ip", "addr", "add", PROVIDER_GATEWAY_CIDR, "dev", "uplink", netns=PROVIDER_NETNS)
        run("ip", "link", "set", "uplink", "up", netns=PROVIDER_NETNS)
        tx_checksum_off(PROVIDER_NETNS, "uplink")  # br-ex reads eth1 in userspace, as br-phy eth0
        # Counters of the pings that reach the world outside: from the provider network's own
        # addresses (a router's gateway, after SNAT), and from anywhere else (a tenant address
        # would mean no SNAT; no reply could find its way back).
        for source in (["-s", PROVIDER_NETWORK], []):
            run("iptables", "-A", "INPUT", "-p", "icmp", "--icmp-type", "echo-request", *source, "-j", "ACCEPT",
                netns=PROVIDER_NETNS)  # fmt: skip

    def delete(self) -> None:
        """Every namespace, and with them whatever lives in them (escaped QEMUs among them)."""
        for node in self.nodes:
            node.delete_network()
        for netns in (PROVIDER_NETNS, FABRIC_NETNS):
            if Path(f"/run/netns/{netns}").exists():
                run("ip", "netns", "delete", netns, check=False)
        kill_cgroups()


def provider_counters() -> dict[str, int]:
    """Pings that reached the provider network's gateway: from provider addresses (SNAT), from elsewhere."""
    listed = run("iptables", "-L", "INPUT", "-v", "-x", "-n", netns=PROVIDER_NETNS, check=False).stdout.splitlines()
    rules = [line.split() for line in listed[2:] if line.strip()]
    if len(rules) < 2:
        return {}
    return {"pings_from_provider_addresses": int(rules[0][0]), "pings_from_elsewhere": int(rules[1][0])}
