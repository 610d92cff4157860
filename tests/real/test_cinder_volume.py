"""cinder-volume as its pod starts it: the node's address and the privsep commands rootwrap must admit.

The pod's start script is run as it is, with the rendered cinder.conf where the pod mounts it and
the pod's environment as the kubelet resolves it; the `cinder-volume` it execs is a stand-in that
loads the configuration as cinder-volume does (the real cinder 2026.1, its cmd.volume module) and
builds the privsep-helper commands oslo.privsep would hand to cinder's root helper, which are then
matched against cinder's own rootwrap filters (etc/cinder/rootwrap.d, which Kolla installs in
/etc/cinder/rootwrap.d).

oslo.rootwrap (7.9.0 here, and since 5.x) adds a filter of its own that admits privsep-helper
with any arguments, so a second --config-file would still start; the test holds the pod to the
filters cinder ships, which name each privsep context and admit one config file under /etc/.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path
from typing import Any

from tests.conftest import plan_of
from tests.helpers import containers
from tests.lab.realenv.openstack_venv import OpenStackVenv

NODE = "192.0.2.10"  # status.hostIP of the storage node the test plays
CONFIG_DIR = "/etc/cinder"
# The privsep contexts cinder-volume starts for the LVM backend: cinder's own (LVM, the LIO target)
# and os-brick's (attaching volumes to copy images into them).
CONTEXTS = ("cinder.privsep.sys_admin_pctxt", "os_brick.privileged.default")

# Runs as `cinder-volume`: what cinder/cmd/volume.py main() does before it starts any service,
# then the backend's Configuration as VolumeManager builds it and the volume driver extends it.
STAND_IN = """
import importlib, json, os, shlex, sys
import cinder.cmd.volume  # registers cinder-volume's own options, as the real command does
from cinder import objects, utils, version
from oslo_config import cfg
from oslo_privsep import priv_context
from oslo_rootwrap import wrapper

CONF = cfg.CONF
objects.register_all()
from cinder.volume import configuration, driver, manager  # after the objects, which they name
CONF(sys.argv[1:], project="cinder", version=version.version_string())
priv_context.init(root_helper=shlex.split(utils.get_root_helper()))
backend = CONF.enabled_backends[0]
conf = configuration.Configuration(manager.volume_backend_opts, config_group=backend)
conf.append_config_values(driver.volume_opts)
filters_dir, exec_dir, config_dir, pod_dir = os.environ["STAND_IN_PATHS"].split(":")
filters = wrapper.load_filters([filters_dir])
root_helper = shlex.split(utils.get_root_helper())
commands, admitted = {}, {}
for name in CONTEXTS:
    module, attribute = name.rsplit(".", 1)
    context = getattr(importlib.import_module(module), attribute)
    command = context.helper_command("/tmp/privsep-probe/privsep.sock")
    # the pod's paths: the rendered files are mounted in /etc/cinder
    command = [arg.replace(config_dir, pod_dir) for arg in command]
    commands[name] = command
    userargs = command[len(root_helper):]
    wrapper.match_filter(filters, userargs, exec_dirs=[exec_dir])  # raises unless some filter admits it
    admitted[name] = [f.name for f in filters if f.match(userargs)]
print(json.dumps({
    "backend": backend,
    "my_ip": CONF.my_ip,
    "cluster": CONF.cluster,
    "target_ip_address": conf.target_ip_address,
    "root_helper": root_helper,
    "commands": commands,
    "admitted": admitted,
}))
"""


def _pod_env(container: dict[str, Any]) -> dict[str, str]:
    """The container's environment as the kubelet gives it: the node's address, $(VAR) expanded."""
    resolved: dict[str, str] = {}
    for entry in container.get("env", []):
        if "valueFrom" in entry:
            assert entry["valueFrom"] == {"fieldRef": {"fieldPath": "status.hostIP"}}, entry
            resolved[entry["name"]] = NODE
        else:
            resolved[entry["name"]] = re.sub(r"\$\((\w+)\)", lambda m: resolved[m.group(1)], entry["value"])
    return resolved


def _start_cinder_volume(venv: OpenStackVenv, tmp_path: Path, stack: str = "staging") -> dict[str, Any]:
    """staging's pod runs the lvm backend, prod's the rbd one."""
    plan = plan_of(stack)
    [container] = containers(plan.by_name("cinder-volume", "DaemonSet"))
    files = plan.by_name("cinder-etc", "Secret").revealed["stringData"]
    etc = tmp_path / "etc-cinder"
    etc.mkdir()
    for mount in container["volumeMounts"]:
        if mount["mountPath"].startswith(f"{CONFIG_DIR}/"):
            (etc / Path(mount["mountPath"]).name).write_text(files[mount["subPath"]])
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "cinder-volume").write_text(f"#!{venv.python}\nCONTEXTS = {CONTEXTS!r}\n{STAND_IN}")
    (bin_dir / "vgs").write_text("#!/bin/sh\nexit 0\n")  # the node's volume group exists
    for tool in ("cinder-volume", "vgs"):
        (bin_dir / tool).chmod(0o755)
    script = plan.by_name("cinder-bin", "ConfigMap").inputs["data"]["cinder_volume_start.sh"]
    paths = ":".join((str(venv.path / "etc/cinder/rootwrap.d"), str(venv.path / "bin"), str(etc), CONFIG_DIR))
    env = venv.env({**os.environ, **_pod_env(container), "STAND_IN_PATHS": paths})
    env["PATH"] = f"{bin_dir}:{env['PATH']}"
    done = subprocess.run(["bash", "-c", script.replace(CONFIG_DIR, str(etc))], env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout)


def test_cinder_volume_privsep_is_admitted_by_cinder_rootwrap_and_the_target_is_the_node(
    openstack_venv: OpenStackVenv, tmp_path: Path
) -> None:
    started = _start_cinder_volume(openstack_venv, tmp_path)
    assert started["root_helper"] == ["sudo", "cinder-rootwrap", f"{CONFIG_DIR}/rootwrap.conf"]
    # cinder's volume.filters names each context with exactly one --config-file under /etc/.
    # oslo.rootwrap also appends a filter of its own, "privsep-helper", that admits the helper
    # with any arguments: the command must be what cinder's filters describe, not only that.
    assert started["admitted"] == {
        "cinder.privsep.sys_admin_pctxt": ["privsep-rootwrap-sys_admin", "privsep-helper"],
        "os_brick.privileged.default": ["privsep-rootwrap", "privsep-helper"],
    }, started["commands"]
    sys_admin = started["commands"]["cinder.privsep.sys_admin_pctxt"]
    assert sys_admin[3:6] == ["privsep-helper", "--config-file", f"{CONFIG_DIR}/cinder.conf"]
    # The LVM backend's section reads its node's address from the environment (OS_LVM__...).
    assert started["backend"] == "lvm"
    assert started["target_ip_address"] == NODE
    assert started["my_ip"] == NODE
    assert started["cluster"] is None  # LVM's volumes live on their node: no active/active


def test_the_rbd_pod_joins_the_cinder_cluster_as_cinder_volume_reads_its_configuration(
    openstack_venv: OpenStackVenv, tmp_path: Path
) -> None:
    """cinder/cmd/volume.py names the service's cluster '<cluster>@<backend>' from [DEFAULT] cluster:
    read here by cinder's own option from the pod's environment and files, as the pod starts it."""
    started = _start_cinder_volume(openstack_venv, tmp_path, "prod")
    assert started["backend"] == "rbd"
    assert started["cluster"] == "cinder"  # the default of cinder.cluster, which prod leaves unset
