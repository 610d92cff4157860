"""A tiny guest to boot as a VM in the local cloud: Debian's kernel and a busybox initramfs on a boot disk.

The guest checks the cloud from the inside (DHCP lease, metadata service, gateway, the pings
its user data asks for) and reports each finding as one marked line on its serial console,
which Nova keeps as the console log; it then serves its instance id over HTTP on port 80 and
stays up, counting. Its image is a disk as users upload them: an MBR partition table, a FAT
partition with the kernel and initramfs, booted by SYSLINUX (no kernel_id/ramdisk_id images:
Nova's block live migration fetches those again and its format inspector refuses a kernel,
whose boot sector reads as a broken partition table). Everything comes from Debian packages,
cached per kernel version.
"""

from __future__ import annotations

import fcntl
import gzip
import hashlib
import json
import lzma
import os
import re
import shlex
import shutil
import subprocess
import tempfile
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType

# Console markers: the guest prints these prefixes and the tests parse the console log with
# the same strings (the init script is generated from them).
BOOTED = "guest: booted"
LEASE = "guest: lease "  # <ip> from <dhcp server>
NO_LEASE = "guest: no lease"
INSTANCE_ID = "guest: instance-id "  # <id>, from the EC2-style metadata
UUID = "guest: uuid "  # <uuid>, from the OpenStack metadata
NO_METADATA = "guest: metadata unreachable"
GATEWAY = "guest: gateway "  # <ip>|none reachable|unreachable
HTTP = "guest: http port "  # <port>, serving the instance id
PING = "guest: ping "  # <ip> reachable|unreachable, for each `ping <ip>` line of the user data
ALIVE = "guest: alive "  # <seconds since boot>, every ALIVE_INTERVAL seconds
DISK_WROTE = "guest: disk wrote "  # <marker>, written to a hot-plugged /dev/vdb that held nothing
DISK_READ = "guest: disk read "  # <marker>, found on a hot-plugged /dev/vdb

MARKERS: Mapping[str, str] = MappingProxyType(
    {
        BOOTED: "init started and the NIC modules were loaded",
        LEASE: "<ip> from <dhcp server>",
        NO_LEASE: "DHCP gave no lease",
        INSTANCE_ID: "<instance id> from /latest/meta-data/instance-id",
        UUID: "<uuid> from /openstack/latest/meta_data.json",
        NO_METADATA: "no instance id from the metadata service within METADATA_PATIENCE_SECONDS",
        GATEWAY: "<ip>|none reachable|unreachable (one ping)",
        HTTP: "<port> where busybox httpd serves the instance id",
        PING: "<ip> reachable|unreachable, for each line `ping <ip>` of the server's user data (up to 3 pings)",
        ALIVE: "<seconds since boot>, repeated every ALIVE_INTERVAL_SECONDS",
        DISK_WROTE: "<marker> written at the start of a disk attached as /dev/vdb whose start was empty",
        DISK_READ: "<marker> read at the start of a disk attached as /dev/vdb (each attachment once)",
    }
)
HTTP_PORT = 80
METADATA_PATIENCE_SECONDS = 60
ALIVE_INTERVAL_SECONDS = 10

KERNEL_META_PACKAGE = "linux-image-amd64"
# The virtio PCI transport and the virtio NIC driver; their dependencies are found with modinfo.
NIC_MODULES = ("virtio_pci", "virtio_net")
# The virtio disk driver: a volume attached to the running server appears as /dev/vdb (devtmpfs).
DISK_MODULES = ("virtio_blk",)
# The boot disk: its size, and where its one partition starts (sectors of 512 bytes).
DISK_MIB = 24
PARTITION_START = 2048
SYSLINUX_MBR = Path("/usr/lib/syslinux/mbr/mbr.bin")
SYSLINUX_CFG = """DEFAULT guest
PROMPT 0
TIMEOUT 0
LABEL guest
  KERNEL vmlinuz
  INITRD initramfs.gz
  APPEND console=tty0 console=ttyS0
"""
BUSYBOX = Path("/bin/busybox")
APT_LISTS = Path("/var/lib/apt/lists")
APT_INSTALL = ("env", "DEBIAN_FRONTEND=noninteractive", "apt-get", "install", "-y", "-q", "--no-install-recommends")


class GuestBuildError(RuntimeError):
    pass


@dataclass(frozen=True)
class Guest:
    kernel: Path
    initramfs: Path
    disk: Path
    markers: Mapping[str, str] = field(default_factory=lambda: MARKERS)


@dataclass(frozen=True)
class ConsoleFacts:
    """What the guest reported on its console so far (the latest report of each kind)."""

    booted: bool = False
    lease_ip: str | None = None
    lease_server: str | None = None
    lease_failed: bool = False
    instance_id: str | None = None
    uuid: str | None = None
    metadata_unreachable: bool = False
    gateway: str | None = None
    gateway_reachable: bool | None = None
    http_port: int | None = None
    alive: int = 0  # how many alive lines
    pings: dict[str, bool] = field(default_factory=dict)  # what the user data asked to ping, and the answer
    alive_values: tuple[int, ...] = ()  # the seconds since boot each alive line gave
    disk_wrote: tuple[str, ...] = ()  # markers written to an attached disk, in order
    disk_read: tuple[str, ...] = ()  # markers read from an attached disk, in order


def _last(pattern: str, text: str) -> re.Match[str] | None:
    matches = list(re.finditer(pattern, text))
    return matches[-1] if matches else None


def parse_console(text: str) -> ConsoleFacts:
    # Not anchored at line starts: the serial log can carry kernel messages or \r before a marker.
    lease = _last(re.escape(LEASE) + r"(\S+) from (\S+)", text)
    instance_id = _last(re.escape(INSTANCE_ID) + r"(\S+)", text)
    uuid = _last(re.escape(UUID) + r"(\S+)", text)
    gateway = _last(re.escape(GATEWAY) + r"(\S+) (reachable|unreachable)\b", text)
    http = _last(re.escape(HTTP) + r"(\d+)", text)
    pings = {m[1]: m[2] == "reachable" for m in re.finditer(re.escape(PING) + r"(\S+) (reachable|unreachable)\b", text)}
    return ConsoleFacts(
        booted=BOOTED in text,
        lease_ip=lease[1] if lease else None,
        lease_server=lease[2] if lease else None,
        lease_failed=NO_LEASE in text,
        instance_id=instance_id[1] if instance_id else None,
        uuid=uuid[1] if uuid else None,
        metadata_unreachable=NO_METADATA in text,
        gateway=gateway[1] if gateway and gateway[1] != "none" else None,
        gateway_reachable=gateway[2] == "reachable" if gateway else None,
        http_port=int(http[1]) if http else None,
        alive=len(re.findall(re.escape(ALIVE) + r"\d+", text)),
        pings=pings,
        alive_values=tuple(int(v) for v in re.findall(re.escape(ALIVE) + r"(\d+)", text)),
        disk_wrote=tuple(re.findall(re.escape(DISK_WROTE) + r"([A-Za-z0-9-]+)", text)),
        disk_read=tuple(re.findall(re.escape(DISK_READ) + r"([A-Za-z0-9-]+)", text)),
    )


# Sourced by /init and the udhcpc script: the markers, and `say`, which puts a line on the
# serial console. /dev/console is the last console= of the kernel command line (Nova's ends
# with console=ttyS0); should it be another, ttyS0 gets the line too, since Nova logs ttyS0.
_COMMON_SH = r"""
serial=/dev/ttyS0
case " $(cat /sys/class/tty/console/active 2>/dev/null)" in *" ttyS0") serial= ;; esac
say() {
    echo "$*"
    if [ -n "$serial" ] && [ -c "$serial" ]; then echo "$*" >"$serial"; fi
}
uptime_seconds() { read -r up _ </proc/uptime; echo "${up%%.*}"; }
"""

_INIT_SH = r"""#!/bin/busybox sh
/bin/busybox --install -s /bin
export PATH=/bin
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
exec </dev/console >/dev/console 2>&1
# Kernel messages would otherwise land in the middle of marker lines.
echo 1 >/proc/sys/kernel/printk
. /etc/guest.sh

for module in $MODULES; do
    # Checksums computed by the guest itself, not left to the host: the lab's Open vSwitch (3.1,
    # userspace datapath, TSO off) would otherwise drop the guest's TCP (tests/lab/cloud/run.py).
    options=; [ "$module" = virtio_net ] && options=csum=0
    insmod "/modules/$module.ko" $options || say "guest: insmod $module failed"
done
say "$BOOTED"

ip link set lo up
ip link set eth0 up
# Neutron may hand out an overlay network's MTU and a host route to the metadata service.
udhcpc -i eth0 -n -q -t 30 -T 3 -O mtu -O staticroutes -s /etc/udhcpc.sh || say "$NO_LEASE"

# `timeout`, not wget -T: Debian's static busybox 1.35 wget segfaults when given -T.
metadata() { timeout 5 wget -q -O - "http://169.254.169.254/$1" 2>/dev/null; }
# The metadata proxy may start answering only some time after the VM has booted.
deadline=$(( $(uptime_seconds) + METADATA_PATIENCE ))
until instance_id=$(metadata latest/meta-data/instance-id) && [ -n "$instance_id" ]; do
    instance_id=
    [ "$(uptime_seconds)" -ge "$deadline" ] && break
    sleep 2
done
if [ -n "$instance_id" ]; then
    say "$INSTANCE_ID$instance_id"
    uuid=$(metadata openstack/latest/meta_data.json | sed -n 's/.*"uuid": *"\([^"]*\)".*/\1/p' | head -n 1)
    [ -n "$uuid" ] && say "$UUID$uuid"
else
    say "$NO_METADATA"
fi

gateway=$(ip route | sed -n 's/^default via \([0-9.]*\).*/\1/p' | head -n 1)
if [ -n "$gateway" ] && ping -c 1 -W 5 "$gateway" >/dev/null 2>&1; then
    say "$GATEWAY$gateway reachable"
else
    say "$GATEWAY${gateway:-none} unreachable"
fi

# The user data may ask for more: `ping <ip>` lines (a peer VM, the world outside the cloud).
if [ -n "$instance_id" ]; then
    metadata openstack/latest/user_data | while read -r verb target _; do
        [ "$verb" = ping ] || continue
        if ping -c 3 -W 5 "$target" >/dev/null 2>&1; then
            say "$PING$target reachable"
        else
            say "$PING$target unreachable"
        fi
    done
fi

mkdir -p /www
echo "${instance_id:-unknown}" >/www/index.html
httpd -p "$HTTP_PORT" -h /www && say "$HTTP$HTTP_PORT"

# A volume attached while the guest runs appears as /dev/vdb: once per attachment, say what its
# start holds, and write a marker there when it holds nothing, so that after a detach and a
# re-attach the guest reads back what it wrote: a new device each attachment, so no cache of the
# old one answers, and fsync puts the write through QEMU into the volume.
disk_seen=
check_disk() {
    if [ ! -b /dev/vdb ]; then
        disk_seen=
        return
    fi
    [ -n "$disk_seen" ] && return
    disk_seen=1
    found=$(dd if=/dev/vdb bs=512 count=1 2>/dev/null | tr -cd 'A-Za-z0-9-')
    if [ -n "$found" ]; then
        say "$DISK_READ$found"
        return
    fi
    marker="guest-${uuid:-nouuid}-$(uptime_seconds)"
    if printf '%s\n' "$marker" | dd of=/dev/vdb bs=512 count=1 conv=sync,fsync 2>/dev/null; then
        say "$DISK_WROTE$marker"
    else
        say "$DISK_WROTE""failed"
    fi
}

# PID 1 must never exit (the kernel would panic), and the test cloud wants a VM that stays up.
while :; do
    say "$ALIVE$(uptime_seconds)"
    ticks=0
    while [ "$ticks" -lt "$ALIVE_INTERVAL" ]; do
        check_disk
        sleep 1
        ticks=$((ticks + 1))
    done
done
"""

_UDHCPC_SH = r"""#!/bin/sh
# udhcpc calls this with the event in $1 and the offer in the environment.
[ "$1" = bound ] || exit 0
. /etc/guest.sh
[ -n "$mtu" ] && ip link set dev "$interface" mtu "$mtu"
ip addr add "$ip/${mask:-24}" dev "$interface"
if [ -n "$staticroutes" ]; then
    # RFC 3442: when classless routes are given, the router option is to be ignored.
    set -- $staticroutes
    while [ $# -ge 2 ]; do
        if [ "$2" = 0.0.0.0 ]; then
            ip route add "$1" dev "$interface"
        else
            ip route add "$1" via "$2" dev "$interface"
        fi
        shift 2
    done
elif [ -n "$router" ]; then
    ip route add default via "${router%% *}" dev "$interface"
fi
say "$LEASE$ip from $serverid"
"""


def _guest_sh(modules: list[str]) -> str:
    values = {
        "BOOTED": BOOTED,
        "LEASE": LEASE,
        "NO_LEASE": NO_LEASE,
        "INSTANCE_ID": INSTANCE_ID,
        "UUID": UUID,
        "NO_METADATA": NO_METADATA,
        "GATEWAY": GATEWAY,
        "HTTP": HTTP,
        "PING": PING,
        "ALIVE": ALIVE,
        "DISK_WROTE": DISK_WROTE,
        "DISK_READ": DISK_READ,
        "HTTP_PORT": str(HTTP_PORT),
        "METADATA_PATIENCE": str(METADATA_PATIENCE_SECONDS),
        "ALIVE_INTERVAL": str(ALIVE_INTERVAL_SECONDS),
        "MODULES": " ".join(modules),  # in load order
    }
    header = "# Generated by tests/lab/cloud/guest.py.\n"
    return header + "".join(f"{name}={shlex.quote(value)}\n" for name, value in values.items()) + _COMMON_SH


# The tools live in sbin too (sfdisk, mkfs.fat), which a user's PATH may leave out.
TOOLS_PATH = os.pathsep.join(dict.fromkeys([*os.environ.get("PATH", "").split(os.pathsep), "/usr/sbin", "/sbin"]))


def _run(args: list[str | Path], cwd: Path | None = None, stdin: bytes | None = None) -> bytes:
    done = subprocess.run(args, cwd=cwd, input=stdin, capture_output=True, env={**os.environ, "PATH": TOOLS_PATH})
    if done.returncode != 0:
        command = " ".join(map(str, args))
        raise GuestBuildError(f"`{command}` failed ({done.returncode}): {done.stderr.decode(errors='replace')[-2000:]}")
    return done.stdout


def _apt(args: list[str | Path], cwd: Path | None = None) -> bytes:
    """An apt command, retried once after `apt-get update` (the package lists may be missing or stale)."""
    try:
        return _run(args, cwd=cwd)
    except GuestBuildError:
        _run(["apt-get", "update", "-q"])
        return _run(args, cwd=cwd)


def _apt_install(package: str, why: str) -> None:
    try:
        _apt([*APT_INSTALL, package])
    except GuestBuildError as error:
        raise GuestBuildError(f"{why}: install the Debian package {package!r} ({error})") from error


def _require_command(command: str, package: str) -> None:
    if shutil.which(command, path=TOOLS_PATH) is None:
        _apt_install(package, f"{command} is missing")


def _static_busybox() -> Path:
    _require_command("file", "file")

    def is_static() -> bool:
        described = _run(["file", "-L", BUSYBOX]) if BUSYBOX.exists() else b""
        return b"statically linked" in described or b"static-pie linked" in described

    if not is_static():
        # The initramfs has no libc, so busybox must be the static build.
        _apt_install("busybox-static", f"{BUSYBOX} is missing or not statically linked")
        if not is_static():
            raise GuestBuildError(f"{BUSYBOX} is still not static: install the Debian package 'busybox-static'")
    return BUSYBOX


@contextmanager
def _locked(lock_file: Path) -> Iterator[None]:
    # Concurrent test sessions share the cache; one builds while the others wait, then reuse.
    with lock_file.open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def _apt_lists_stamp() -> str:
    files = sorted(p for p in APT_LISTS.glob("*") if p.is_file() and p.name != "lock")
    return hashlib.sha256(repr([(p.name, p.stat().st_size, p.stat().st_mtime_ns) for p in files]).encode()).hexdigest()


def _kernel_package(cache: Path) -> tuple[str, str]:
    """(package, version) of the kernel linux-image-amd64 depends on, e.g. linux-image-6.1.0-56-amd64, 6.1.192-2."""
    # apt-cache takes most of a second here (no binary cache): ask again only when the lists changed.
    memo = cache / "kernel-package.json"
    stamp = _apt_lists_stamp()
    try:
        known = json.loads(memo.read_text())
        if known["lists"] == stamp:
            return known["package"], known["version"]
    except (OSError, ValueError, KeyError):
        pass
    # `apt-cache depends` names the ABI package; `show` also gives the exact version it pins.
    shown = _apt(["apt-cache", "show", "--no-all-versions", KERNEL_META_PACKAGE]).decode()
    found = re.search(r"^Depends:.*?\b(linux-image-\S+-amd64) \(= ([^)\s]+)\)", shown, re.MULTILINE)
    if found is None:
        raise GuestBuildError(f"no kernel package in the dependencies of {KERNEL_META_PACKAGE}:\n{shown}")
    package, version = found[1], found[2]
    memo.write_text(json.dumps({"lists": stamp, "package": package, "version": version}))
    return package, version


def _module_files(modules_root: Path) -> dict[str, Path]:
    files = {}
    for path in modules_root.rglob("*.ko*"):
        name = path.name.split(".ko")[0].replace("-", "_")
        files[name] = path
    return files


def _load_order(roots: tuple[str, ...], files: Mapping[str, Path]) -> list[str]:
    """The modules behind `roots`, each after the modules it depends on (as modinfo reports)."""
    order: list[str] = []

    def visit(name: str, chain: tuple[str, ...]) -> None:
        if name in order:
            return
        if name in chain or name not in files:
            raise GuestBuildError(f"module {name} is missing or in a dependency cycle: {' -> '.join(chain)}")
        depends = _run(["modinfo", "-F", "depends", files[name]]).decode().strip()
        for dependency in filter(None, depends.split(",")):
            visit(dependency.replace("-", "_"), (*chain, name))
        order.append(name)

    for root in roots:
        visit(root, ())
    return order


def _extract_kernel(package: str, version: str, into: Path, scratch: Path) -> None:
    _apt(["apt-get", "download", f"{package}={version}"], cwd=scratch)
    (deb,) = scratch.glob("*.deb")
    root = scratch / "root"
    _run(["dpkg-deb", "-x", deb, root])
    (vmlinuz,) = root.glob("boot/vmlinuz-*")
    (modules_root,) = [*root.glob("lib/modules/*"), *root.glob("usr/lib/modules/*")]
    files = _module_files(modules_root)
    order = _load_order(NIC_MODULES + DISK_MODULES, files)
    (into / "modules").mkdir(parents=True)
    shutil.copyfile(vmlinuz, into / "vmlinuz")
    for name in order:
        source = files[name]
        # Newer Debian kernels compress their modules; busybox insmod wants them plain.
        data = lzma.decompress(source.read_bytes()) if source.name.endswith(".xz") else source.read_bytes()
        (into / "modules" / f"{name}.ko").write_bytes(data)
    (into / "modules.order").write_text("".join(f"{name}\n" for name in order))


def _prune_others(cache: Path, prefix: str, keep: Path) -> None:
    # Each new kernel version or change to the init scripts leaves a build that nothing uses again.
    for other in cache.glob(f"{prefix}*"):
        if other != keep:
            shutil.rmtree(other, ignore_errors=True)


def _kernel(cache: Path) -> Path:
    """The directory with vmlinuz, modules/ and modules.order of the current Debian kernel, built once."""
    package, version = _kernel_package(cache)
    # Named by the modules it holds too: a kernel extracted for fewer modules is extracted again.
    modules = hashlib.sha256(" ".join(NIC_MODULES + DISK_MODULES).encode()).hexdigest()[:8]
    kernel = cache / f"kernel-{package}_{version}-{modules}"
    if not kernel.is_dir():
        _require_command("modinfo", "kmod")
        with tempfile.TemporaryDirectory(dir=cache, prefix="building-") as scratch:
            staged = Path(scratch) / "kernel"
            _extract_kernel(package, version, staged, Path(scratch))
            staged.rename(kernel)  # complete or absent, never half-built
        _prune_others(cache, "kernel-", keep=kernel)
    return kernel


def _pack_initramfs(busybox: Path, guest_sh: str, kernel: Path, order: list[str]) -> bytes:
    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch)
        for directory in ("bin", "etc", "modules", "proc", "sys", "dev", "tmp"):
            (root / directory).mkdir()
        shutil.copyfile(busybox, root / "bin" / "busybox")
        for name in order:
            shutil.copyfile(kernel / "modules" / f"{name}.ko", root / "modules" / f"{name}.ko")
        (root / "etc" / "guest.sh").write_text(guest_sh)
        (root / "etc" / "udhcpc.sh").write_text(_UDHCPC_SH)
        (root / "init").write_text(_INIT_SH)
        for executable in (root / "bin" / "busybox", root / "etc" / "udhcpc.sh", root / "init"):
            executable.chmod(0o755)
        names = sorted(str(path.relative_to(root)) for path in root.rglob("*"))
        archive = _run(
            ["cpio", "--create", "--format=newc", "--owner=0:0", "--quiet"],
            cwd=root,
            stdin="\n".join(names).encode() + b"\n",
        )
    return gzip.compress(archive, mtime=0)


def _boot_disk(kernel: Path, initramfs: Path, into: Path, scratch: Path) -> None:
    """A raw disk SeaBIOS boots: SYSLINUX's MBR, one bootable FAT partition with SYSLINUX, kernel, initramfs."""
    for command, package in (("sfdisk", "fdisk"), ("mkfs.fat", "dosfstools"), ("mcopy", "mtools"),
                             ("syslinux", "syslinux")):  # fmt: skip
        _require_command(command, package)
    if not SYSLINUX_MBR.exists():
        _apt_install("syslinux-common", f"{SYSLINUX_MBR} is missing")
    sectors = DISK_MIB * 2048 - PARTITION_START
    partition = scratch / "partition.img"
    _run(["mkfs.fat", "-C", str(partition), str(sectors // 2)])
    config = scratch / "syslinux.cfg"
    config.write_text(SYSLINUX_CFG)
    staged = scratch / "files"
    staged.mkdir()
    for source, name in ((kernel, "vmlinuz"), (initramfs, "initramfs.gz"), (config, "syslinux.cfg")):
        shutil.copyfile(source, staged / name)
    _run(["mcopy", "-i", str(partition), *(str(f) for f in sorted(staged.iterdir())), "::/"])
    _run(["syslinux", "--install", str(partition)])
    with into.open("wb") as disk:
        disk.truncate(DISK_MIB * 1024 * 1024)
    _run(["sfdisk", "--quiet", str(into)], stdin=f"label: dos\nstart={PARTITION_START}, type=c, bootable\n".encode())
    with into.open("r+b") as disk:
        disk.seek(PARTITION_START * 512)
        disk.write(partition.read_bytes())
        disk.seek(0)
        disk.write(SYSLINUX_MBR.read_bytes()[:440])  # the boot code; the partition table stays


def build_guest(cache: Path) -> Guest:
    """The guest's kernel, initramfs and disk under `cache`; built on the first call, reused after."""
    cache.mkdir(parents=True, exist_ok=True)
    with _locked(cache / ".lock"):
        kernel = _kernel(cache)
        order = (kernel / "modules.order").read_text().split()
        busybox = _static_busybox()
        guest_sh = _guest_sh(order)
        inputs = [kernel.name, hashlib.sha256(busybox.read_bytes()).hexdigest(), guest_sh, _INIT_SH, _UDHCPC_SH,
                  SYSLINUX_CFG, DISK_MIB]  # fmt: skip
        guest = cache / f"guest-{hashlib.sha256(repr(inputs).encode()).hexdigest()[:12]}"
        if not guest.is_dir():
            _require_command("cpio", "cpio")
            with tempfile.TemporaryDirectory(dir=cache, prefix="building-") as scratch:
                staged = Path(scratch) / "guest"
                staged.mkdir()
                (staged / "initramfs.gz").write_bytes(_pack_initramfs(busybox, guest_sh, kernel, order))
                _boot_disk(kernel / "vmlinuz", staged / "initramfs.gz", staged / "disk.raw", Path(scratch))
                staged.rename(guest)
            _prune_others(cache, "guest-", keep=guest)
    return Guest(kernel=kernel / "vmlinuz", initramfs=guest / "initramfs.gz", disk=guest / "disk.raw")
