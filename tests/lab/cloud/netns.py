"""Entering a network namespace from a thread: each node's kubelet work runs in its node's network."""

from __future__ import annotations

import ctypes
import os

CLONE_NEWNET = 0x40000000
_libc = ctypes.CDLL("libc.so.6", use_errno=True)


def enter_netns(path: str) -> None:
    """Move the calling thread into a network namespace (setns is per thread).

    Sockets it opens from then on, and processes it starts, are in that namespace.
    """
    fd = os.open(path, os.O_RDONLY)
    try:
        if _libc.setns(fd, CLONE_NEWNET) != 0:
            raise OSError(ctypes.get_errno(), f"setns {path}")
    finally:
        os.close(fd)
