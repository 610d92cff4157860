"""Starts one container the way a container runtime does, with util-linux tools.

`launch.sh` joins the container's cgroups, enters the pod's network namespace (`nsenter`),
makes new mount, UTS and IPC namespaces and, unless the pod shares the host's PIDs, a PID
namespace in which the command is PID 1 (`unshare`). `setup.sh` then builds the container's
root inside them: the Kolla image layer over this machine's root (overlayfs, writable layer
on a tmpfs), /proc, /sys, /dev, the pod's volumes at their mount paths, /etc/hosts; and
finally `pivot_root` (as runc does: software that makes mount namespaces of its own, like
libvirt for QEMU, must see the container's root as its namespace's root) and `setpriv` drop
to the container's user, groups and capabilities, with
no_new_privs where privilege escalation is off. Nothing is adapted to this machine beyond
the image layer (tests/lab/cloud/images.py); seccomp profiles are not applied (reported).

Both scripts are written next to the container's log, so each start can be read and rerun.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from tests.lab.cloud.node import LAB_NODES, make_cgroup

# What containerd grants a container that asks for nothing (its default capability set).
DEFAULT_CAPABILITIES = (
    "CHOWN", "DAC_OVERRIDE", "FSETID", "FOWNER", "MKNOD", "NET_RAW", "SETGID", "SETUID",
    "SETFCAP", "SETPCAP", "NET_BIND_SERVICE", "SYS_CHROOT", "KILL", "AUDIT_WRITE",
)  # fmt: skip
# The device nodes a runtime gives every unprivileged container.
DEFAULT_DEVICES = ("null", "zero", "full", "random", "urandom", "tty")
WRITABLE_LAYER_SIZE = "2g"


@dataclass(frozen=True)
class Mount:
    source: Path
    target: str
    read_only: bool = False
    propagation: str | None = None  # Kubernetes' mountPropagation

    @property
    def is_file(self) -> bool:
        return self.source.is_file() or (self.source.is_char_device())


@dataclass(frozen=True)
class Security:
    uid: int
    gid: int
    groups: tuple[int, ...] = ()
    privileged: bool = False
    capabilities: tuple[str, ...] = DEFAULT_CAPABILITIES
    no_new_privs: bool = False
    read_only_root: bool = False

    def setpriv(self) -> list[str]:
        args = ["/usr/bin/setpriv", f"--reuid={self.uid}", f"--regid={self.gid}"]
        args.append(f"--groups={','.join(map(str, self.groups))}" if self.groups else "--clear-groups")
        if not self.privileged:
            caps = "".join(f",+{c.lower()}" for c in self.capabilities)
            args += [f"--bounding-set=-all{caps}", "--inh-caps=-all"]
        if self.no_new_privs:
            args.append("--no-new-privs")
        return args


@dataclass
class Container:
    """One container of a pod, ready to start: everything resolved, nothing left to the runtime."""

    pod: str
    name: str
    command: list[str]
    env: dict[str, str]
    layer: Path  # the image layer (tests/lab/cloud/images.py)
    venv_mounts: dict[str, Path]  # image path → this machine's virtualenv
    mounts: list[Mount]
    security: Security
    netns_path: str
    host_pid: bool
    hostname: str
    cgroups: list[Path]
    node_cgroups: list[Path]  # its node's root groups: the cgroup namespace's root
    state: Path  # scripts, writable layer mount point, root
    log: Path
    memory_limit: int | None = None
    cpu_limit_millis: int | None = None
    working_dir: str = "/"
    host_ipc: bool = False
    proc: subprocess.Popen | None = field(default=None, repr=False)
    started_at: float = 0.0

    @property
    def root(self) -> Path:
        return self.state / "root"

    # -- scripts ---------------------------------------------------------------------------------

    def setup_script(self) -> str:
        r = shlex.quote(str(self.root))
        layers = shlex.quote(str(self.state / "layers"))
        q = shlex.quote
        lines = [
            "#!/bin/sh",
            f"# {self.pod}/{self.name}: the container's root, built inside its namespaces"
            " (tests/lab/cloud/container.py)",
            "set -eu",
            "container_path=$PATH",  # the container's own PATH, restored for its command
            "PATH=/usr/sbin:/usr/bin:/sbin:/bin",
            f"mount -t tmpfs -o size={WRITABLE_LAYER_SIZE},mode=755 layers {layers}",
            f"mkdir -p {layers}/upper {layers}/work",
            f"mount -t overlay overlay -o lowerdir={q(str(self.layer))}:/,upperdir={layers}/upper,"
            f"workdir={layers}/work {r}",
        ]
        for target, venv in self.venv_mounts.items():
            lines.append(f"mount --bind {q(str(venv))} {r}{q(target)}")
        lines += [f"mount -t proc proc {r}/proc", *self._sys_mounts(r), *self._dev_mounts(r)]
        lines += [f"mount -t tmpfs -o mode=1777 tmpfs {r}/tmp", f"mount -t tmpfs -o mode=755 tmpfs {r}/run",
                  f"mkdir -p {r}/run/lock"]  # fmt: skip
        for mount in self.mounts:
            lines += self._volume_mount(r, mount)
        lines.append(f"hostname {q(self.hostname)}")
        if self.security.read_only_root:
            lines.append(f"mount -o remount,bind,ro {r}")
        inner = ["/bin/sh", "-c", 'cd "$0" && exec "$@"', self.working_dir, *self.command]
        lines += [
            f"cd {r}",
            "mkdir -p .old-root",
            "pivot_root . .old-root",
            "cd /",
            "umount -l /.old-root",
            "rmdir /.old-root",
            "PATH=$container_path",
            f"exec {shlex.join(self.security.setpriv())} -- {shlex.join(inner)}",
        ]
        return "\n".join(lines) + "\n"

    def _sys_mounts(self, r: str) -> list[str]:
        ro = "" if self.security.privileged else "-o ro "
        lines = [f"mount -t sysfs {ro}sysfs {r}/sys", f"mount -t tmpfs -o mode=755 cgroup {r}/sys/fs/cgroup"]
        # As runc does on cgroup v1: each controller shows the container's own group as its root.
        for cgroup in self.cgroups:
            controller = cgroup.parts[4] if len(cgroup.parts) > 4 and cgroup.parts[4] != LAB_NODES else "unified"
            target = f"{r}/sys/fs/cgroup/{controller}"
            lines += [f"mkdir -p {target}", f"mount --bind {shlex.quote(str(cgroup))} {target}"]
            if not self.security.privileged:
                lines.append(f"mount -o remount,bind,ro {target}")
        return lines

    def _dev_mounts(self, r: str) -> list[str]:
        if self.security.privileged:
            return [f"mount --rbind /dev {r}/dev"]
        lines = [f"mount -t tmpfs -o mode=755,nosuid tmpfs {r}/dev"]
        for device in DEFAULT_DEVICES:
            lines += [f"touch {r}/dev/{device}", f"mount --bind /dev/{device} {r}/dev/{device}"]
        lines += [
            f"mkdir -p {r}/dev/pts {r}/dev/shm",
            f"mount -t devpts -o newinstance,ptmxmode=0666 devpts {r}/dev/pts",
            f"ln -s pts/ptmx {r}/dev/ptmx",
            f"mount -t tmpfs -o mode=1777 shm {r}/dev/shm",
            f"ln -s /proc/self/fd {r}/dev/fd",
        ]
        return lines

    def _volume_mount(self, r: str, mount: Mount) -> list[str]:
        # A symlink on the way (/var/run -> /run) is followed within the container's root, as runc
        # does: followed by the shell, an absolute one would lead out of it, to the machine's /run.
        target = f"{r}{shlex.quote(in_root(mount.target, (self.layer, Path('/'))))}"
        source = shlex.quote(str(mount.source))
        parent = shlex.quote(os.path.dirname(target))
        make = f"mkdir -p {parent} && touch {target}" if mount.is_file else f"mkdir -p {target}"
        lines = [make, f"mount --rbind {source} {target}"]
        if mount.read_only:
            lines.append(f"mount -o remount,bind,ro {target}")
        if mount.propagation == "Bidirectional":
            lines.append(f"mount --make-rshared {target}")
        elif mount.propagation == "HostToContainer":
            lines.append(f"mount --make-rslave {target}")
        return lines

    def launch_script(self) -> str:
        """Join the node's root groups, make the cgroup namespace there (the node's own root, as on a
        machine of its own), then the container's groups and the other namespaces."""
        node = "".join(f"echo $$ > {shlex.quote(str(c))}/cgroup.procs\n" for c in self.node_cgroups)
        joins = "".join(f"echo $$ > {shlex.quote(str(c))}/cgroup.procs; " for c in self.cgroups)
        pid = "" if self.host_pid else "--pid --fork --kill-child=SIGKILL "
        ipc = "" if self.host_ipc else "--ipc "
        setup = shlex.quote(str(self.state / "setup.sh"))
        inner = (
            f"{joins}exec /usr/bin/nsenter --net={self.netns_path} -- "
            f"/usr/bin/unshare --mount --propagation private --uts {ipc}{pid}-- /bin/sh {setup}"
        )
        return (
            f"#!/bin/sh\n# {self.pod}/{self.name}: joins its cgroups and namespaces, then builds its root\n"
            f"{node}exec /usr/bin/unshare --cgroup -- /bin/sh -c {shlex.quote(inner)}\n"
        )

    # -- lifecycle -------------------------------------------------------------------------------

    def start(self) -> None:
        self.state.mkdir(parents=True, exist_ok=True)
        for directory in ("root", "layers"):
            (self.state / directory).mkdir(exist_ok=True)
        (self.state / "setup.sh").write_text(self.setup_script())
        (self.state / "launch.sh").write_text(self.launch_script())
        self._make_cgroups()
        self.log.parent.mkdir(parents=True, exist_ok=True)
        with self.log.open("ab") as out:
            out.write(f"\n--- {time.strftime('%H:%M:%S')} start {self.pod}/{self.name}\n".encode())
            out.flush()
            self.proc = subprocess.Popen(
                ["/bin/sh", str(self.state / "launch.sh")], stdout=out, stderr=subprocess.STDOUT, env=self.env
            )
        self.started_at = time.monotonic()

    def _make_cgroups(self) -> None:
        for cgroup in self.cgroups:
            make_cgroup(cgroup)
            if cgroup.parts[4:5] == ("memory",) and self.memory_limit:
                (cgroup / "memory.limit_in_bytes").write_text(str(self.memory_limit))
            if cgroup.parts[4:5] == ("cpu",) and self.cpu_limit_millis:
                (cgroup / "cpu.cfs_period_us").write_text("100000")
                (cgroup / "cpu.cfs_quota_us").write_text(str(self.cpu_limit_millis * 100))

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    @property
    def exit_code(self) -> int | None:
        return None if self.proc is None else self.proc.poll()

    def main_pid(self) -> int | None:
        """The container's first process: PID 1 of its namespace, or the launcher itself under hostPID."""
        if not self.running:
            return None
        assert self.proc is not None
        if self.host_pid:
            return self.proc.pid
        children = Path(f"/proc/{self.proc.pid}/task/{self.proc.pid}/children")
        try:
            pids = children.read_text().split()
        except OSError:
            return None
        return int(pids[0]) if pids else None

    def pids(self) -> list[int]:
        """Every process in the container's cgroup (the pids controller, or the first one there is)."""
        for cgroup in self.cgroups:
            procs = cgroup / "cgroup.procs"
            if procs.exists():
                return [int(p) for p in procs.read_text().split()]
        return []

    def exec_command(self, command: list[str], timeout: float, env: dict[str, str] | None = None) -> tuple[int, str]:
        """Run a command inside the running container (exec probes, lifecycle hooks)."""
        pid = self.main_pid()
        if pid is None:
            return 1, "container not running"
        joins = "".join(f"echo $$ > {shlex.quote(str(c))}/cgroup.procs; " for c in self.cgroups)
        enter = ["/usr/bin/nsenter", f"--target={pid}", "--mount", "--uts", "--net", "--cgroup", "--root", "--wd"]
        if not self.host_ipc:
            enter.append("--ipc")
        if not self.host_pid:
            enter.append("--pid")
        argv = [*enter, "--", *self.security.setpriv(), "--", *command]
        try:
            done = subprocess.run(
                ["/bin/sh", "-c", f"{joins}exec {shlex.join(argv)}"],
                capture_output=True,
                text=True,
                timeout=timeout,
                env=env or self.env,
            )
        except subprocess.TimeoutExpired:
            return 1, f"timed out after {timeout}s"
        return done.returncode, (done.stdout + done.stderr)[-2000:]

    def stop(self, grace: float) -> None:
        """SIGTERM to the first process, SIGKILL to every process of its cgroup after the grace period."""
        pid = self.main_pid()
        if pid is not None:
            _signal(pid, signal.SIGTERM)
            deadline = time.monotonic() + grace
            while self.running and time.monotonic() < deadline:
                time.sleep(0.2)
        self.kill()

    def kill(self) -> None:
        """What a runtime does when the container is gone: kill whatever is left in its cgroup."""
        for _ in range(50):
            pids = self.pids()
            if self.running:
                assert self.proc is not None
                pids.append(self.proc.pid)
            if not pids:
                break
            for pid in pids:
                _signal(pid, signal.SIGKILL)
            time.sleep(0.1)
        if self.proc is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(timeout=10)


def in_root(path: str, lowers: tuple[Path, ...]) -> str:
    """`path` with its symlinks followed inside a root made of `lowers` (the uppermost entry wins)."""
    parts = [p for p in path.split("/") if p]
    resolved: list[str] = []
    hops = 0
    while parts:
        part = parts.pop(0)
        if part == "..":
            if resolved:
                resolved.pop()
            continue
        if part == ".":
            continue
        relative = "/".join([*resolved, part])
        link = None
        for lower in lowers:
            entry = lower / relative
            if entry.is_symlink():
                link = os.readlink(entry)
                break
            if entry.exists():
                break
        if link is None:
            resolved.append(part)
            continue
        hops += 1
        if hops > 40:
            raise OSError(f"too many symbolic links in {path}")
        if link.startswith("/"):
            resolved = []
        parts = [p for p in link.split("/") if p] + parts
    return "/" + "/".join(resolved)


def _signal(pid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, sig)
