"""The cloud test's guest, booted for real under QEMU, with QEMU's user network standing in for Neutron.

QEMU's user network gives the DHCP lease and a gateway that answers ping; a server of this test
on loopback plays the metadata service at 169.254.169.254.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from threading import Thread

import pytest

from tests.lab.cloud import guest as guest_module
from tests.lab.cloud.guest import (
    ALIVE,
    BUSYBOX,
    DISK_MODULES,
    DISK_READ,
    DISK_WROTE,
    GATEWAY,
    INSTANCE_ID,
    LEASE,
    Guest,
    build_guest,
    parse_console,
)
from tests.lab.realenv.servers import HOST, free_port
from tools.release_pins import cache_base

GUEST_CACHE = cache_base() / "guest"

SERVED_INSTANCE_ID = "i-0000002a"
SERVED_UUID = "6f1c3a52-0d4e-4b8a-9c57-2f3e8d1a4b60"
# Boot to the first alive line takes ~6 s under TCG here; the guest asks the metadata
# service for up to 60 s, so a failure there shows as a timeout with the console attached.
BOOT_SECONDS = 45
# What Nova puts on the kernel command line for AMI images.
NOVA_KERNEL_ARGS = "root=/dev/vda console=tty0 console=ttyS0"


class MetadataServer(ThreadingHTTPServer):
    """Serves the two metadata documents the guest reads, and remembers what was asked."""

    def __init__(self) -> None:
        super().__init__((HOST, 0), MetadataHandler)
        self.requested: list[str] = []
        self.documents = {
            "/latest/meta-data/instance-id": SERVED_INSTANCE_ID.encode(),
            "/openstack/latest/meta_data.json": json.dumps({"uuid": SERVED_UUID, "name": "guest"}).encode(),
        }


class MetadataHandler(BaseHTTPRequestHandler):
    server: MetadataServer

    def do_GET(self) -> None:
        self.server.requested.append(self.path)
        body = self.server.documents.get(self.path)
        if body is None:
            self.send_error(404)
            return
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture(scope="module")
def guest() -> Guest:
    return build_guest(GUEST_CACHE)


@pytest.fixture
def metadata_server() -> Iterator[MetadataServer]:
    server = MetadataServer()
    Thread(target=server.serve_forever, daemon=True).start()
    yield server
    server.shutdown()
    server.server_close()


def qemu_command(guest: Guest, metadata_port: int, http_port: int) -> list[str]:
    qemu = shutil.which("qemu-system-x86_64")
    if qemu is None:
        pytest.fail("qemu-system-x86_64 not found: install the Debian package 'qemu-system-x86'")
    # guestfwd only forwards addresses inside the user network, hence a link-local one. Its
    # cmd: form starts a relay per connection; the tcp: chardev form carries only the first.
    netdev = ",".join(
        [
            "user",
            "id=n0",
            "net=169.254.169.0/24",
            f"guestfwd=tcp:169.254.169.254:80-cmd:{BUSYBOX} nc {HOST} {metadata_port}",
            f"hostfwd=tcp:{HOST}:{http_port}-:80",
        ]
    )
    return [
        qemu,
        "-machine",
        "accel=tcg",  # KVM hangs on this machine
        "-m",
        "256",
        "-nographic",
        "-no-reboot",
        "-kernel",
        str(guest.kernel),
        "-initrd",
        str(guest.initramfs),
        "-append",
        NOVA_KERNEL_ARGS,
        # As Nova attaches the machine image; snapshot=on keeps the cached disk unchanged.
        "-drive",
        f"file={guest.disk},format=raw,if=virtio,snapshot=on",
        "-netdev",
        netdev,
        "-device",
        "virtio-net-pci,netdev=n0",
    ]


def test_guest_reports_lease_metadata_gateway_and_serves_http(
    guest: Guest, metadata_server: MetadataServer, tmp_path: Path
) -> None:
    http_port = free_port()
    console = tmp_path / "console.log"
    command = qemu_command(guest, metadata_server.server_address[1], http_port)
    with console.open("wb") as out:
        qemu = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + BOOT_SECONDS
        while time.monotonic() < deadline and qemu.poll() is None:
            facts = parse_console(console.read_text(errors="replace"))
            if facts.alive:  # the last step: everything else has been reported by then
                break
            time.sleep(0.5)
        text = console.read_text(errors="replace")
        facts = parse_console(text)
        tail = f"console (QEMU exit {qemu.poll()}):\n{text[-4000:]}"

        assert facts.lease_ip is not None and facts.lease_ip.startswith("169.254.169."), tail
        assert facts.lease_server == "169.254.169.2", tail
        assert facts.instance_id == SERVED_INSTANCE_ID, tail
        assert facts.uuid == SERVED_UUID, tail
        assert facts.gateway == "169.254.169.2" and facts.gateway_reachable, tail
        assert facts.alive >= 1, tail
        assert "/latest/meta-data/instance-id" in metadata_server.requested
        with urllib.request.urlopen(f"http://{HOST}:{http_port}/", timeout=10) as page:
            assert page.read().decode().strip() == SERVED_INSTANCE_ID
    finally:
        qemu.kill()
        qemu.wait()


def test_parse_console_reads_markers_among_kernel_noise() -> None:
    text = (
        "[    2.475910] Run /init as init process\r\n"
        f"{LEASE}10.0.0.5 from 10.0.0.2\r\n"
        f"[    3.1] virtio_net virtio0 eth0: renamed{INSTANCE_ID}i-00000001\r\n"
        f"{GATEWAY}10.0.0.1 unreachable\r\n"
        f"{ALIVE}7\r\n{ALIVE}17\r\n"
    )
    facts = parse_console(text)
    assert (facts.lease_ip, facts.lease_server) == ("10.0.0.5", "10.0.0.2")
    assert facts.instance_id == "i-00000001"
    assert (facts.gateway, facts.gateway_reachable) == ("10.0.0.1", False)
    assert facts.alive == 2
    assert not facts.metadata_unreachable


def test_parse_console_of_a_silent_guest() -> None:
    facts = parse_console("SeaBIOS (version 1.16.2-debian-1.16.2-1)\r\n")
    assert facts.lease_ip is None and facts.instance_id is None and facts.gateway_reachable is None
    assert facts.alive == 0 and not facts.booted


def test_parse_console_reads_what_the_guest_wrote_to_and_read_from_an_attached_disk() -> None:
    text = f"{ALIVE}7\r\n{DISK_WROTE}guest-1b2c-30\r\n{ALIVE}17\r\n{DISK_READ}guest-1b2c-30\r\n"
    facts = parse_console(text)
    assert facts.disk_wrote == ("guest-1b2c-30",) and facts.disk_read == ("guest-1b2c-30",)
    assert parse_console(f"{ALIVE}7\r\n").disk_read == ()


def test_the_guest_can_see_a_hot_plugged_virtio_disk() -> None:
    # Without virtio_blk the guest has no /dev/vdb to write to when a volume is attached.
    assert "virtio_blk" in DISK_MODULES
    assert "[ ! -b /dev/vdb ]" in guest_module._INIT_SH and "conv=sync,fsync" in guest_module._INIT_SH
    assert f"DISK_READ='{DISK_READ}'" in guest_module._guest_sh(["virtio_blk"])
