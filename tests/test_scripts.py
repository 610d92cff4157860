"""The scripts pods run (components/scripts) find the modules they import mounted beside them.

Each script is mounted on its own (subPath) under /scripts, and Python looks for a script's
imports in its directory: a shared module (kube_api.py, the one Kubernetes API client) works
in a pod only if the pod's step or process lists it among its scripts.
"""

from __future__ import annotations

import ast
from functools import cache
from pathlib import Path

import pytest

from tests.conftest import STACKS, plan_of
from tests.helpers import containers
from tests.test_rook import ROOK
from tools.plan import Plan

SCRIPTS = Path(__file__).parents[1] / "components" / "scripts"
SCRIPTS_DIR = "/scripts"


@cache
def _siblings(script: str) -> frozenset[str]:
    """The files of components/scripts a Python script imports, itself included, transitively."""
    found = {script}
    tree = ast.parse((SCRIPTS / script).read_text())
    for node in ast.walk(tree):
        names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        for name in names:
            if (SCRIPTS / f"{name}.py").is_file():
                found |= _siblings(f"{name}.py")
    return frozenset(found)


def _mounted_scripts(plan: Plan) -> dict[str, set[str]]:
    """Per container ('<object>/<container>'), the scripts mounted under /scripts."""
    mounted = {}
    for r in plan.custom:
        if r.kind not in {"Job", "CronJob", "Deployment", "DaemonSet", "StatefulSet", "Pod"}:
            continue
        for c in containers(r):
            paths = [m["mountPath"] for m in c.get("volumeMounts", [])]
            mounted[f"{r.k8s_name}/{c['name']}"] = {
                p.rsplit("/", 1)[1] for p in paths if p.startswith(f"{SCRIPTS_DIR}/") and p.count("/") == 2
            }
    return mounted


PLANS = {**{stack: (stack, {}) for stack in STACKS}, "prod-rook": ("prod", {"ceph": ROOK})}


@pytest.mark.parametrize("which", sorted(PLANS))
def test_every_python_script_has_its_imports_mounted_beside_it(which: str) -> None:
    stack, overrides = PLANS[which]
    missing = {
        where: sorted(_siblings(script) - scripts)
        for where, scripts in _mounted_scripts(plan_of(stack, **overrides)).items()
        for script in scripts
        if script.endswith(".py") and _siblings(script) - scripts
    }
    assert missing == {}


def test_the_scripts_that_call_the_kubernetes_api_share_one_client() -> None:
    """Every script that speaks to the API server does so through kube_api.py, and no other
    script opens the ServiceAccount token itself."""
    callers = {s.name for s in SCRIPTS.glob("*.py") if "kube_api.py" in _siblings(s.name)} - {"kube_api.py"}
    assert {"keystone_key_rotate.py", "ceph_rook_keys.py", "nova_compute_maintenance.py"} <= callers
    marks = ("KUBERNETES_SERVICE_HOST", "serviceaccount")
    own_clients = {
        s.name for s in SCRIPTS.glob("*.py") if s.name != "kube_api.py" and any(m in s.read_text() for m in marks)
    }
    assert own_clients == set()
