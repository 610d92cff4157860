"""Readiness of a daemon without an HTTP endpoint: is it connected to what it serves through?

An RPC daemon (scheduler, conductor, agents, cinder-volume) is of use only while it holds
connections to the message queue and, where it has one, the database. This probe reads
the kernel's socket tables, so it needs no tools in the image: `health_probe.py 5672 3306`
passes when the container's own processes hold an established connection to each port.

The tables (/proc/net/tcp{,6}) list every connection of the network namespace, which in a
hostNetwork pod is the node's: any process on the node connected to RabbitMQ would make
every such pod ready. So only rows whose socket belongs to a process the probe can see
count. An exec probe runs in the container's PID namespace, so those are the container's
own processes; a socket is theirs when one of their /proc/<pid>/fd links reads
"socket:[<inode>]" with the row's inode.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable
from pathlib import Path

ESTABLISHED = "01"
TABLES = ("/proc/net/tcp", "/proc/net/tcp6")


def visible_pids() -> list[int]:
    """The processes of this PID namespace, without the probe itself."""
    own = os.getpid()
    return [int(entry.name) for entry in Path("/proc").iterdir() if entry.name.isdigit() and int(entry.name) != own]


def socket_inodes(pids: Iterable[int]) -> set[str]:
    inodes = set()
    for pid in pids:
        try:
            fds = list(Path(f"/proc/{pid}/fd").iterdir())
        except OSError:
            continue  # gone meanwhile, or not ours to read (a root privsep helper)
        for fd in fds:
            try:
                link = os.readlink(fd)
            except OSError:
                continue  # closed meanwhile
            if link.startswith("socket:["):
                inodes.add(link[len("socket:[") : -1])
    return inodes


def connected_ports(pids: Iterable[int]) -> set[int]:
    """Remote ports of the established TCP connections that these processes hold."""
    inodes = socket_inodes(pids)
    ports = set()
    for table in TABLES:
        path = Path(table)
        if not path.exists():
            continue
        for line in path.read_text().splitlines()[1:]:
            fields = line.split()
            if fields[3] == ESTABLISHED and fields[9] in inodes:
                ports.add(int(fields[2].rsplit(":", 1)[1], 16))
    return ports


def main() -> None:
    wanted = {int(port) for port in sys.argv[1:]}
    missing = wanted - connected_ports(visible_pids())
    if missing:
        sys.exit(f"no established connection to port(s) {', '.join(map(str, sorted(missing)))}")


if __name__ == "__main__":
    main()
