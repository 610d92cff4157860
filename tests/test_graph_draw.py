"""graph.svg and graph.md: every Job and workload, in waves, with the plan's order kept."""

from __future__ import annotations

import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from tests.conftest import STACKS, plan_of
from tools import graph_draw
from tools.plan_graph import SHOWN_KINDS, DeployGraphView
from tools.runtime import REPO

SVG = "{http://www.w3.org/2000/svg}"


def mermaid_block(markdown: str) -> str:
    [block] = re.findall(r"```mermaid\n(.*?)```", markdown, re.S)
    return block


@pytest.mark.parametrize("stack", STACKS)
def test_graph_md_has_every_job_and_workload_and_keeps_every_wait(stack: str) -> None:
    plan = plan_of(stack)
    block = mermaid_block(graph_draw.markdown(DeployGraphView(plan), stack))
    assert block.startswith("flowchart LR\n")
    labels = {i: (name, kind) for i, name, kind in re.findall(r'^\s+(n\d+)\["([a-z0-9-]+)<br/>(\w+)', block, re.M)}
    expected = {(r.k8s_name, r.kind) for r in plan.custom if r.kind in SHOWN_KINDS}
    assert expected <= set(labels.values())
    assert ("mariadb-operator", "Chart") in set(labels.values())  # operators too
    # Arrows only leave out what another path implies: every wait of the plan is still a path.
    arrows: dict[str, set[str]] = {}
    for source, target in re.findall(r"^\s+(n\d+) --> (n\d+)$", block, re.M):
        arrows.setdefault(labels[target][0] + "/" + labels[target][1], set()).add(source)
    ids = {v: k for k, v in labels.items()}
    by_urn = {r.urn: r for r in plan.custom}

    def reaches(target: str, source: str) -> bool:
        seen, stack_ = set(), [target]
        while stack_:
            node = stack_.pop()
            for before in arrows.get("/".join(labels[node]), ()):
                if before == source:
                    return True
                if before not in seen:
                    seen.add(before)
                    stack_.append(before)
        return False

    for r in plan.custom:
        if r.kind in SHOWN_KINDS:
            for dep in plan.dependencies[r.urn]:
                d = by_urn[dep]
                if d.kind in SHOWN_KINDS:
                    assert reaches(ids[(r.k8s_name, r.kind)], ids[(d.k8s_name, d.kind)]), (r.k8s_name, d.k8s_name)


def test_graph_svg_is_well_formed_and_draws_waves_left_to_right() -> None:
    plan = plan_of("prod")
    root = ET.fromstring(graph_draw.svg(DeployGraphView(plan), "prod"))
    assert root.tag == f"{SVG}svg"
    x = {t.text: float(t.get("x")) for t in root.iter(f"{SVG}text")}  # type: ignore[arg-type]
    for r in plan.custom:
        if r.kind in ("Job", "Deployment", "DaemonSet", "StatefulSet"):
            assert r.k8s_name in x, r.k8s_name
    assert x["mariadb"] < x["glance-db-init"] < x["glance-db-sync"] < x["glance-ks-endpoints"] < x["glance-api"]
    assert x["nova-compute-kvm-general"] < x["nova-cell-setup"]
    # One lane per service: glance's objects share a row band apart from nova's.
    y = {t.text: float(t.get("y")) for t in root.iter(f"{SVG}text")}  # type: ignore[arg-type]
    assert y["glance-db-init"] == y["glance-db-sync"] != y["nova-db-sync"]


def test_graph_md_is_the_same_for_every_run_of_a_plan(tmp_path: Path) -> None:
    """The engine registers resources from a thread pool, in an order that varies between
    processes; graph.md goes into pull request comments, so it must not change when the plan does not."""
    texts = []
    for run in ("first", "second"):
        out = tmp_path / run
        subprocess.run([sys.executable, "-m", "tools.plan", "--stack", "prod", "--out", str(out)], cwd=REPO, check=True)
        texts.append((out / "graph.md").read_text())
    assert texts[0] == texts[1]
