"""The Gateway's proxy in the lab: Debian's haproxy, programmed from the Gateway API as Envoy Gateway programs Envoy.

No Envoy Gateway runs here. What its proxy does for the plan's routes, haproxy does, from the
resolution of tests/lab/cloud/gatewayapi.py: one frontend per listener port, terminating TLS with the
listener's certificate Secret (tls.crt and tls.key, as the Secret holds them now), routing by the
request's host (port stripped, case folded) and path to the route's Service, through the
Service's cluster address and kube-proxy (Envoy sends to the Service's endpoints directly: the
same pods, and the NetworkPolicies see the same source, the proxy pod's address). Requests reach
the backends with what Envoy adds at the edge: the Host unchanged, `X-Forwarded-Proto` set to the
listener's scheme (a client's own value replaced) and the client's address appended to
`X-Forwarded-For`; Envoy adds no X-Forwarded-Host or -Port, so neither does this proxy, and the
services must build their links from the Host and the scheme, as behind Envoy. An `Upgrade:
websocket` request (the console) becomes a tunnel. Timeouts are Envoy's defaults: 10 s to connect
to a backend, 15 s for its answer (the route timeout), an hour idle for a connection or a tunnel;
a route's `timeouts.request` replaces the 15 s, and the tunnel's hour where it is longer.
A backend a BackendTLSPolicy targets (tests/lab/cloud/backendtls.py) is spoken to over TLS as Envoy
speaks to it: TLS 1.2 or 1.3, the policy's hostname as SNI and as the name its certificate must
carry, the policy's CA certificates as the only trust, verification required; a backend whose
policy is invalid has no server at all (500), and one without a policy gets plain HTTP.

It runs as Envoy Gateway runs its proxies: a pod in `gateway.proxies.namespace` with Envoy's proxy
labels (or the stack's `gateway.proxies.labels`), so the NetworkPolicies that admit only the
gateway's proxies admit it; listener port 443 is served on 10443 in the pod (Envoy Gateway maps
privileged ports up by 10000), behind a LoadBalancer address that the cluster's load balancer
routes to the proxy's node, where kube-proxy's rule forwards it to the pod.
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from tests.lab.cloud.gatewayapi import AttachedRoute, Backend, Listener, Programmed, Rule, duration_seconds
from tests.lab.cloud.netpol import PodAddress
from tests.lab.cloud.node import Node, run

PROXY_NETNS = "cloud-gateway"
# The Gateway's public address (a LoadBalancer ingress IP): a documentation range (TEST-NET-3),
# outside every range of the lab's cluster.
LOAD_BALANCER_ADDRESS = "203.0.113.10"
PRIVILEGED_PORT_SHIFT = 10000
START_SECONDS = 20.0
CONFIG, ADMIN_SOCKET = "haproxy.cfg", "admin.sock"
SecretLookup = Callable[[str, str], Mapping[str, str]]  # (namespace, name) → the Secret's data
# Envoy Gateway's default upstream TLS versions (applyBackendTLSSetting: min 1.2, max 1.3).
BACKEND_TLS_OPTIONS = "ssl-min-ver TLSv1.2 ssl-max-ver TLSv1.3"
# Envoy's defaults, which Envoy Gateway keeps unless a policy or the route says otherwise.
TIMEOUTS = (
    ("connect", "10s"),  # the cluster's connect timeout
    ("server", "15s"),  # the route timeout: the backend answers within 15 s
    ("client", "1h"),  # a downstream connection's idle timeout
    ("http-request", "5m"),
    ("tunnel", "1h"),  # an upgraded (websocket) connection, idle
)
IDLE_SECONDS = 3600.0
UNLIMITED = "24d"  # haproxy's timeouts stop short of 2^31 ms: a route's "0s" (no timeout) as near as it gets


def container_port(port: int) -> int:
    """Where Envoy Gateway's proxy listens for a listener port: privileged ports shifted up by 10000."""
    return port + PRIVILEGED_PORT_SHIFT if port < 1024 else port


def _host_acl(host: str) -> str:
    if host.startswith("*."):
        return f"var(txn.host) -m end {host[1:]}"
    return f"var(txn.host) -m str {host}"


def _path_acls(name: str, path_type: str, path: str) -> list[str]:
    if path_type == "Exact":
        return [f"acl {name} path -m str {path}"]
    if path in ("", "/"):
        return []
    prefix = path.rstrip("/")
    return [f"acl {name} path -m str {prefix}", f"acl {name} path -m beg {prefix}/"]


def _precedence(route: AttachedRoute) -> list[tuple[int, int, str, str]]:
    """Gateway API's order within a host: Exact paths first, then the longest prefix."""
    return sorted(
        ((0 if r.path_type == "Exact" else 1, -len(r.path), r.path_type, r.path) for r in route.rules),
    )


def haproxy_config(
    programmed: Programmed,
    address: Callable[[Backend], str | None],
    certificate_files: Mapping[str, Path],
    bind_address: str = "0.0.0.0",
    admin_socket: Path | None = None,
    ports: Mapping[int, int] | None = None,
    ca_files: Mapping[str, Path] | None = None,
) -> str:
    """haproxy's configuration for what the Gateway serves. `certificate_files`: listener name → PEM of
    tls.crt and tls.key; `address`: a backend Service's cluster address (None: it has none, 500);
    `ports`: listener port → the port bound (default: container_port); `ca_files`: BackendTLSPolicy
    (namespace/name) → the PEM file of its CA certificates."""
    lines = ["global", "    log stdout format raw local0", "    ssl-default-bind-options ssl-min-ver TLSv1.2"]
    lines.append(f"    ssl-default-server-options {BACKEND_TLS_OPTIONS}")
    if admin_socket is not None:  # the runtime API: a renewed certificate without a restart (`set ssl cert`)
        lines.append(f"    stats socket {admin_socket} mode 600 level admin")
    lines += ["", "defaults", "    mode http", "    log global", "    option httplog", "    option forwardfor"]
    lines += [f"    timeout {name} {value}" for name, value in TIMEOUTS]
    by_port: dict[int, list[Listener]] = {}
    for listener in programmed.listeners:
        by_port.setdefault(listener.port, []).append(listener)
    backends: list[str] = []
    for port, listeners in sorted(by_port.items()):
        https = listeners[0].protocol == "HTTPS"
        bound = (ports or {}).get(port, container_port(port))
        bind = f"    bind {bind_address}:{bound}"
        if https:
            bind += "".join(f" ssl crt {certificate_files[ln.name]}" for ln in listeners) + " alpn h2,http/1.1"
        lines += ["", f"frontend port-{port}", bind]
        lines.append(f"    http-request set-header X-Forwarded-Proto {'https' if https else 'http'}")
        lines.append("    http-request set-var(txn.host) req.hdr(host),field(1,:),lower")
        names = {ln.name for ln in listeners}
        routes = [r for r in programmed.routes if names & set(r.listeners)]
        for index, route in enumerate(routes):
            host_acl = f"host-{index}"
            lines += [f"    acl {host_acl} {_host_acl(h)}" for h in route.hostnames]
            for order, (_, _, path_type, path) in enumerate(_precedence(route)):
                rule = next(r for r in route.rules if (r.path_type, r.path) == (path_type, path))
                backend = f"route-{route.namespace}-{route.name}-{order}"
                path_acl = f"path-{index}-{order}"
                acls = _path_acls(path_acl, path_type, path)
                lines += [f"    {a}" for a in acls]
                condition = f"{host_acl} {path_acl}" if acls else host_acl
                if route.hostnames:
                    lines.append(f"    use_backend {backend} if {condition}")
                elif acls:
                    lines.append(f"    use_backend {backend} if {path_acl}")
                else:
                    lines.append(f"    default_backend {backend}")
                servers = _servers(rule.backends, address, ca_files or {})
                backends += ["", f"backend {backend}", *_timeouts(rule), *servers]
        lines.append("    default_backend no-route")
    backends += ["", "backend no-route", "    http-request return status 404"]  # no route's host: Envoy's 404
    return "\n".join(lines + backends) + "\n"


def _timeouts(rule: Rule) -> list[str]:
    """A route's `timeouts.request` as Envoy Gateway programs it: the route timeout (0: none), and the
    stream's idle timeout raised to it when it is longer than the hour (0: none either)."""
    if rule.request_timeout is None:
        return []  # the defaults' 15 s route timeout
    seconds = duration_seconds(rule.request_timeout)
    assert seconds is not None, rule  # gatewayapi.program refuses what is no duration
    limit = f"{int(seconds * 1000)}ms" if seconds else UNLIMITED
    idle = f"{int(max(seconds, IDLE_SECONDS) * 1000)}ms" if seconds else UNLIMITED
    return [f"    timeout server {limit}", f"    timeout tunnel {idle}"]


def _servers(
    backends: tuple[Backend, ...], address: Callable[[Backend], str | None], ca_files: Mapping[str, Path]
) -> list[str]:
    servers = []
    for index, backend in enumerate(backends):
        ip = address(backend)
        if ip is None:
            continue
        server = f"    server {backend.service}-{index} {ip}:{backend.port} weight {backend.weight}"
        if backend.tls is not None:
            name = backend.tls.hostname
            server += f" ssl verify required ca-file {ca_files[backend.tls.policy]} sni str({name}) verifyhost {name}"
        servers.append(server)
    return servers or ["    http-request return status 500"]  # no valid backend: the spec's 500


def ca_file_name(policy: str) -> str:
    """Where a BackendTLSPolicy's CA certificates go, by its namespace/name."""
    return "backend-ca-" + policy.replace("/", "-") + ".pem"


def backend_tls_of(programmed: Programmed) -> dict[str, str]:
    """Each policy in use → its CA certificates (PEM)."""
    return {
        b.tls.policy: b.tls.ca
        for route in programmed.routes
        for rule in route.rules
        for b in rule.backends
        if b.tls is not None
    }


def write_files(
    programmed: Programmed,
    state: Path,
    secret: SecretLookup,
    address: Callable[[Backend], str | None],
    bind_address: str = "0.0.0.0",
    ports: Mapping[int, int] | None = None,
) -> Path:
    """The listeners' certificates as haproxy reads them (tls.crt, then tls.key: one file, owner-only)
    and the configuration, in `state`; returns the configuration's path."""
    state.mkdir(parents=True, exist_ok=True)
    files = {}
    for listener in programmed.listeners:
        if listener.protocol != "HTTPS":
            continue
        namespace, name = listener.certificates[0]
        data = secret(namespace, name)
        path = listener_file(state, listener)
        path.touch(mode=0o600)
        path.write_text(data["tls.crt"] + data["tls.key"])
        files[listener.name] = path
    ca_files = {}
    for policy, ca in backend_tls_of(programmed).items():
        ca_files[policy] = state / ca_file_name(policy)
        ca_files[policy].write_text(ca)
    config = state / CONFIG
    text = haproxy_config(programmed, address, files, bind_address, state / ADMIN_SOCKET, ports, ca_files)
    config.write_text(text)
    return config


def listener_file(state: Path, listener: Listener) -> Path:
    return state / f"{listener.name}.pem"


def runtime_command(admin_socket: Path, command: str) -> str:
    """One command of haproxy's runtime API (the stats socket at admin level) and its answer."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as admin:
        admin.settimeout(10)
        admin.connect(str(admin_socket))
        admin.sendall(command.encode())
        answer = b""
        while chunk := admin.recv(65536):
            answer += chunk
    return answer.decode(errors="replace")


def swap_certificate(admin_socket: Path, pem_file: Path, pem: str) -> None:
    """A renewed listener certificate into service without a restart, as Envoy takes one from Envoy
    Gateway over SDS: new handshakes get it, open connections keep theirs. haproxy's runtime API
    stages the pair for the file it loaded (`set ssl cert`, the payload ending at an empty line)
    and swaps it in (`commit ssl cert`); the file is rewritten too, for a later start."""
    staged = runtime_command(admin_socket, f"set ssl cert {pem_file} <<\n{pem.strip()}\n\n")
    if "Transaction created" not in staged and "Transaction updated" not in staged:
        raise RuntimeError(f"haproxy did not stage the certificate {pem_file}: {staged.strip()}")
    committed = runtime_command(admin_socket, f"commit ssl cert {pem_file}\n")
    if "Success" not in committed:
        raise RuntimeError(f"haproxy did not commit the certificate {pem_file}: {committed.strip()}")
    pem_file.write_text(pem)


def soft_reload(
    config: Path, admin_socket: Path, old: subprocess.Popen[bytes], log: IO[bytes], netns: str | None = None
) -> subprocess.Popen[bytes]:
    """haproxy's soft reload: a new process reads the files as they are now and binds beside the old one
    (SO_REUSEPORT), which stops listening and finishes the connections it has (-sf); returned once the new
    one answers on the admin socket. How the lab's gateway takes a BackendTLSPolicy's changed CA: Envoy
    Gateway hands Envoy one over xDS without a restart, and haproxy 2.6 updates a CA file at run time for
    its listeners only (after `commit ssl ca-file`, `show ssl ca-file` lists one that server lines use as
    Unused), so a soft reload is this stand-in's way to take it with no connection refused."""
    command = ["haproxy", "-db", "-f", str(config), "-sf", str(old.pid)]
    new = subprocess.Popen(["ip", "netns", "exec", netns, *command] if netns else command, stdout=log,
                           stderr=subprocess.STDOUT)  # fmt: skip
    deadline = time.monotonic() + START_SECONDS
    while True:  # `ip netns exec` execs haproxy: the process's pid is haproxy's
        with contextlib.suppress(OSError):
            if f"Pid: {new.pid}\n" in runtime_command(admin_socket, "show info\n"):
                return new
        if new.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"haproxy's soft reload of {config} did not come up (exit {new.poll()})")
        time.sleep(0.2)


@dataclass
class GatewayProxy:
    """The proxy pod of the Gateway: haproxy in a network namespace of its own on a node."""

    programmed: Programmed
    node: Node
    state: Path  # its configuration and certificates
    log_file: Path
    namespace: str  # where the proxies run (gateway.proxies.namespace)
    labels: dict[str, str]
    address: str = LOAD_BALANCER_ADDRESS
    ip: str = ""
    process: subprocess.Popen[bytes] | None = None
    _exposed: list[list[str]] = field(default_factory=list)
    _reloaded: list[subprocess.Popen[bytes]] = field(default_factory=list)  # processes a soft reload retired

    @property
    def pod_name(self) -> str:
        gateway = self.programmed.gateway
        return f"envoy-{gateway.namespace}-{gateway.name}-lab"

    @property
    def config_file(self) -> Path:
        return self.state / CONFIG

    @property
    def admin_socket(self) -> Path:
        return self.state / ADMIN_SOCKET

    def write(self, secret: SecretLookup, address: Callable[[Backend], str | None]) -> None:
        write_files(self.programmed, self.state, secret, address)

    def renew(self, secret: SecretLookup, renewed: set[tuple[str, str]]) -> list[str]:
        """Each HTTPS listener whose certificate Secret was renewed gets it, hot; returns their names."""
        swapped = []
        for listener in self.programmed.listeners:
            if listener.protocol == "HTTPS" and listener.certificates[0] in renewed:
                data = secret(*listener.certificates[0])
                pem = data["tls.crt"] + data["tls.key"]
                swap_certificate(self.admin_socket, listener_file(self.state, listener), pem)
                swapped.append(listener.name)
        return swapped

    def swap_backend_cas(self, programmed: Programmed) -> list[str]:
        """The same routes as now resolved (`programmed`): each BackendTLSPolicy whose CA certificates changed
        (a new bundle in its Secret) gets them, by a soft reload (soft_reload); returns those policies."""
        before, after = backend_tls_of(self.programmed), backend_tls_of(programmed)
        swapped = [policy for policy, pem in sorted(after.items()) if before.get(policy) not in (None, pem)]
        self.programmed = programmed
        if swapped and self.process is not None:
            for policy in swapped:
                (self.state / ca_file_name(policy)).write_text(after[policy])
            self._reloaded.append(self.process)
            with self.log_file.open("ab") as log:
                self.process = soft_reload(self.config_file, self.admin_socket, self.process, log, PROXY_NETNS)
        return swapped

    def pod_address(self) -> PodAddress:
        return PodAddress(self.pod_name, self.ip, dict(self.labels), PROXY_NETNS, self.node.name,
                          (self.node.ip, self.node.pod_gateway), namespace=self.namespace)  # fmt: skip

    def start(self) -> None:
        checked = subprocess.run(["haproxy", "-c", "-q", "-f", str(self.config_file)], capture_output=True, text=True)
        if checked.returncode != 0:
            raise RuntimeError(f"haproxy refuses {self.config_file}: {checked.stderr.strip() or checked.stdout}")
        self.ip = self.node.allocate_ip()
        self.node.create_pod_network(PROXY_NETNS, self.ip)
        self.log_file.parent.mkdir(parents=True, exist_ok=True)
        with self.log_file.open("ab") as log:
            self.process = subprocess.Popen(
                ["ip", "netns", "exec", PROXY_NETNS, "haproxy", "-db", "-f", str(self.config_file)],
                stdout=log, stderr=subprocess.STDOUT,
            )  # fmt: skip
        deadline = time.monotonic() + START_SECONDS
        while not self.admin_socket.exists():
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"haproxy did not start; see {self.log_file}")
            time.sleep(0.2)
        self._expose()

    def _expose(self) -> None:
        """The LoadBalancer address: routed to this node (as a BGP load balancer announces it), and
        forwarded by the node to the proxy pod's port (kube-proxy's rule for a LoadBalancer ingress IP)."""
        for listener in self.programmed.listeners:
            rule = ["PREROUTING", "-d", f"{self.address}/32", "-p", "tcp", "--dport", str(listener.port), "-j",
                    "DNAT", "--to-destination", f"{self.ip}:{container_port(listener.port)}"]  # fmt: skip
            run("iptables", "-t", "nat", "-A", *rule, netns=self.node.netns)
            self._exposed.append(rule)

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def stop(self) -> None:
        for rule in self._exposed:
            run("iptables", "-t", "nat", "-D", *rule, netns=self.node.netns, check=False)
        self._exposed.clear()
        for process in [*self._reloaded, self.process]:
            if process is not None and process.poll() is None:
                process.terminate()
                with contextlib.suppress(subprocess.TimeoutExpired):
                    process.wait(timeout=10)
        self.node.delete_pod_network(PROXY_NETNS)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.admin_socket)
