"""The program's own stacks pass the pack: every real resource of dev, staging and prod,
recorded by the mock runtime (tools/runtime.py), judged with the stack's policy config,
both through report.check_resources (the offline plan's call) and policy by policy
through ResourceValidationArgs (the engine's call)."""

from __future__ import annotations

import copy
from functools import cache
from typing import Any

import pytest

from policies.node_roles import judge
from policies.podspec import pod_templates
from policies.registry import RESOURCE_RULES
from policies.report import check_resources, load_config, objects_from_plan, settings_for
from tools.runtime import run_stack

from .builders import POLICIES, run_policy

STACKS = ("dev", "staging", "prod")


@cache
def planned(stack: str) -> tuple[dict[str, Any], ...]:
    """The stack's resources in the shape tools/plan writes them to plan.json."""
    return tuple(
        {
            "urn": r.urn,
            "type": r.type,
            "name": r.name,
            "parent": r.parent,
            "custom": r.custom,
            "dependencies": r.dependencies,
            "kind": r.kind,
            "k8s_name": r.k8s_name,
            "namespace": r.namespace,
            "inputs": r.inputs,
        }
        for r in run_stack(stack)
    )


@pytest.mark.parametrize("stack", STACKS)
def test_the_stack_has_zero_mandatory_violations(stack: str) -> None:
    resources = copy.deepcopy(list(planned(stack)))
    mandatory = [v.message for v in check_resources(resources, load_config(stack)) if v.enforcement == "mandatory"]
    assert mandatory == []


@pytest.mark.parametrize("stack", STACKS)
def test_the_rules_really_saw_the_stacks_workloads(stack: str) -> None:
    """Not a vacuous pass: the pods the rules judged include the control plane's API and Jobs."""
    pods = [pod for obj in objects_from_plan(planned(stack)) for pod in pod_templates(obj)]
    kinds = {p.obj.kind for p in pods}
    assert {"Deployment", "Job", "MariaDB", "RabbitmqCluster"} <= kinds
    assert "keystone-api" in {p.obj.name for p in pods}


@pytest.mark.parametrize("stack", STACKS)
def test_every_resource_passes_each_mandatory_policy_as_the_engine_calls_it(stack: str) -> None:
    config = load_config(stack)
    checked = 0
    for resource in planned(stack):
        if not resource["custom"] or not resource["type"].startswith("kubernetes:"):
            continue
        for rule in RESOURCE_RULES:
            if config[rule.name]["enforcementLevel"] != "mandatory":
                continue
            assert POLICIES[rule.name].name == rule.name
            manifest = {**resource["inputs"], "apiVersion": resource["inputs"].get("apiVersion", "v1")}
            manifest.setdefault("kind", resource["type"].rsplit(":", 1)[-1])
            assert run_policy(rule.name, manifest, config, urn=resource["urn"]) == [], resource["urn"]
            checked += 1
    assert checked > 50


@pytest.mark.parametrize("stack", STACKS)
def test_every_daemonset_is_a_node_pod_whose_containers_all_hold_their_role(stack: str) -> None:
    """The program builds node pods from the role table; the pack must recognise each of them
    completely (labels, namespace, every container's image), or it judged them as strangers."""
    settings = settings_for(load_config(stack), "privileged-containers")
    for obj in objects_from_plan(planned(stack)):
        if obj.kind == "DaemonSet":
            [(pod, roles)] = judge(obj, settings)
            assert roles.node_pod is not None, roles.refusal
            unheld = [c.name for c in pod.containers() if roles.role(c) is None]
            assert unheld == [], f"{obj.describe()}: {dict(roles.mismatches)}"


def test_a_privileged_keystone_api_in_the_real_stack_is_caught() -> None:
    resources = copy.deepcopy(list(planned("prod")))
    api = next(r for r in resources if r["k8s_name"] == "keystone-api" and r["kind"] == "Deployment")
    api["inputs"]["spec"]["template"]["spec"]["containers"][0]["securityContext"]["privileged"] = True
    found = [v for v in check_resources(resources, load_config("prod")) if v.enforcement == "mandatory"]
    assert [(v.policy, v.urn) for v in found] == [("privileged-containers", api["urn"])]
