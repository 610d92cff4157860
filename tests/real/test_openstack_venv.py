"""The OpenStack virtualenv runs from wherever a container mounts it, wherever the checkout lives.

The lab mounts it at /var/lib/kolla/venv (where Kolla's images keep theirs), and each container
has a /tmp of its own: a checkout under /tmp (CI systems build there) hid the path the venv's
scripts named in their first line, and every Job's command exited 127. Here the build path is
hidden the same way, and a console script is run from a second mount point.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from tests.lab.realenv.openstack_venv import OpenStackVenv


def test_no_console_script_names_the_path_the_venv_was_built_at(openstack_venv: OpenStackVenv) -> None:
    built_at = str(openstack_venv.path)
    scripts = [p for p in (openstack_venv.path / "bin").iterdir() if p.is_file() and not p.is_symlink()]
    naming = [p.name for p in scripts if built_at in p.read_bytes()[:512].decode(errors="replace")]
    assert len(scripts) > 50
    assert naming == []


def test_a_script_runs_with_its_build_path_hidden(openstack_venv: OpenStackVenv, tmp_path: Path) -> None:
    mount = tmp_path / "elsewhere"
    mount.mkdir()
    hide = openstack_venv.path.parent
    script = f"""set -e
mount --bind {openstack_venv.path} {mount}
mount -t tmpfs hidden {hide}
test ! -e {openstack_venv.path}/bin/python
exec {mount}/bin/nova-manage --version
"""
    done = subprocess.run(
        ["unshare", "--mount", "--propagation", "private", "--", "/bin/sh", "-c", script],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip().startswith("33.")  # nova 2026.1


def test_the_venv_imports_cephs_modules_as_kollas_images_do(openstack_venv: OpenStackVenv) -> None:
    """glance_store, os-brick, cinder and nova import rados and rbd (Debian's python3-rados, python3-rbd)."""
    probe = "import rados, rbd; print(rados.__file__, rbd.__file__, rbd.RBD_FEATURE_LAYERING)"
    done = subprocess.run([openstack_venv.python, "-c", probe], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr[-2000:]
    rados_file, rbd_file, layering = done.stdout.split()
    site_packages = str(openstack_venv.path / "lib" / "python3.11" / "site-packages")
    assert rados_file.startswith(site_packages) and rbd_file.startswith(site_packages)
    assert layering == "1"
