"""The programs the pods start exist in the targeted release, and the WSGI apps import.

A renamed console script or a moved WSGI module only shows when a pod crash-loops; here
every command of every stack is looked up in the virtualenv of each release the program
deploys (the stacks as that release deploys them: tests/conftest.py release_plan).
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Callable

import pytest

from components.mechanism.inifile import parse_ini
from components.settings.releases import RELEASES
from tests.conftest import STACKS, release_plan
from tests.helpers import containers
from tests.lab.realenv.openstack_venv import OpenStackVenv
from tools.runtime import REPO

# Started by scripts or provided by the node images (Debian/Kolla packages, not PyPI).
NOT_FROM_PYPI = {"bash", "python3", "memcached", "libvirtd", "virsh", "ovsdb-client", "ovs-appctl", "pgrep"}
# Nothing is exempt: Horizon is installed too (its app is served in tests/cloud).
NOT_INSTALLED_MODULES: set[str] = set()


def _programs(release: str) -> set[str]:
    found = set()
    for stack in STACKS:
        for r in release_plan(stack, release).custom:
            if r.kind in ("Deployment", "DaemonSet", "Job", "CronJob"):
                for container in containers(r):
                    found.add(container["args"][0])
                    probe = container.get("readinessProbe", {}).get("exec")
                    if probe:
                        found.add(probe["command"][0])
    return found


def _script_programs() -> set[str]:
    """OpenStack commands the start and Job scripts run (the first word after exec, or a call)."""
    pattern = re.compile(
        r"(?:^|exec |\\\n\s*|\$\(|; )((?:nova|neutron|cinder|glance|keystone|placement)-[a-z-]+) ", re.M
    )
    return {m for path in (REPO / "components" / "scripts").glob("*.sh") for m in pattern.findall(path.read_text())}


def _wsgi_modules(release: str) -> set[str]:
    modules = set()
    for stack in STACKS:
        for r in release_plan(stack, release).custom:
            if r.kind == "Secret" and (r.k8s_name or "").endswith("-etc"):
                for name, text in r.revealed["stringData"].items():
                    if name.endswith("-uwsgi.ini"):
                        modules.add(parse_ini(text)["uwsgi"]["module"].split(":")[0])
    return modules


PROGRAMS = {release: sorted((_programs(release) | _script_programs()) - NOT_FROM_PYPI) for release in RELEASES}
MODULES = {release: sorted(_wsgi_modules(release) - NOT_INSTALLED_MODULES) for release in RELEASES}


@pytest.mark.parametrize(("release", "program"), [(r, p) for r, programs in PROGRAMS.items() for p in programs])
def test_program_exists_in_the_release(release: str, program: str, venv_of: Callable[[str], OpenStackVenv]) -> None:
    venv = venv_of(release)
    assert (venv.path / "bin" / program).exists(), f"{program} is not a command of the {release} projects"


@pytest.mark.parametrize("release", RELEASES)
def test_the_commands_cover_every_service(release: str) -> None:
    for expected in (
        "keystone-manage",
        "glance-manage",
        "nova-manage",
        "uwsgi",
        "neutron-rpc-server",
        "nova-conductor",
    ):
        assert expected in PROGRAMS[release]


@pytest.mark.parametrize(("release", "module"), [(r, m) for r, modules in MODULES.items() for m in modules])
def test_wsgi_module_exists(release: str, module: str, venv_of: Callable[[str], OpenStackVenv]) -> None:
    # find_spec, not import: importing the app reads config files that only a pod has.
    venv = venv_of(release)
    check = f"import importlib.util, sys; sys.exit(importlib.util.find_spec({module!r}) is None)"
    assert subprocess.run([venv.python, "-c", check], env=venv.env()).returncode == 0, module
