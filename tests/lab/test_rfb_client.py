"""The laptop's VNC client reads RFB across any websocket frames, masks its own, and stops where refused."""

from __future__ import annotations

import socket
import struct
import threading

from tests.lab.cloud.publicclient import frame, read_frame
from tests.lab.cloud.rfb_client import Stream, handshake

SERVER_INIT = struct.pack("!HH", 640, 480) + bytes(16) + struct.pack("!I", 9) + b"QEMU (vm)"


def _masked(sock: socket.socket) -> bytes:
    """The client's next frame's payload; only a masked one (RFC 6455: a client masks every frame)."""
    assert sock.recv(2, socket.MSG_PEEK)[1] & 0x80
    return read_frame(sock)[1]


def _serve(sock: socket.socket, security: bytes, result: bytes, received: list[bytes]) -> None:
    """A console proxy's side: the greeting split over two frames, then the rest joined in one."""
    sock.sendall(frame(b"RFB 003") + frame(b".008\n"))
    received.append(_masked(sock))  # the client's version
    sock.sendall(frame(security))
    if security[0] == 0:
        return
    received.append(_masked(sock))  # the chosen type
    sock.sendall(frame(result + (SERVER_INIT[:10] if result == bytes(4) else b"")))
    if result != bytes(4):
        return
    received.append(_masked(sock))  # ClientInit
    sock.sendall(frame(SERVER_INIT[10:]))


def _run(security: bytes, result: bytes = bytes(4)) -> tuple[dict[str, object], list[bytes]]:
    client, server = socket.socketpair()
    received: list[bytes] = []
    thread = threading.Thread(target=_serve, args=(server, security, result, received))
    thread.start()
    found = handshake(Stream(client, read_frame))
    thread.join(5)
    return found, received


def test_servers_bytes_across_frames_to_server_init() -> None:
    found, received = _run(bytes([1, 1]))
    assert found == {"reached": "ServerInit", "version": "RFB 003.008", "security_types": [1], "width": 640,
                     "height": 480, "name": "QEMU (vm)"}  # fmt: skip
    assert received == [b"RFB 003.008\n", bytes([1]), bytes([1])]


def test_a_refusal_is_reported_with_its_reason() -> None:
    reason = b"Unable to negotiate security with server"
    found, _ = _run(bytes([0]) + struct.pack("!I", len(reason)) + reason)
    assert found["refused"] == reason.decode() and found["reached"] == ""
    found, _ = _run(bytes([1, 1]), struct.pack("!I", 1) + struct.pack("!I", len(reason)) + reason)
    assert found == {"reached": "SecurityResult", "version": "RFB 003.008", "security_types": [1],
                     "refused": reason.decode()}  # fmt: skip
