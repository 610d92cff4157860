"""Nova's graceful shutdown, as each release's own code reads it, fits inside the pods' grace periods.

On SIGTERM nova's services stop their RPC server, wait `manager_shutdown_timeout` for the work in
progress, and exit by `graceful_shutdown_timeout` (2026.1: nova/service.py stop, nova/conf/base.py).
The kubelet SIGKILLs a pod at its terminationGracePeriodSeconds: a grace shorter than nova's
timeout ends the wait it is there for. The timeouts are read by oslo.config from the plan's own
nova.conf, in the venv of the release that runs it (components/settings/releases.py).
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from components.settings.releases import RELEASES
from tests.conftest import release_plan
from tests.lab.realenv.openstack_venv import OpenStackVenv

READ_TIMEOUTS = """
import json, sys
import nova.conf
from oslo_config import cfg
from oslo_service import _options
conf = nova.conf.CONF
try:  # what oslo.service registers as a service starts (2026.1's nova.conf already has it, its own default)
    conf.register_opts(_options.service_opts)
except cfg.DuplicateOptError:
    pass
conf([], project="nova", default_config_files=[sys.argv[1]])
names = ("graceful_shutdown_timeout", "manager_shutdown_timeout")
print(json.dumps({name: getattr(conf, name, None) for name in names}))
"""


def _grace(plan: object, kind: str, name: str) -> int:
    spec = plan.by_name(name, kind).revealed["spec"]["template"]["spec"]  # type: ignore[attr-defined]
    return int(spec.get("terminationGracePeriodSeconds", 30))  # Kubernetes' default


@pytest.mark.parametrize("release", sorted(RELEASES))
def test_nova_services_finish_their_graceful_shutdown_within_the_pods_grace(
    release: str, venv_of: Callable[[str], OpenStackVenv], tmp_path: Path
) -> None:
    plan = release_plan("prod", release)
    conf = tmp_path / "nova.conf"
    conf.write_text(plan.by_name("nova-etc", "Secret").revealed["stringData"]["nova.conf"])
    found = subprocess.run(
        [str(venv_of(release).python), "-c", READ_TIMEOUTS, str(conf)], capture_output=True, text=True, timeout=120
    )
    assert found.returncode == 0, found.stderr[-2000:]
    timeouts = json.loads(found.stdout)
    graceful = timeouts["graceful_shutdown_timeout"]
    assert isinstance(graceful, int) and graceful > 0, timeouts  # 0 would wait forever
    # A release whose manager waits (2026.1) waits less than the whole shutdown.
    assert timeouts["manager_shutdown_timeout"] is None or timeouts["manager_shutdown_timeout"] < graceful, timeouts
    for kind, name in (("Deployment", "nova-conductor"), ("Deployment", "nova-scheduler")):
        assert _grace(plan, kind, name) > graceful, (name, timeouts)
    computes = [n for r in plan.custom if r.kind == "DaemonSet" and (n := r.k8s_name or "").startswith("nova-compute")]
    assert computes
    for name in computes:
        assert _grace(plan, "DaemonSet", name) > graceful, (name, timeouts)
