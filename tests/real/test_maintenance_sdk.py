"""nova-compute-maintenance's Nova transport (openstacksdk, keystoneauth) in the targeted release.

The quick tests drive the controller through a plain HTTP transport; its pod uses openstacksdk's
session. tests/maintenance/sdk_roundtrip.py sends every Nova and Placement call of the controller
that way, Keystone login and version discovery included, to test doubles that answer only at the
pinned microversions. The cloud test then does it against the real Nova.
"""

from __future__ import annotations

import subprocess

from tests.lab.realenv.openstack_venv import OpenStackVenv
from tools.runtime import REPO


def test_the_controllers_calls_go_through_openstacksdk(openstack_venv: OpenStackVenv) -> None:
    script = REPO / "tests" / "maintenance" / "sdk_roundtrip.py"
    done = subprocess.run(
        [openstack_venv.python, str(script)], env=openstack_venv.env(), capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.startswith("ok:")
