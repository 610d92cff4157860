"""The plan's NetworkPolicies, enforced as a network plugin would, in the selected pods' namespaces.

Each pod a policy selects gets an iptables INPUT chain in its network namespace: what the
policies' ingress rules admit (pods by label, by their current addresses; ipBlocks; ports),
replies and loopback, and its own node (Kubernetes lets a node reach its own pods: the kubelet's
probes); everything else is dropped. The chains are rewritten whenever a pod starts or goes,
since Jobs' pods come and go.

Host-network pods are node traffic: they arrive from their node's address, and no podSelector
matches them (the Kubernetes documentation, "NetworkPolicy and hostNetwork pods", leaves this to
the plugin). Whether an ipBlock matches another node's address is the plugin's choice too, and
the lab has a switch for it (`CniMode`): Calico and the iptables plugins match node addresses
like any other; Cilium leaves them out unless `policy-cidr-match-mode=nodes`, and overlay
plugins that masquerade host-to-Service traffic present an address no ipBlock of node CIDRs
holds. The default is the stricter one, so what passes here passes on either kind.

Namespaces: the plan's pods live in the stack's namespace; the lab's stand-in for the gateway's
proxy lives in the proxies' namespace. A peer with a podSelector alone matches pods of the
policy's namespace; with a namespaceSelector, pods of the namespaces whose labels it matches
(every namespace carries `kubernetes.io/metadata.name`), narrowed by its podSelector if it has one.
"""

from __future__ import annotations

import enum
import threading
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from tests.lab.cloud.node import run

Manifest = dict[str, Any]
CHAIN = "KUBE-NETWORK-POLICY"
NAMESPACE_NAME = "kubernetes.io/metadata.name"
IPBLOCK_CHAIN = "KUBE-NWP-IPBLOCK"


class CniMode(enum.Enum):
    NODE_IPS_IN_IPBLOCK = "node-ips-in-ipblock"  # Calico, kube-router, Antrea: node addresses are CIDR members
    NODE_IPS_NOT_IN_IPBLOCK = "node-ips-not-in-ipblock"  # Cilium's default; masquerading overlays

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True)
class PodAddress:
    name: str
    ip: str
    labels: dict[str, str]
    netns: str | None  # None: the pod shares its node's network
    node: str = ""
    node_ips: tuple[str, ...] = ()  # its node's own addresses: on the node network and on the pod bridge
    namespace: str = ""  # "": the policies' namespace (the stack's)


def _matches(selector: Manifest, labels: dict[str, str]) -> bool:
    unknown = set(selector or {}) - {"matchLabels"}
    if unknown:
        raise ValueError(f"label selector fields {sorted(unknown)} are not implemented by the lab's NetworkPolicy")
    wanted = (selector or {}).get("matchLabels") or {}
    return all(labels.get(k) == v for k, v in wanted.items())


@dataclass
class NetworkPolicies:
    policies: list[Manifest]  # NetworkPolicy specs of the plan (one namespace: the stack's)
    node_ips: list[str]
    mode: CniMode = CniMode.NODE_IPS_NOT_IN_IPBLOCK
    namespace: str = ""  # the policies' own namespace
    namespace_labels: dict[str, dict[str, str]] = field(default_factory=dict)  # beyond kubernetes.io/metadata.name
    pods: dict[str, PodAddress] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, pod: PodAddress) -> None:
        with self._lock:
            self.pods[pod.name] = pod
            self._apply()

    def remove(self, name: str) -> None:
        with self._lock:
            self.pods.pop(name, None)
            self._apply()

    def set_policies(self, policies: list[Manifest]) -> None:
        """The plan's policies changed (an update of the stack): every pod's rules follow at once, as a
        plugin reprograms them; a pod no policy selects any more admits everything again."""
        with self._lock:
            self.policies = list(policies)
            self._apply(reset=True)

    def selecting(self, labels: dict[str, str]) -> list[Manifest]:
        return [p for p in self.policies if _matches(p.get("podSelector", {}), labels)]

    def rules(self, pod: PodAddress) -> list[str]:
        """The iptables rules of a pod's INPUT chain (empty when no policy selects it)."""
        selecting = [p for p in self.selecting(pod.labels) if "Ingress" in p.get("policyTypes", ["Ingress"])]
        if not selecting:
            return []
        lines = [
            "-A {chain} -m conntrack --ctstate ESTABLISHED,RELATED -j ACCEPT",
            "-A {chain} -i lo -j ACCEPT",
        ]
        # Its own node (the kubelet's probes, and the node's host-network pods), whichever address it uses.
        lines += [f"-A {{chain}} -s {ip} -j ACCEPT" for ip in pod.node_ips]
        blocks: list[str] = []
        for policy in selecting:
            for rule in policy.get("ingress", []):
                for source, via_block in self._sources(rule.get("from")):
                    for port in self._ports(rule.get("ports")):
                        if via_block:
                            blocks.append(f"-A {IPBLOCK_CHAIN}{source}{port} -j ACCEPT")
                        else:
                            lines.append(f"-A {{chain}}{source}{port} -j ACCEPT")
        if blocks:
            lines.append(f"-A {{chain}} -j {IPBLOCK_CHAIN}")
        lines.append("-A {chain} -j DROP")
        if self.mode is CniMode.NODE_IPS_NOT_IN_IPBLOCK:
            # Other nodes' addresses are no member of any ipBlock: they leave the chain unmatched.
            blocks = [f"-A {IPBLOCK_CHAIN} -s {ip} -j RETURN" for ip in self.node_ips] + blocks
        return [line.format(chain=CHAIN) for line in lines] + blocks

    def _sources(self, peers: list[Manifest] | None) -> Iterable[tuple[str, bool]]:
        if not peers:  # no `from`: every source
            yield "", False
            return
        for peer in peers:
            if "ipBlock" in peer:
                block = peer["ipBlock"]
                if block.get("except"):
                    raise ValueError("ipBlock.except is not implemented by the lab's NetworkPolicy")
                yield f" -s {block['cidr']}", True
            else:
                for pod in self.pods.values():
                    # Host-network pods are node traffic: no podSelector matches them.
                    if pod.netns is not None and self._peer(peer, pod):
                        yield f" -s {pod.ip}", False

    def _peer(self, peer: Manifest, pod: PodAddress) -> bool:
        namespace = pod.namespace or self.namespace
        if "namespaceSelector" in peer:
            labels = {NAMESPACE_NAME: namespace, **self.namespace_labels.get(namespace, {})}
            if not _matches(peer["namespaceSelector"], labels):
                return False
        elif namespace != self.namespace:
            return False  # a podSelector alone: pods of the policy's namespace
        return _matches(peer.get("podSelector", {}), pod.labels)

    @staticmethod
    def _ports(ports: list[Manifest] | None) -> Iterable[str]:
        if not ports:
            yield ""
            return
        for port in ports:
            yield f" -p {port.get('protocol', 'TCP').lower()} --dport {port['port']}"

    def _apply(self, reset: bool = False) -> None:
        for pod in self.pods.values():
            rules = self.rules(pod)
            if pod.netns is None:
                continue
            if not rules:
                if reset:  # no chain any more: INPUT accepts, as for a pod no policy ever selected
                    run("iptables", "-F", "INPUT", netns=pod.netns, check=False)
                continue
            script = "\n".join([
                "*filter", f":{CHAIN} - [0:0]", f":{IPBLOCK_CHAIN} - [0:0]", "-F INPUT", f"-A INPUT -j {CHAIN}",
                *rules, "COMMIT",
            ])  # fmt: skip
            done = run("iptables-restore", "--noflush", netns=pod.netns, check=False, stdin=script + "\n")
            if done.returncode != 0:
                raise RuntimeError(f"NetworkPolicy of pod {pod.name}: iptables-restore failed: {done.stderr.strip()}")
