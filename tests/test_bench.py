"""The benchmark's synthetic stacks (tools/bench.py): prod with N compute node groups."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from tools import plan as plan_tool
from tools.bench import GROUP_LABEL, node_groups, with_node_groups, write_stack
from tools.runtime import stack_file


def test_a_stack_with_three_groups_plans_three_of_each_compute_daemonset(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    path = write_stack(with_node_groups(stack_file("prod"), 3), tmp_path / "Pulumi.groups-3.yaml")
    # Valid settings, valid manifests, no mandatory policy violation: the plan exits 0.
    assert plan_tool.main(["--stack", "prod", "--stack-file", str(path), "--out", str(tmp_path / "out")]) == 0
    resources = json.loads((tmp_path / "out" / "plan.json").read_text())["resources"]
    selectors = {
        r["k8s_name"]: r["inputs"]["spec"]["template"]["spec"]["nodeSelector"]
        for r in resources
        if r["kind"] == "DaemonSet" and r["k8s_name"].startswith("nova-compute-")
    }
    assert sorted(selectors) == ["nova-compute-g1", "nova-compute-g2", "nova-compute-g3"]
    for n in (1, 2, 3):
        assert selectors[f"nova-compute-g{n}"][GROUP_LABEL] == f"g{n}"  # disjoint groups of nodes
    # libvirt's DaemonSet and, under tls.libvirt, its certificate's (libvirt-tls-<group>): one of each per group.
    libvirt = sorted(
        r["k8s_name"] for r in resources if r["kind"] == "DaemonSet" and r["k8s_name"].startswith("libvirt-")
    )
    assert libvirt == [*(f"libvirt-g{n}" for n in (1, 2, 3)), *(f"libvirt-tls-g{n}" for n in (1, 2, 3))]


def test_the_groups_copy_the_base_stacks_group_and_nothing_else_changes() -> None:
    base = yaml.safe_load(stack_file("prod").read_text())
    generated = with_node_groups(stack_file("prod"), 2)
    [template] = node_groups(base)
    assert node_groups(generated) == [
        {**template, "name": "g1", "nodeSelector": {GROUP_LABEL: "g1"}},
        {**template, "name": "g2", "nodeSelector": {GROUP_LABEL: "g2"}},
    ]
    key = "openstack:compute"
    assert {k: v for k, v in generated["config"].items() if k != key} == {
        k: v for k, v in base["config"].items() if k != key
    }
    assert {k: v for k, v in generated["config"][key].items() if k != "nodeGroups"} == {
        k: v for k, v in base["config"][key].items() if k != "nodeGroups"
    }
