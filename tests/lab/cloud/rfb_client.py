"""A VNC client's first steps, as noVNC takes them over the console proxy's websocket (RFC 6143, RFC 6455).

noVNC sends RFB as binary websocket frames, masked as a client's must be, and reads the server's
bytes from whatever frames they come in. Through Nova's console proxy the client sees the proxy's
side of the security negotiation: the proxy offers it the security type None (1) and makes its own
with the VNC server (VeNCrypt under tls.libvirt, nova/console/securityproxy/rfb.py), then passes
the server's SecurityResult and ServerInit on. So reaching ServerInit says the proxy's hop to the
guest's VNC server was made with a security type the proxy accepts.

Standard library only: the laptop runs it from the OpenStack virtualenv (tests/lab/cloud/public_scenario.py).
"""

from __future__ import annotations

import os
import socket
import ssl
import struct
from typing import Any, Protocol

NONE = 1  # RFB security type None


class Frames(Protocol):
    def __call__(self, sock: ssl.SSLSocket | socket.socket) -> tuple[int, bytes]: ...


def masked_frame(payload: bytes, opcode: int = 2) -> bytes:
    """A client's frame: masked with a random key (RFC 6455 5.3)."""
    size, mask = len(payload), os.urandom(4)
    if size < 126:
        header = bytes([0x80 | opcode, 0x80 | size])
    else:
        header = bytes([0x80 | opcode, 0x80 | 126]) + size.to_bytes(2, "big")
    return header + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(payload))


class Stream:
    """The server's bytes across its websocket frames, and the client's sent as frames."""

    def __init__(self, sock: ssl.SSLSocket | socket.socket, read_frame: Frames, already: bytes = b""):
        self.sock, self.read_frame, self.buffer = sock, read_frame, already

    def read(self, size: int) -> bytes:
        while len(self.buffer) < size:
            opcode, payload = self.read_frame(self.sock)
            if opcode == 8:
                raise ConnectionError(f"closed by the server after {self.buffer!r}")
            self.buffer += payload
        data, self.buffer = self.buffer[:size], self.buffer[size:]
        return data

    def send(self, data: bytes) -> None:
        self.sock.sendall(masked_frame(data))


def handshake(stream: Stream) -> dict[str, Any]:
    """RFB 3.8 from the greeting to ServerInit, taking security type None: what it reached, and ServerInit's facts."""
    found: dict[str, Any] = {"reached": ""}
    version = stream.read(12)
    found["version"] = version.decode(errors="replace").strip()
    stream.send(b"RFB 003.008\n")
    count = stream.read(1)[0]
    if count == 0:  # the server (through the proxy) refuses: a reason follows
        found["refused"] = stream.read(struct.unpack("!I", stream.read(4))[0]).decode(errors="replace")
        return found
    found["security_types"] = list(stream.read(count))
    stream.send(bytes([NONE]))
    result = struct.unpack("!I", stream.read(4))[0]
    found["reached"] = "SecurityResult"
    if result != 0:
        found["refused"] = stream.read(struct.unpack("!I", stream.read(4))[0]).decode(errors="replace")
        return found
    stream.send(bytes([1]))  # ClientInit: shared
    header = stream.read(24)
    width, height = struct.unpack("!HH", header[:4])
    name = stream.read(struct.unpack("!I", header[20:24])[0]).decode(errors="replace")
    found.update(reached="ServerInit", width=width, height=height, name=name)
    return found
