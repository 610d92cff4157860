"""Reading a fixed number of bytes from a socket: what every wire protocol the lab speaks by hand needs
(MySQL packets in tls_probe.py, WebSocket frames in publicclient.py). Standard library only: the user's
pod runs these modules with the venv's own Python."""

from __future__ import annotations

import socket
import ssl


def read_exact(sock: ssl.SSLSocket | socket.socket, size: int) -> bytes:
    """Exactly `size` bytes, or ConnectionError if the peer closes first (saying how far it got)."""
    data = b""
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        if not chunk:
            raise ConnectionError(f"closed after {len(data)} of {size} bytes")
        data += chunk
    return data
