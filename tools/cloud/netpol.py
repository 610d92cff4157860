"""The plan's NetworkPolicies, enforced as a network plugin would, in the selected pods' namespaces.

Each pod a policy selects gets an iptables INPUT chain in its network namespace: what the
policies' ingress rules admit (pods by label, by their current addresses; ipBlocks; ports),
the node itself (Kubernetes always lets a node reach its pods), replies, loopback; everything
else is dropped. The chains are rewritten whenever a pod starts, since Jobs' pods come and go.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from tools.cloud.node import POD_GATEWAY, Node, run

Manifest = dict[str, Any]
CHAIN = "KUBE-NETWORK-POLICY"


@dataclass(frozen=True)
class PodAddress:
    name: str
    ip: str
    labels: dict[str, str]
    netns: str | None  # None: the pod shares the node's network


def _matches(selector: Manifest, labels: dict[str, str]) -> bool:
    wanted = (selector or {}).get("matchLabels") or {}
    return all(labels.get(k) == v for k, v in wanted.items())


@dataclass
class NetworkPolicies:
    node: Node
    policies: list[Manifest]  # NetworkPolicy specs of the plan (one namespace: the stack's)
    pods: dict[str, PodAddress] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, pod: PodAddress) -> None:
        with self._lock:
            self.pods[pod.name] = pod
            self._apply()

    def remove(self, name: str) -> None:
        with self._lock:
            self.pods.pop(name, None)

    def selecting(self, labels: dict[str, str]) -> list[Manifest]:
        return [p for p in self.policies if _matches(p.get("podSelector", {}), labels)]

    def rules(self, labels: dict[str, str]) -> list[str]:
        """The iptables rules of a pod's INPUT chain (empty when no policy selects it)."""
        selecting = [p for p in self.selecting(labels) if "Ingress" in p.get("policyTypes", ["Ingress"])]
        if not selecting:
            return []
        lines = [
            "-A {chain} -m conntrack --ctstate ESTABLISHED,RELATED -j ACCEPT",
            "-A {chain} -i lo -j ACCEPT",
            f"-A {{chain}} -s {self.node.ip} -j ACCEPT",
            f"-A {{chain}} -s {POD_GATEWAY} -j ACCEPT",  # the node, on the pod network
        ]
        for policy in selecting:
            for rule in policy.get("ingress", []):
                for source in self._sources(rule.get("from")):
                    lines += [f"-A {{chain}}{source}{port} -j ACCEPT" for port in self._ports(rule.get("ports"))]
        lines.append("-A {chain} -j DROP")
        return [line.format(chain=CHAIN) for line in lines]

    def _sources(self, peers: list[Manifest] | None) -> Iterable[str]:
        if not peers:  # no `from`: every source
            yield ""
            return
        for peer in peers:
            if "ipBlock" in peer:
                yield f" -s {peer['ipBlock']['cidr']}"
            elif "namespaceSelector" in peer:
                continue  # other namespaces: none of this cloud's pods live there
            else:
                for pod in self.pods.values():
                    if _matches(peer.get("podSelector", {}), pod.labels):
                        yield f" -s {pod.ip}"

    @staticmethod
    def _ports(ports: list[Manifest] | None) -> Iterable[str]:
        if not ports:
            yield ""
            return
        for port in ports:
            yield f" -p {port.get('protocol', 'TCP').lower()} --dport {port['port']}"

    def _apply(self) -> None:
        for pod in self.pods.values():
            rules = self.rules(pod.labels)
            if not rules or pod.netns is None:
                continue
            script = "\n".join(["*filter", f":{CHAIN} - [0:0]", "-F INPUT", f"-A INPUT -j {CHAIN}", *rules, "COMMIT"])
            done = run("iptables-restore", "--noflush", netns=pod.netns, check=False, stdin=script + "\n")
            if done.returncode != 0:
                raise RuntimeError(f"NetworkPolicy of pod {pod.name}: iptables-restore failed: {done.stderr.strip()}")


# Where each data store listens, by the Service name its clients use.
DATA_STORES = {"mariadb": 3306, "rabbitmq": 5672, "memcached-0.memcached": 11211}
# The management API: only the rabbit-init Jobs may use it (their success shows they can).
MANAGEMENT = ("rabbitmq", 15672)


def _connects(netns: str, ip: str, port: int) -> bool:
    probe = f"import socket; socket.create_connection(({ip!r}, {port}), timeout=3).close()"
    return run("python3", "-c", probe, netns=netns, check=False).returncode == 0


def check_isolation(node: Node, services: dict[str, str], openstack_netns: str) -> dict[str, dict[str, bool]]:
    """Connect to each data store from an OpenStack service's pod, and from a pod of nobody's (an intruder).

    The management API is tried from both: neither may reach it.
    """
    intruder = "pod-intruder"
    node.create_pod_network(intruder, node.allocate_ip())
    found: dict[str, dict[str, bool]] = {"from_openstack_pod": {}, "from_other_pod": {}, "management_api": {}}
    for store, port in DATA_STORES.items():
        found["from_openstack_pod"][f"{store}:{port}"] = _connects(openstack_netns, services[store], port)
        found["from_other_pod"][f"{store}:{port}"] = _connects(intruder, services[store], port)
    service, port = MANAGEMENT
    found["management_api"]["from_openstack_pod"] = _connects(openstack_netns, services[service], port)
    found["management_api"]["from_other_pod"] = _connects(intruder, services[service], port)
    return found
