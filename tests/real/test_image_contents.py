"""Every container of every stack finds in its Kolla image, as kolla builds it for 2026.1 on Ubuntu
noble, each program it runs, file it reads and Python module its scripts import.

The lab runs the plan's containers on this machine's Debian with one OpenStack venv, where a
program the real image lacks still runs; here each is looked up in the image itself
(tools/imagecheck). The first run fetches kolla, noble's indexes and PyPI metadata (a few
minutes, ~250 MB); later runs read the cache (seconds).
"""

from __future__ import annotations

import pytest

from tests.conftest import STACKS, plan_of
from tools.imagecheck.contents import image_software, limits
from tools.imagecheck.report import CANNOT_SEE, StackReport, check_plans
from tools.realenv.openstack_venv import PINNED


@pytest.fixture(scope="module")
def reports() -> list[StackReport]:
    return check_plans([plan_of(stack) for stack in STACKS])


def test_every_container_finds_what_it_needs_in_its_image(
    reports: list[StackReport], capsys: pytest.CaptureFixture[str]
) -> None:
    with capsys.disabled():
        print()
        for report in reports:
            print(f"image contents: {report.summary()}")
    assert [str(miss) for report in reports for miss in report.misses] == []


def test_only_the_operators_containers_are_left_out(reports: list[StackReport]) -> None:
    for report in reports:
        assert report.containers >= 60 and report.commands >= 100 and report.files >= 100 and report.modules >= 200
        images = {s.image for s in report.skipped}
        assert images <= {"rabbitmq:4.2.8-management", "(the operator's default)", "(its own images)"}


def test_the_images_hold_what_kolla_installs_and_not_more() -> None:
    software = image_software(["nova-compute", "nova-libvirt", "kolla-toolbox"])
    compute, libvirt, toolbox = software["nova-compute"], software["nova-libvirt"], software["kolla-toolbox"]
    assert compute.executables["nova-compute"] == "/var/lib/kolla/venv/bin/nova-compute"
    assert compute.distributions["nova"] == PINNED["nova"]
    assert "virsh" not in compute.executables  # libvirt-clients is nova-libvirt's, not nova-compute's
    assert libvirt.executables["virsh"] == "/usr/bin/virsh" and libvirt.distributions == {}
    assert "pymysql" in toolbox.distributions and "nova" not in toolbox.distributions
    assert toolbox.executables["python3"] == "/opt/ansible/bin/python3"


def test_what_the_check_cannot_see_is_said() -> None:
    said = [*CANNOT_SEE, *limits(["nova-compute"])]
    assert any("Ubuntu Cloud Archive" in line for line in said)
    assert any("upper-constraints" in line for line in said)
