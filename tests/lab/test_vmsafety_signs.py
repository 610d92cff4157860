"""What the libvirt-restart proof reads of a guest from the host (tests/lab/cloud/vmsafety.py)."""

from __future__ import annotations

from tests.lab.cloud.vmsafety import PANIC

# The start of what this machine's prod lab saw on a guest's console after its live migrations under TCG
# (2026-11-29): an oops in the guest kernel's timer wheel, then the panic that stops it.
OOPS = (
    "guest: alive 1298\r\n"
    "[ 1305.784464] general protection fault, probably for non-canonical address 0xdead00000000012a: 0000 [#1]\r\n"
    "[ 1305.786910] RIP: 0010:__run_timers+0x1e8/0x2c0\r\n"
    "[ 1305.796271] Kernel panic - not syncing: Fatal exception in interrupt\r\n"
)


def test_a_guest_kernels_death_is_read_from_its_console_and_a_counting_guest_shows_none() -> None:
    found = PANIC.search(OOPS.replace("\r", ""))
    assert found is not None and "general protection fault" in found.group(0)
    assert PANIC.search("guest: booted\nguest: alive 10\nguest: alive 20\n") is None
