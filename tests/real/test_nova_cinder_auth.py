"""Nova's calls to Cinder without a user token authenticate, with every nova.conf the program renders.

nova-compute's periodic tasks and its clean-up of instances at start call Cinder with an admin
context that carries no token; nova then loads the auth plugin of its [cinder] section
(nova/volume/cinder.py `_load_auth_plugin`), and fails with "Unknown auth type: None" when the
section has none. Here the real nova 2026.1 loads that plugin from the rendered files.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from tests.conftest import plan_of
from tests.lab.realenv.openstack_venv import OpenStackVenv

# nova.conf of the control plane, and each compute node group's, of the stacks with and without HA.
FILES = (
    ("dev", "nova-etc", "nova.conf"),
    ("dev", "compute-etc", "nova-default.conf"),
    ("prod", "nova-etc", "nova.conf"),
    ("prod", "compute-etc", "nova-kvm-general.conf"),
)

PROBE = """
import json, sys
import nova.conf
from keystoneauth1 import loading
from nova import service_auth
from nova.volume import cinder

CONF = nova.conf.CONF
found = {}
for path in sys.argv[1:]:
    CONF(["--config-file", path], project="nova")
    service_auth.reset_globals()
    try:
        plugin = cinder._load_auth_plugin()
    except Exception as error:  # what nova-compute would log
        found[path] = {"error": f"{type(error).__name__}: {error}"}
        continue
    elements = plugin.get_cache_id_elements()
    found[path] = {
        "plugin": type(plugin).__name__,
        "auth_url": plugin.auth_url,
        "username": elements["username"],
        "project_name": elements["project_name"],
        # the password nova calls Placement with: its own, not another service's
        "own_password": elements["password"]
        == loading.load_auth_from_conf_options(CONF, "placement").get_cache_id_elements()["password"],
    }
print(json.dumps(found))
"""


def test_nova_loads_cinder_credentials_from_every_rendered_nova_conf(
    openstack_venv: OpenStackVenv, tmp_path: Path
) -> None:
    paths: list[str] = []
    for stack, secret, name in FILES:
        text = plan_of(stack).by_name(secret, "Secret").revealed["stringData"][name]
        written = tmp_path / stack / secret / name
        written.parent.mkdir(parents=True, exist_ok=True)
        written.write_text(text)
        paths.append(str(written))
    done = subprocess.run(
        [openstack_venv.python, "-c", PROBE, *paths], capture_output=True, text=True, env=openstack_venv.env()
    )
    assert done.returncode == 0, done.stderr[-3000:]
    found = json.loads(done.stdout)
    for path in paths:
        assert found[path] == {
            "plugin": "Password",
            "auth_url": "http://keystone-api.openstack.svc.cluster.local:5000",
            "username": "nova",
            "project_name": "service",
            "own_password": True,
        }, path
