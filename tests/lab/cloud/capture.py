"""What crosses the lab's wires: a packet capture on chosen ports, each connection classed TLS or plain text.

Issue 20's proof of internal TLS: a capture on the data stores' and the APIs' ports sees TLS
handshakes and no SQL, AMQP or HTTP in clear. Asking a server whether it can speak TLS says
nothing about what its clients do; the capture sees what they did while the user scenario ran.

How: Debian's tcpdump in each node's network namespace, on every interface there (`-i any`: the
pods' veths, the bridge, eth0), keeping the first SNAP_BYTES of each packet to or from the
watched ports (enough for what a client sends first, never a whole request), each packet handed
over as it comes (`--immediate-mode`: TPACKET_V3 otherwise holds packets in a block until it times
out, and a capture stopped before then loses them), written as pcap and read back with dpkt.
A connection is its client's address and port (the lab does no SNAT between pods), so the same
connection seen on a pod's veth before a Service's DNAT and on the bridge after it counts once.
It is classed by what its client sent first in the capture:
- a TLS record (content type 20 to 23; version 3.0 to 3.4): `tls`. A connection opened before the
  capture began (the services' pooled database and AMQP connections) is first seen in the middle,
  with application data (23), not a handshake (22); `opened` says whether its SYN was seen;
- MariaDB's: the server greets in clear whatever follows (protocol 10, its version and a salt);
  a client that wants TLS answers with the 32-byte SSL request (capability CLIENT_SSL) and then
  sends a TLS record (`tls`); one that logs in (or queries) in clear, or sends nothing after its
  SSL request, is `plain`;
- a VNC client's (the console proxy's to a guest's VNC server): RFB's version and security
  negotiation come in clear; one that chose VeNCrypt (19, version 0.2, an x509 subtype) and then
  sends a TLS record is `tls`, one that chose another security type (None) is `plain`;
- anything else (AMQP's protocol header, an HTTP method, a memcached command): `plain`, kept with
  its first bytes so the report shows what went in clear.
A connection whose client sent nothing in the capture (refused, or closed at once) is not counted.
"""

from __future__ import annotations

import signal
import socket
import struct
import subprocess
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any

import dpkt

SNAP_BYTES = 256  # link, IP and TCP headers take at most ~100 of them
TLS_CONTENT_TYPES = range(0x14, 0x18)  # change_cipher_spec, alert, handshake, application_data
MARIADB_SSL_REQUEST = 32  # bytes of the SSL request's payload (after the 4-byte packet header)
MARIADB_CLIENTS_FIRST = 1  # the sequence id of the client's first packet (the server's greeting is 0)
CLIENT_SSL = 0x0800  # the capability bit the SSL request sets
START_SECONDS = 10
# tcpdump stops at SIGINT without reading what the kernel still holds for it: give it that long first.
SETTLE_SECONDS = 1.0


class CaptureError(RuntimeError):
    pass


def _is_tls_record(data: bytes) -> bool:
    """Whether data starts with a TLS record's header (what a TLS peer's every write starts with)."""
    return len(data) >= 3 and data[0] in TLS_CONTENT_TYPES and data[1] == 3 and data[2] <= 4


def _after_mariadb_ssl_request(data: bytes) -> bytes | None:
    """What the client sent after its SSL request, or None when its first packet is not one."""
    if len(data) < 8:
        return None
    length, sequence = int.from_bytes(data[:3], "little"), data[3]
    (capabilities,) = struct.unpack_from("<I", data, 4)
    if length != MARIADB_SSL_REQUEST or sequence != MARIADB_CLIENTS_FIRST or not capabilities & CLIENT_SSL:
        return None
    return data[4 + length :]


RFB_VERSION = b"RFB 003.00"  # what a VNC client sends first (RFB 3.3, 3.7, 3.8)
VENCRYPT = 19  # the security type VeNCrypt (rfbproto: a TLS session follows the negotiation)


def _after_vencrypt(data: bytes) -> bytes | None:
    """What a VNC client sent once its VeNCrypt negotiation in clear was done (version, security type
    19, VeNCrypt 0.2, a subtype), b"" for a client that chose another type; None when it is no VNC client."""
    if not data.startswith(RFB_VERSION) or len(data) < 13:
        return None
    if data[12] != VENCRYPT or data[13:15] != b"\x00\x02":
        return b""
    return data[19:]


@dataclass
class Connection:
    """One TCP connection to a watched port: what its client sent, in the order its segments came."""

    client: tuple[str, int]
    server_port: int
    opened: bool = False  # its SYN is in the capture: seen from its first byte
    initial_sequence: int | None = None  # its SYN's sequence number (None: opened before the capture)
    # Every address it was sent to: a Service's cluster address before kube-proxy's DNAT, the pod's after.
    servers: set[str] = field(default_factory=set)
    sent: list[bytes] = field(default_factory=list)
    _seen: set[int] = field(default_factory=set)  # sequence numbers: a segment seen on two interfaces counts once

    def add(self, sequence: int, payload: bytes) -> None:
        if payload and sequence not in self._seen:
            self._seen.add(sequence)
            self.sent.append(payload)

    @property
    def kind(self) -> str | None:
        """`tls`, `plain`, or None when the client sent nothing the capture kept."""
        data = b"".join(self.sent)
        if not data:
            return None
        after = _after_mariadb_ssl_request(data)  # whatever the port: a test's MariaDB listens anywhere
        if after is None:
            after = _after_vencrypt(data)
        if after is not None:
            return "tls" if _is_tls_record(after) else "plain"
        return "tls" if _is_tls_record(data) else "plain"

    def first_bytes(self) -> str:
        """The first bytes the client sent, printable (what went in clear)."""
        return "".join(chr(b) if 32 <= b < 127 else "." for b in b"".join(self.sent)[:48])


def _ip(packet: Any) -> Any:
    """The IPv4 or IPv6 packet of a captured frame (Linux cooked capture, v1 or v2), or None."""
    data = packet.data
    return data if isinstance(data, (dpkt.ip.IP, dpkt.ip6.IP6)) else None


def _address(ip: Any, raw: bytes) -> str:
    family = socket.AF_INET if isinstance(ip, dpkt.ip.IP) else socket.AF_INET6
    return socket.inet_ntop(family, raw)


def connections(pcaps: Iterable[Path], ports: Iterable[int]) -> list[Connection]:
    """Every TCP connection to one of `ports` in the captures, with what its client sent."""
    watched = set(ports)
    found: dict[tuple[str, int], list[Connection]] = {}
    for path in pcaps:
        with path.open("rb") as stream:
            try:
                reader = dpkt.pcap.Reader(stream)
            except (dpkt.Error, ValueError) as error:  # no pcap header: tcpdump wrote nothing
                raise CaptureError(f"{path}: not a pcap file ({error})") from error
            frame = {dpkt.pcap.DLT_LINUX_SLL: dpkt.sll.SLL, dpkt.pcap.DLT_LINUX_SLL2: dpkt.sll2.SLL2}.get(
                reader.datalink()
            )
            if frame is None:
                raise CaptureError(f"{path}: link type {reader.datalink()}, expected Linux cooked capture (-i any)")
            for _, raw in reader:
                try:
                    ip = _ip(frame(raw))
                except dpkt.UnpackError:  # a frame cut shorter than its headers: nothing of a client's bytes
                    continue
                if ip is None or not isinstance(ip.data, dpkt.tcp.TCP):
                    continue
                tcp = ip.data
                if tcp.dport not in watched:
                    continue  # server to client: what the server says is not what this classes
                key = (_address(ip, ip.src), tcp.sport)
                connection = _connection_of(found.setdefault(key, []), key, tcp)
                connection.servers.add(_address(ip, ip.dst))
                connection.add(tcp.seq, bytes(tcp.data))
    return [connection for same_client in found.values() for connection in same_client]


def _connection_of(same_client: list[Connection], client: tuple[str, int], tcp: Any) -> Connection:
    """The connection a client's segment belongs to. A client address and port is no connection's own:
    a node's kubelet probes two pods from one source port (Linux reuses it towards another address),
    and a port comes back after TIME_WAIT. Each SYN's sequence number tells them apart (the same SYN
    seen on two interfaces, before and after kube-proxy's DNAT, is one connection); a later segment
    belongs to the connection whose initial sequence number it follows most closely."""
    if tcp.flags & dpkt.tcp.TH_SYN and tcp.flags & dpkt.tcp.TH_ACK:
        # A server's SYN-ACK to a client whose own port is watched (one of QEMU's migration ports is an
        # ephemeral port too): no client's connection to that port begins.
        return _midstream(same_client, client, tcp)
    if tcp.flags & dpkt.tcp.TH_SYN:
        known = next((c for c in same_client if c.initial_sequence == tcp.seq), None)
        if known is not None:
            return known
        opened = Connection(client=client, server_port=tcp.dport, opened=True, initial_sequence=tcp.seq)
        same_client.append(opened)
        return opened
    after = [(_distance(c.initial_sequence, tcp.seq), c) for c in same_client if c.initial_sequence is not None]
    following = [(distance, c) for distance, c in after if distance < FOLLOWING_LIMIT]
    if following:
        return min(following, key=lambda pair: pair[0])[1]
    return _midstream(same_client, client, tcp)


def _midstream(same_client: list[Connection], client: tuple[str, int], tcp: Any) -> Connection:
    """Opened before the capture began (a pooled connection, first seen mid-stream): one per client port."""
    midstream = next((c for c in same_client if c.initial_sequence is None), None)
    if midstream is None:
        midstream = Connection(client=client, server_port=tcp.dport)
        same_client.append(midstream)
    return midstream


# How far past its SYN a segment of the connection may be: more than the lab's clients send on one
# connection (256 MiB), a sixteenth of TCP's 2^32 sequence space (compared modulo it).
FOLLOWING_LIMIT = 1 << 28


def _distance(initial: int, sequence: int) -> int:
    return (sequence - initial) % (1 << 32)


def summarize(
    found: Iterable[Connection],
    names: Mapping[str, Iterable[int]],
    addresses: Mapping[str, Iterable[str]] | None = None,
    opened_only: Iterable[str] = (),
) -> dict[str, dict[str, Any]]:
    """Per watched name (mariadb, rabbitmq, keystone-api, ...) and its ports (a Service's and its
    target's): connections seen (`opened` of them during the capture), how many TLS and how many plain,
    the first bytes of up to three plain ones, and `encrypted`: seen and none plain. With `addresses`
    (a name's Service address and its pods'), only connections to one of them count for the name:
    two Services may use one port (Horizon's 8080 and another pod's health port). For the names of
    `opened_only` (ports in the ephemeral range, to which servers answer clients too) only connections
    whose client's SYN was seen count."""
    by_port: dict[int, list[Connection]] = {}
    for connection in found:
        if connection.kind is not None:
            by_port.setdefault(connection.server_port, []).append(connection)
    summary: dict[str, dict[str, Any]] = {}
    for name, ports in sorted(names.items()):
        seen = [c for port in sorted(set(ports)) for c in by_port.get(port, [])]
        if addresses is not None and name in addresses:
            mine = set(addresses[name])
            seen = [c for c in seen if c.servers & mine]
        if name in set(opened_only):
            seen = [c for c in seen if c.opened]
        plain = [c for c in seen if c.kind == "plain"]
        summary[name] = {
            "ports": sorted(set(ports)),
            "connections": len(seen),
            "opened": sum(c.opened for c in seen),
            "tls": len(seen) - len(plain),
            "plain": len(plain),
            "plain_starts": [c.first_bytes() for c in plain[:3]],
            "encrypted": bool(seen) and not plain,
        }
    return summary


class Capture:
    """tcpdump in each of `netns` (None: this process's own) on the given ports while the `with` block
    runs; pcaps in `directory`."""

    def __init__(self, directory: Path, netns: Iterable[str | None], ports: Iterable[int]) -> None:
        self.directory = directory
        self.netns = list(netns)
        self.ports = sorted(set(ports))
        self._running: list[subprocess.Popen[bytes]] = []

    @property
    def pcaps(self) -> list[Path]:
        return [self.directory / f"{name or 'here'}.pcap" for name in self.netns]

    def __enter__(self) -> Capture:
        self.start()
        return self

    def start(self) -> None:
        """Every tcpdump capturing, or CaptureError (and none left running)."""
        self.directory.mkdir(parents=True, exist_ok=True)
        wanted = "tcp and (" + " or ".join(f"port {port}" for port in self.ports) + ")"
        try:
            for name, pcap in zip(self.netns, self.pcaps, strict=True):
                inside = ["ip", "netns", "exec", name] if name else []
                command = [
                    *inside, "tcpdump", "-i", "any", "-U", "--immediate-mode", "-Z", "root",
                    "-s", str(SNAP_BYTES), "-w", str(pcap), wanted,
                ]  # fmt: skip
                process = subprocess.Popen(command, stderr=subprocess.PIPE)
                self._running.append(process)
                self._await_listening(name, process)
        except BaseException:
            self.stop()
            raise

    @staticmethod
    def _await_listening(name: str | None, process: subprocess.Popen[bytes]) -> None:
        """tcpdump says `listening on any` once it captures; what it said otherwise is the error."""
        assert process.stderr is not None
        said = []
        for line in process.stderr:  # ends when tcpdump does
            said.append(line.decode(errors="replace").strip())
            if "listening on" in said[-1]:
                return
        raise CaptureError(f"tcpdump in {name or 'this namespace'} did not start: {' '.join(said)[-500:]}")

    def stop(self) -> None:
        """Ends every tcpdump (each writes out what it holds); again, it does nothing."""
        if any(process.poll() is None for process in self._running):
            time.sleep(SETTLE_SECONDS)
        for process in self._running:
            if process.poll() is None:
                process.send_signal(signal.SIGINT)  # tcpdump writes out what it holds and ends
        for process in self._running:
            try:
                process.wait(timeout=START_SECONDS)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
            if process.stderr is not None:
                process.stderr.close()
        self._running.clear()

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self.stop()
