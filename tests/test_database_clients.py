"""The README's restore and rollback stop every pod that connects to a database, found from the plan.

The writers are read here from the plan's manifests, apart from the program's label: a workload is one
when a config file its containers mount (a key of a Secret, by subPath) has a `connection` in a
database section. The README's own `kubectl delete ... -l` lines must select exactly those, and no
pod that holds VMs or their networks.
"""

from __future__ import annotations

import configparser
import re
import shlex
from typing import Any

import pytest

from components.mechanism.inifile import parse_ini
from tests.conftest import STACKS, plan_of
from tests.helpers import pod_template
from tools.plan import Plan
from tools.runtime import REPO

KINDS = {"deployment": "Deployment", "daemonset": "DaemonSet", "cronjob": "CronJob", "statefulset": "StatefulSet"}


def _connects(text: str) -> bool:
    try:
        ini = parse_ini(text)
    except configparser.Error:
        return False
    return any(ini.get(s, "connection", fallback="") for s in ini.sections() if "database" in s)


def _mounted_files(plan: Plan, spec: dict[str, Any]) -> list[str]:
    own = {r.k8s_name for r in plan.custom if r.kind == "Secret"}  # not the user's (Ceph keyrings)
    secrets = {v["name"]: v["secret"]["secretName"] for v in spec.get("volumes", []) if "secret" in v}
    secrets = {volume: name for volume, name in secrets.items() if name in own}
    texts = []
    for container in [*spec.get("containers", []), *spec.get("initContainers", [])]:
        for mount in container.get("volumeMounts", []):
            if mount["name"] in secrets and "subPath" in mount:
                data = plan.by_name(secrets[mount["name"]], "Secret").revealed.get("stringData", {})
                texts.append(data.get(mount["subPath"], ""))
    return texts


def _writers(plan: Plan) -> set[tuple[str | None, str | None]]:
    found = set()
    for r in plan.custom:
        if r.kind in KINDS.values():
            spec = pod_template(r)["spec"]
            if any(_connects(text) for text in _mounted_files(plan, spec)):
                found.add((r.kind, r.k8s_name))
    return found


def _readme_stops() -> list[list[str]]:
    """Every `kubectl ... delete <kinds> -l <selector>` line of the README."""
    lines = (REPO / "README.md").read_text().splitlines()
    return [
        shlex.split(line, comments=True)
        for line in lines
        if line.startswith("kubectl") and " delete " in line and " -l " in line
    ]


def _selected(plan: Plan, command: list[str]) -> set[tuple[str | None, str | None]]:
    kinds = {KINDS[k] for k in command[command.index("delete") + 1].split(",")}
    key, value = command[command.index("-l") + 1].split("=")
    return {
        (r.kind, r.k8s_name)
        for r in plan.custom
        if r.kind in kinds and (r.inputs["metadata"].get("labels") or {}).get(key) == value
    }


def test_the_readme_stops_writers_in_both_the_restore_and_the_rollback() -> None:
    stops = _readme_stops()
    assert len(stops) == 2, stops  # Database backups (restore) and Release upgrades (rollback)
    assert all(c == stops[0] for c in stops)
    assert "--cascade=foreground" in stops[0]  # returns once the pods are gone
    assert not re.search(r"kubectl .*scale ", (REPO / "README.md").read_text())


@pytest.mark.parametrize("stack", STACKS)
def test_the_readmes_stop_selects_every_pod_that_connects_to_a_database_and_no_other(stack: str) -> None:
    plan = plan_of(stack)
    writers = _writers(plan)
    workloads = {w for w in writers if w[0] != "CronJob"}
    assert ("DaemonSet", "cinder-volume") in writers or "cinder" not in plan.settings.services.enabled()
    assert workloads, writers
    stop = _readme_stops()[0]
    selected = _selected(plan, stop)
    assert selected == {w for w in writers if w[0] in ("Deployment", "DaemonSet", "CronJob")}
    # Nothing that holds the VMs, their disks or their networks.
    assert not {
        name for _, name in selected if re.match(r"(libvirt|nova-compute|openvswitch|neutron-.*agent)", name or "")
    }
