"""Compute nodes for tests/real: Debian's libvirtd started by the plan's own script, in namespaces of its own.

Each node is a mount and network namespace held by a `sleep` (`unshare`), entered with `nsenter`
for every command, as a pod's containers share their pod's namespaces. In it /etc and /var are
overlays of this machine's (what the node writes stays there: /etc/libvirt, the SASL database,
/var/lib/libvirt), /run and /tmp are its own (libvirt's sockets, the host's /run/libvirt/pki), and
the node's state directory is at /mnt. Two nodes are joined by a veth pair on addresses of their
own, as two compute nodes on one network. Nothing is left on this machine: the namespaces go with
their holder.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from tools.runtime import REPO

SCRIPTS = REPO / "components" / "scripts"
STATE = "/mnt"  # the node's state directory, as the node sees it


@dataclass
class Node:
    name: str
    address: str
    state: Path
    holder: subprocess.Popen[bytes]
    spawned: list[subprocess.Popen[bytes]] = field(default_factory=list)

    @property
    def netns(self) -> str:
        return f"/proc/{self.holder.pid}/ns/net"

    def _enter(self) -> list[str]:
        return ["nsenter", "-t", str(self.holder.pid), "-m", "-n"]

    def sh(
        self, script: str, env: dict[str, str] | None = None, timeout: float = 120
    ) -> subprocess.CompletedProcess[str]:
        """A shell command in the node; never raises on failure (the caller judges)."""
        return subprocess.run([*self._enter(), "bash", "-c", script], env={**os.environ, **(env or {})},
                              capture_output=True, text=True, timeout=timeout, check=False)  # fmt: skip

    def spawn(self, command: list[str], log: str, env: dict[str, str]) -> subprocess.Popen[bytes]:
        """A long-running process in the node, its output in the state directory's `log`."""
        with (self.state / log).open("ab") as out:
            process = subprocess.Popen([*self._enter(), *command], env={"PATH": os.environ["PATH"], **env},
                                       stdout=out, stderr=subprocess.STDOUT, start_new_session=True)  # fmt: skip
        self.spawned.append(process)
        return process

    def wait_for(self, what: str, check: str, timeout: float = 120) -> None:
        deadline = time.monotonic() + timeout
        while self.sh(check).returncode != 0:
            if time.monotonic() > deadline or any(p.poll() is not None for p in self.spawned):
                logs = {p.name: p.read_text()[-3000:] for p in self.state.glob("*.log")}
                raise TimeoutError(f"{self.name}: {what} not there (after {timeout:.0f}s at most); logs: {logs}")
            time.sleep(1)

    def port_open(self, address: str, port: int) -> bool:
        code = f"import socket; socket.create_connection(({address!r}, {port}), timeout=3).close()"
        return self.sh(f"python3 -c {shlex.quote(code)}").returncode == 0

    def stop(self) -> None:
        # Guests first, by libvirt, which removes their cgroups; then whatever is left, by force.
        self.sh("for d in $(virsh -c qemu:///system list --name); do virsh -c qemu:///system destroy $d; done")
        for process in reversed(self.spawned):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, 9)
        # QEMU left libvirtd's session: whatever runs in the node's network namespace goes too.
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit() and int(entry.name) != self.holder.pid:
                with contextlib.suppress(OSError):
                    if os.readlink(entry / "ns" / "net") == os.readlink(self.netns):
                        os.kill(int(entry.name), 9)
        self.holder.kill()
        self.holder.wait()


CGROUPS = Path("/sys/fs/cgroup")


def machine_cgroups() -> set[Path]:
    """libvirt's `machine` groups (it makes them in this machine's cgroup tree for its guests)."""
    return {path for path in CGROUPS.glob("*/machine") if path.is_dir()} | (
        {CGROUPS / "machine"} if (CGROUPS / "machine").is_dir() else set()
    )


def remove_cgroups(made: set[Path]) -> None:
    """The empty groups libvirt made and left (the guests' own go with them)."""
    for top in made:
        for path in [*sorted((p for p in top.rglob("*") if p.is_dir()), key=lambda p: -len(p.parts)), top]:
            with contextlib.suppress(OSError):
                path.rmdir()


def start_node(name: str, state: Path) -> Node:
    state.mkdir(parents=True, exist_ok=True)
    for layer in ("etc-upper", "etc-work", "var-upper", "var-work"):
        (state / layer).mkdir(exist_ok=True)
    holder = subprocess.Popen(["unshare", "--mount", "--net", "--propagation", "private", "sleep", "infinity"])
    node = Node(name, "", state, holder)
    for _ in range(50):  # unshare has made the namespaces once the holder is sleep
        if os.readlink(f"/proc/{holder.pid}/exe").endswith("sleep"):
            break
        time.sleep(0.05)
    s = shlex.quote(str(state))
    setup = node.sh(
        "set -e\n"
        f"mount --bind {s} {STATE}\n"
        f"mount -t overlay overlay -o lowerdir=/etc,upperdir={s}/etc-upper,workdir={s}/etc-work /etc\n"
        f"mount -t overlay overlay -o lowerdir=/var,upperdir={s}/var-upper,workdir={s}/var-work /var\n"
        "mount -t tmpfs -o mode=755 tmpfs /run\n"
        "mount -t tmpfs -o mode=1777 tmpfs /tmp\n"
        "ip link set lo up\n"
    )
    if setup.returncode != 0:
        node.stop()
        raise RuntimeError(f"node {name}: {setup.stderr}")
    return node


def join(one: Node, other: Node, network: str = "10.217.40") -> None:
    """A veth pair between two nodes: `<network>.1` and `.2`."""
    left, right = f"lv{one.holder.pid}", f"lv{other.holder.pid}"
    subprocess.run(["ip", "link", "add", left, "type", "veth", "peer", "name", right], check=True)
    subprocess.run(["ip", "link", "set", left, "netns", str(one.holder.pid)], check=True)
    subprocess.run(["ip", "link", "set", right, "netns", str(other.holder.pid)], check=True)
    for node, link, host in ((one, left, 1), (other, right, 2)):
        node.address = f"{network}.{host}"
        done = node.sh(f"ip addr add {node.address}/24 dev {link} && ip link set {link} up")
        assert done.returncode == 0, done.stderr
