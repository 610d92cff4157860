"""How the lab's capture (tests/lab/cloud/capture.py) tells TCP connections apart, on pcaps written here.

Seen in the staging lab: the node's kubelet probed Horizon (HTTPS) and nova-compute-maintenance's
/healthz (plain HTTP), both on port 8080, from one source address and port; keyed by the client
alone, the two were one connection, sent to both pods' addresses, and Horizon was reported as
spoken to in clear. The real capture is tests/real/test_capture.py."""

from __future__ import annotations

import socket
from pathlib import Path

import dpkt

from tests.lab.cloud.capture import connections, summarize

NODE, HORIZON, MAINTENANCE, SERVICE = "10.244.0.1", "10.244.0.7", "10.244.0.9", "10.96.0.20"
TLS_HELLO = bytes([0x16, 0x03, 0x01, 0x00, 0x05]) + b"hello"
HEALTHZ = b"GET /healthz HTTP/1.1\r\n"


def _segment(src: str, sport: int, dst: str, dport: int, seq: int, flags: int, data: bytes = b"") -> bytes:
    tcp = dpkt.tcp.TCP(sport=sport, dport=dport, seq=seq, flags=flags, data=data)
    ip = dpkt.ip.IP(src=socket.inet_aton(src), dst=socket.inet_aton(dst), p=dpkt.ip.IP_PROTO_TCP, data=tcp)
    return bytes(dpkt.sll.SLL(type=0x0800, data=ip))


def _pcap(path: Path, frames: list[bytes]) -> Path:
    with path.open("wb") as stream:
        writer = dpkt.pcap.Writer(stream, linktype=dpkt.pcap.DLT_LINUX_SLL)
        for index, frame in enumerate(frames):
            writer.writepkt(frame, ts=1000.0 + index)
    return path


def test_two_connections_from_one_client_port_to_two_pods_stay_two(tmp_path: Path) -> None:
    syn, ack = dpkt.tcp.TH_SYN, dpkt.tcp.TH_ACK
    frames = [
        _segment(NODE, 40000, HORIZON, 8080, 1_000_000, syn),
        _segment(NODE, 40000, MAINTENANCE, 8080, 3_000_000_000, syn),
        _segment(NODE, 40000, HORIZON, 8080, 1_000_001, ack, TLS_HELLO),
        _segment(NODE, 40000, MAINTENANCE, 8080, 3_000_000_001, ack, HEALTHZ),
    ]
    found = connections([_pcap(tmp_path / "node.pcap", frames)], [8080])
    by_server = {frozenset(c.servers): c.kind for c in found}
    assert by_server == {frozenset({HORIZON}): "tls", frozenset({MAINTENANCE}): "plain"}
    assert all(c.opened for c in found)


def test_one_connection_seen_before_and_after_dnat_on_two_nodes_is_one(tmp_path: Path) -> None:
    syn, ack = dpkt.tcp.TH_SYN, dpkt.tcp.TH_ACK
    client = "10.244.1.5"
    before = [_segment(client, 41000, SERVICE, 8080, 7, syn), _segment(client, 41000, SERVICE, 8080, 8, ack, TLS_HELLO)]
    after = [_segment(client, 41000, HORIZON, 8080, 7, syn), _segment(client, 41000, HORIZON, 8080, 8, ack, TLS_HELLO)]
    found = connections([_pcap(tmp_path / "a.pcap", before), _pcap(tmp_path / "b.pcap", after)], [8080])
    assert len(found) == 1 and found[0].servers == {SERVICE, HORIZON} and found[0].kind == "tls"
    assert found[0].sent == [TLS_HELLO]  # the segment seen twice counts once


def test_a_port_reused_after_time_wait_is_a_new_connection_and_a_pooled_one_is_kept(tmp_path: Path) -> None:
    syn, ack = dpkt.tcp.TH_SYN, dpkt.tcp.TH_ACK
    frames = [
        _segment(NODE, 42000, HORIZON, 8080, 555_000, ack, b"\x17\x03\x03\x00\x10" + b"x" * 16),  # pooled: no SYN
        _segment(NODE, 42000, HORIZON, 8080, 90, syn),
        _segment(NODE, 42000, HORIZON, 8080, 91, ack, HEALTHZ),
    ]
    found = connections([_pcap(tmp_path / "node.pcap", frames)], [8080])
    assert sorted((c.opened, c.kind) for c in found) == [(False, "tls"), (True, "plain")]


def test_a_vnc_client_is_tls_once_it_chose_vencrypt_and_plain_with_none(tmp_path: Path) -> None:
    """The console proxy's hop to a guest's VNC server: RFB's negotiation in clear, then TLS (VeNCrypt)."""
    syn, ack = dpkt.tcp.TH_SYN, dpkt.tcp.TH_ACK
    proxy, guest = "10.244.0.30", "192.168.200.13"
    vencrypt = [b"RFB 003.008\n", bytes([19]), b"\x00\x02", (260).to_bytes(4, "big"), TLS_HELLO]
    plain = [b"RFB 003.008\n", bytes([1]), bytes([1])]  # security type None, then ClientInit
    frames, seq = [_segment(proxy, 43000, guest, 5900, 10, syn), _segment(proxy, 43001, guest, 5901, 20, syn)], 11
    for data in vencrypt:
        frames.append(_segment(proxy, 43000, guest, 5900, seq, ack, data))
        seq += len(data)
    seq = 21
    for data in plain:
        frames.append(_segment(proxy, 43001, guest, 5901, seq, ack, data))
        seq += len(data)
    found = connections([_pcap(tmp_path / "node.pcap", frames)], [5900, 5901])
    assert {c.server_port: c.kind for c in found} == {5900: "tls", 5901: "plain"}


def test_a_server_answering_a_client_on_a_watched_ephemeral_port_is_no_connection_to_it(tmp_path: Path) -> None:
    """QEMU's migration ports (49152-49215) are in Linux's ephemeral range: memcached's SYN-ACK and
    answers to a client that happened to get port 49155 must not read as a client speaking plain text
    to port 49155 (prod's lab saw `VALUE ...` and `ceph v2` there), where opened_only counts SYNs alone."""
    syn, ack = dpkt.tcp.TH_SYN, dpkt.tcp.TH_ACK
    memcached, client, node_a, node_b = "10.244.0.40", "10.244.0.41", "192.168.200.13", "192.168.200.14"
    frames = [
        _segment(memcached, 11211, client, 49155, 500, syn | ack),  # the server's SYN-ACK
        _segment(memcached, 11211, client, 49155, 501, ack, b"VALUE :1:key 1 4\r\n"),
        _segment(node_a, 40992, node_b, 49152, 900, syn),  # QEMU's migration stream, source to destination
        _segment(node_a, 40992, node_b, 49152, 901, ack, TLS_HELLO),
    ]
    found = connections([_pcap(tmp_path / "node.pcap", frames)], range(49152, 49216))
    assert not [c for c in found if c.opened and c.server_port == 49155]  # a SYN-ACK opens nothing
    summary = summarize(found, {"qemu-migration": range(49152, 49216)}, opened_only=("qemu-migration",))
    assert summary["qemu-migration"]["connections"] == 1 and summary["qemu-migration"]["encrypted"]
    assert not summarize(found, {"qemu-migration": range(49152, 49216)})["qemu-migration"]["encrypted"]
