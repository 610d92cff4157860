"""Services as a cluster has them: a virtual address per Service, NAT to its Ready pods, and DNS.

kube-proxy's iptables mode, in every node's network namespace: traffic to a Service's cluster
address and port (from pods, PREROUTING; from host-network processes, OUTPUT) is DNATed to one
of the Ready endpoints' address and `targetPort` (a number or a container port's name), chosen at
random; a pod that reaches itself through its own Service is masqueraded (hairpin); a Service
with no Ready endpoint rejects. Endpoints are the pods its selector matches, Ready ones only
(`publishNotReadyAddresses` adds the others), recomputed whenever a pod's readiness changes.

DNS as CoreDNS answers it (dnsmasq, from a hosts file): `<service>.<namespace>.svc.<domain>` is
the cluster address, or for a headless Service the addresses of its endpoints; a pod with a
hostname and a subdomain naming a headless Service (StatefulSet pods) is
`<hostname>.<subdomain>.<namespace>.svc.<domain>` while it is an endpoint. Pods find it through
the resolv.conf their `dnsPolicy` gives them (tests/lab/cloud/pods.py).
"""

from __future__ import annotations

import hashlib
import ipaddress
import signal
import subprocess
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.lab.cloud.node import Node, run

Manifest = dict[str, Any]
SERVICE_NETWORK = ipaddress.ip_network("10.96.0.0/16")
API_SERVER_ADDRESS = "10.96.0.1"  # the `kubernetes` Service in `default`
DNS_ADDRESS = "10.96.0.10"  # kube-dns in kube-system, every cluster's resolver address
MASQUERADE_MARK = "0x4000/0x4000"
_HOOKS = (("nat", "PREROUTING"), ("nat", "OUTPUT"), ("filter", "OUTPUT"), ("filter", "FORWARD"))


@dataclass(frozen=True)
class Port:
    name: str
    port: int
    target: int | str  # a number, or the name of a container port
    protocol: str = "TCP"


@dataclass(frozen=True)
class Service:
    name: str
    namespace: str
    selector: tuple[tuple[str, str], ...]
    ports: tuple[Port, ...]
    headless: bool = False
    publish_not_ready: bool = False
    cluster_ip: str | None = None

    @classmethod
    def from_manifest(cls, manifest: Manifest, namespace: str) -> Service:
        spec = manifest["spec"]
        unknown = set(spec) - {"selector", "ports", "clusterIP", "type", "publishNotReadyAddresses", "sessionAffinity"}
        if unknown or spec.get("type", "ClusterIP") != "ClusterIP":
            raise ValueError(
                f"Service {manifest['metadata']['name']}: {sorted(unknown) or spec['type']} not implemented"
            )
        ports = tuple(
            Port(p.get("name", ""), int(p["port"]), p.get("targetPort", p["port"]), p.get("protocol", "TCP"))
            for p in spec.get("ports", [])
        )
        return cls(
            name=manifest["metadata"]["name"],
            namespace=manifest["metadata"].get("namespace", namespace),
            selector=tuple(sorted((spec.get("selector") or {}).items())),
            ports=ports,
            headless=spec.get("clusterIP") == "None",
            publish_not_ready=bool(spec.get("publishNotReadyAddresses")),
        )

    def selects(self, labels: Mapping[str, str]) -> bool:
        return bool(self.selector) and all(labels.get(k) == v for k, v in self.selector)


@dataclass(frozen=True)
class Endpoint:
    """A pod as the endpoints controller sees it."""

    pod: str
    ip: str
    ready: bool
    labels: tuple[tuple[str, str], ...]
    ports: tuple[tuple[str, int], ...] = ()  # container port name → number
    hostname: str = ""
    subdomain: str = ""

    def target(self, port: Port) -> int | None:
        if isinstance(port.target, int) or str(port.target).isdigit():
            return int(port.target)
        return dict(self.ports).get(str(port.target))


@dataclass
class ServiceTable:
    """Every Service of the cluster with its address, and its endpoints as they are now."""

    services: list[Service]
    domain: str
    endpoints: dict[str, tuple[Endpoint, ...]] = field(default_factory=dict)  # service name → endpoints

    def __post_init__(self) -> None:
        services, self.services = self.services, []
        for service in services:
            self.put(service)

    def put(self, service: Service) -> None:
        """Add a Service, or change one (its cluster address stays: the field is immutable)."""
        known = next((s for s in self.services if (s.namespace, s.name) == (service.namespace, service.name)), None)
        if known is not None:
            service = Service(**{**service.__dict__, "cluster_ip": known.cluster_ip})
            self.services[self.services.index(known)] = service
            return
        if not (service.headless or service.cluster_ip):
            taken = {API_SERVER_ADDRESS, DNS_ADDRESS} | {s.cluster_ip for s in self.services if s.cluster_ip}
            # Stable addresses from the name, as stable as the cluster's allocator keeps them.
            number = int(hashlib.sha256(f"{service.namespace}/{service.name}".encode()).hexdigest(), 16)
            while True:
                address = str(SERVICE_NETWORK.network_address + 256 + number % (SERVICE_NETWORK.num_addresses - 512))
                if address not in taken:
                    break
                number += 1
            service = Service(**{**service.__dict__, "cluster_ip": address})
        self.services.append(service)

    def remove(self, namespace: str, name: str) -> None:
        self.services = [s for s in self.services if (s.namespace, s.name) != (namespace, name)]
        self.endpoints.pop(name, None)

    def service(self, name: str) -> Service:
        return next(s for s in self.services if s.name == name)

    def address(self, name: str) -> str:
        found = self.service(name)
        if found.cluster_ip is None:
            raise LookupError(f"Service {name} is headless")
        return found.cluster_ip

    def update(self, pods: Iterable[Endpoint]) -> bool:
        """Recompute every Service's endpoints; True when any changed."""
        pods = list(pods)
        found = {
            s.name: tuple(sorted(
                (p for p in pods if s.selects(dict(p.labels)) and (p.ready or s.publish_not_ready)), key=lambda p: p.pod
            ))
            for s in self.services
        }  # fmt: skip
        changed = found != self.endpoints
        self.endpoints = found
        return changed

    # -- kube-proxy ------------------------------------------------------------------------------

    def nat_rules(self) -> str:
        """The nat table's KUBE-* chains, for iptables-restore --noflush."""
        chains = ["KUBE-SERVICES", "KUBE-POSTROUTING"]
        rules = [f"-A KUBE-POSTROUTING -m mark --mark {MASQUERADE_MARK} -j MASQUERADE"]
        for service in self.services:
            if service.cluster_ip is None:
                continue
            ready = [e for e in self.endpoints.get(service.name, ()) if e.ready]
            for port in service.ports:
                targets = [(e, e.target(port)) for e in ready if e.target(port) is not None]
                if not targets:
                    continue
                chain = _chain("KUBE-SVC", service, port)
                chains.append(chain)
                match = f"-d {service.cluster_ip}/32 -p {port.protocol.lower()} --dport {port.port}"
                rules.append(f"-A KUBE-SERVICES {match} -j {chain}")
                for index, (endpoint, target) in enumerate(targets):
                    sep = _chain("KUBE-SEP", service, port, endpoint.ip)
                    chains.append(sep)
                    left = len(targets) - index
                    pick = f"-m statistic --mode random --probability {1 / left:.5f} " if left > 1 else ""
                    rules.append(f"-A {chain} {pick}-j {sep}")
                    rules.append(f"-A {sep} -s {endpoint.ip}/32 -j MARK --set-xmark {MASQUERADE_MARK}")
                    rules.append(f"-A {sep} -p {port.protocol.lower()} -j DNAT --to-destination {endpoint.ip}:{target}")
        return "*nat\n" + "".join(f":{c} - [0:0]\n" for c in chains) + "\n".join(rules) + "\nCOMMIT\n"

    def filter_rules(self) -> str:
        """What kube-proxy rejects: a Service port without a Ready endpoint."""
        rules = []
        for service in self.services:
            if service.cluster_ip is None:
                continue
            for port in service.ports:
                if not any(e.ready and e.target(port) for e in self.endpoints.get(service.name, ())):
                    match = f"-d {service.cluster_ip}/32 -p {port.protocol.lower()} --dport {port.port}"
                    rules.append(f"-A KUBE-SERVICES {match} -j REJECT --reject-with icmp-port-unreachable")
        return "*filter\n:KUBE-SERVICES - [0:0]\n" + "".join(r + "\n" for r in rules) + "COMMIT\n"

    # -- DNS -------------------------------------------------------------------------------------

    def dns_hosts(self) -> str:
        lines = []
        for service in self.services:
            fqdn = f"{service.name}.{service.namespace}.svc.{self.domain}"
            if service.cluster_ip:
                lines.append(f"{service.cluster_ip}\t{fqdn}")
            else:
                lines += [f"{e.ip}\t{fqdn}" for e in self.endpoints.get(service.name, ())]
            for endpoint in self.endpoints.get(service.name, ()):
                if service.headless and endpoint.hostname and endpoint.subdomain == service.name:
                    lines.append(f"{endpoint.ip}\t{endpoint.hostname}.{fqdn}")
        return "\n".join(lines) + "\n"


def _chain(prefix: str, service: Service, port: Port, *more: str) -> str:
    digest = hashlib.sha256("/".join([service.namespace, service.name, port.name, str(port.port), *more]).encode())
    return f"{prefix}-{digest.hexdigest()[:16].upper()}"


@dataclass
class KubeProxy:
    """Applies a ServiceTable to every node, and keeps it applied as endpoints change."""

    nodes: list[Node]
    table: ServiceTable
    _applied: dict[str, set[str]] = field(default_factory=dict)  # node → KUBE-* chains it has
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def install(self) -> None:
        for node in self.nodes:
            run("iptables", "-t", "nat", "-N", "KUBE-SERVICES", netns=node.netns)
            run("iptables", "-t", "nat", "-N", "KUBE-POSTROUTING", netns=node.netns)
            run("iptables", "-t", "filter", "-N", "KUBE-SERVICES", netns=node.netns)
            for table, hook in _HOOKS:
                run("iptables", "-t", table, "-I", hook, "-j", "KUBE-SERVICES", netns=node.netns)
            run("iptables", "-t", "nat", "-I", "POSTROUTING", "-j", "KUBE-POSTROUTING", netns=node.netns)
        self.apply()

    def apply(self) -> None:
        with self._lock:
            nat, filter_ = self.table.nat_rules(), self.table.filter_rules()
            wanted = {line[1:].split()[0] for line in nat.splitlines() if line.startswith(":")}
            for node in self.nodes:
                stale = self._applied.get(node.name, set()) - wanted
                # Stale chains are emptied, unhooked (nothing jumps to them any more) and deleted.
                text = nat.replace("COMMIT\n", "".join(f":{c} - [0:0]\n" for c in stale) + "".join(
                    f"-X {c}\n" for c in sorted(stale)) + "COMMIT\n")  # fmt: skip
                for table_text in (text, filter_):
                    done = run("iptables-restore", "--noflush", netns=node.netns, check=False, stdin=table_text)
                    if done.returncode != 0:
                        raise RuntimeError(f"kube-proxy on {node.name}: iptables-restore: {done.stderr.strip()}")
                self._applied[node.name] = wanted


@dataclass
class ClusterDns:
    """The cluster's resolver: dnsmasq in a pod of the control-plane node, answering from a hosts file."""

    node: Node
    state: Path
    domain: str
    ip: str = ""
    process: subprocess.Popen[bytes] | None = None

    @property
    def hosts_file(self) -> Path:
        return self.state / "dns-hosts"

    def start(self, hosts: str) -> None:
        self.state.mkdir(parents=True, exist_ok=True)
        self.hosts_file.write_text(hosts)
        self.ip = self.node.allocate_ip()
        netns = "cloud-dns"
        self.node.create_pod_network(netns, self.ip)
        command = [
            "ip", "netns", "exec", netns, "dnsmasq", "--keep-in-foreground", "--no-resolv", "--no-hosts",
            f"--addn-hosts={self.hosts_file}", f"--local=/{self.domain}/", "--bind-interfaces",
            f"--listen-address={self.ip}", "--cache-size=0", "--no-negcache", "--user=root", "--pid-file",
            f"--log-facility={self.state / 'dns.log'}",
        ]  # fmt: skip
        self.process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def reload(self, hosts: str) -> None:
        if self.hosts_file.read_text() != hosts:
            self.hosts_file.write_text(hosts)
            if self.process is not None:
                self.process.send_signal(signal.SIGHUP)

    def stop(self) -> None:
        if self.process is not None:
            self.process.kill()
            self.process.wait(timeout=10)


def resolv_conf(namespace: str, domain: str) -> str:
    """What the kubelet writes for ClusterFirst (and ClusterFirstWithHostNet) pods."""
    return f"search {namespace}.svc.{domain} svc.{domain} {domain}\nnameserver {DNS_ADDRESS}\noptions ndots:5\n"
