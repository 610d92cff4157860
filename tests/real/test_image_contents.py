"""Every container of every stack finds in its Kolla image, as kolla builds it on Ubuntu noble for
each release the program deploys (2026.1: kolla 22.2.0; 2025.2: kolla 21.3.0), each program it
runs, file it reads and Python module its scripts import.

The lab runs the plan's containers on this machine's Debian with one OpenStack venv, where a
program the real image lacks still runs; here each is looked up in the image itself
(tools/imagecheck). The first run fetches kolla, noble's indexes and PyPI metadata (a few
minutes, ~250 MB, and a few more for each release); later runs read the cache (seconds).
"""

from __future__ import annotations

import pytest

from components.settings.releases import RELEASES
from tests.conftest import STACKS, release_plan
from tools.imagecheck.contents import image_software, limits
from tools.imagecheck.report import CANNOT_SEE, StackReport, check_plans
from tools.release_pins import RELEASES as VENV_PINS


@pytest.fixture(scope="module")
def reports() -> list[StackReport]:
    return check_plans([release_plan(stack, release) for release in RELEASES for stack in STACKS])


def test_every_container_finds_what_it_needs_in_its_image(
    reports: list[StackReport], capsys: pytest.CaptureFixture[str]
) -> None:
    with capsys.disabled():
        print()
        for report in reports:
            print(f"image contents: {report.summary()}")
    assert [str(miss) for report in reports for miss in report.misses] == []


def test_only_the_operators_containers_are_left_out(reports: list[StackReport]) -> None:
    assert {(r.stack, r.release) for r in reports} == {(s, r) for s in STACKS for r in RELEASES}
    for report in reports:
        assert report.containers >= 60 and report.commands >= 100 and report.files >= 100 and report.modules >= 200
        images = {s.image for s in report.skipped}
        assert images <= {"rabbitmq:4.2.8-management", "(the operator's default)", "(its own images)"}


@pytest.mark.parametrize("release", RELEASES)
def test_the_images_hold_what_kolla_installs_and_not_more(release: str) -> None:
    software = image_software(["nova-compute", "nova-libvirt", "kolla-toolbox"], release)
    compute, libvirt, toolbox = software["nova-compute"], software["nova-libvirt"], software["kolla-toolbox"]
    assert compute.executables["nova-compute"] == "/var/lib/kolla/venv/bin/nova-compute"
    assert compute.distributions["nova"] == VENV_PINS[release].pinned["nova"]
    assert "virsh" not in compute.executables  # libvirt-clients is nova-libvirt's, not nova-compute's
    assert libvirt.executables["virsh"] == "/usr/bin/virsh" and libvirt.distributions == {}
    assert "pymysql" in toolbox.distributions and "nova" not in toolbox.distributions
    assert toolbox.executables["python3"] == "/opt/ansible/bin/python3"


@pytest.mark.parametrize("release", RELEASES)
def test_what_the_check_cannot_see_is_said(release: str) -> None:
    said = [*CANNOT_SEE, *limits(["nova-compute"], release)]
    codename = RELEASES[release].codename.lower()
    assert any("Ubuntu Cloud Archive" in line and f"noble-updates/{codename}" in line for line in said)
    assert any(f"upper-constraints of stable/{release}" in line for line in said)
