"""A user inside the cluster: a pod-like place on a node from which the scenario uses the cloud.

It has a network namespace of its own on the node's pod bridge and resolves names as a pod with
the `ClusterFirst` DNS policy does (the cluster's resolver, the namespace's search domains);
it belongs to no workload of the plan, so NetworkPolicies treat it as any other pod's traffic.
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.lab.cloud.node import Node
from tests.lab.cloud.services import resolv_conf

NETNS = "cloud-user"


@dataclass
class UserPod:
    node: Node
    state: Path
    namespace: str
    domain: str
    ip: str = ""

    @property
    def home(self) -> Path:
        return self.state / "home"

    def start(self) -> None:
        self.home.mkdir(parents=True, exist_ok=True)
        (self.state / "resolv.conf").write_text(resolv_conf(self.namespace, self.domain))
        self.ip = self.node.allocate_ip()
        self.node.create_pod_network(NETNS, self.ip)
        (self.state / "hosts").write_text(f"127.0.0.1\tlocalhost\n{self.ip}\tuser\n")

    def command(self, argv: list[str]) -> list[str]:
        """argv as run from the user's pod: its network, its resolv.conf and hosts."""
        return isolated_command(NETNS, self.state, argv)

    def run(self, argv: list[str], **kwargs: Any) -> subprocess.CompletedProcess[str]:
        return subprocess.run(self.command(argv), text=True, **kwargs)

    def stop(self) -> None:
        self.node.delete_pod_network(NETNS)


def isolated_command(netns: str, state: Path, argv: list[str]) -> list[str]:
    """argv run in a network namespace, seeing `state`'s resolv.conf and hosts as /etc's (a mount
    namespace of its own, so the machine's files stay as they are)."""
    binds = f'mount --bind "{state}/resolv.conf" /etc/resolv.conf && mount --bind "{state}/hosts" /etc/hosts'
    return ["ip", "netns", "exec", netns, "unshare", "--mount", "--propagation", "private", "--",
            "/bin/sh", "-c", f'{binds} && exec "$@"', "user", *argv]  # fmt: skip
