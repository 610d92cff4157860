"""Readiness of a daemon without an HTTP endpoint: is it connected to what it serves through?

An RPC daemon (scheduler, conductor, agents, cinder-volume) is of use only while it holds
connections to the message queue and, where it has one, the database. This probe reads
the kernel's socket tables of the pod's network namespace, so it needs no tools in the
image: `health_probe.py 5672 3306` passes when an established connection to each port exists.
"""

import sys
from pathlib import Path

ESTABLISHED = "01"


def remote_ports() -> set[int]:
    ports = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        path = Path(table)
        if not path.exists():
            continue
        for line in path.read_text().splitlines()[1:]:
            fields = line.split()
            if fields[3] == ESTABLISHED:
                ports.add(int(fields[2].rsplit(":", 1)[1], 16))
    return ports


def main() -> None:
    wanted = {int(port) for port in sys.argv[1:]}
    missing = wanted - remote_ports()
    if missing:
        sys.exit(f"no established connection to port(s) {', '.join(map(str, sorted(missing)))}")


if __name__ == "__main__":
    main()
