"""The PolicyPack as Pulumi runs it: built from inside policies/, with a config schema per
policy, and judging preview-time inputs (unknown values) the way the engine hands them over."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from pulumi_policy import EnforcementLevel, ResourceValidationPolicy, StackValidationPolicy
from pulumi_policy.proxy import UNKNOWN_BOOLEAN_VALUE, UNKNOWN_STRING_VALUE, UnknownValueError

from components.tables.roles import Topology
from policies.pack import build_policies
from policies.registry import RESOURCE_RULES, RULES, STACK_RULES
from policies.settings import PROPERTIES

from .builders import container, control_plane, run_policy, stack_config

REPO = Path(__file__).resolve().parents[2]


def test_main_builds_the_pack_when_run_from_inside_policies() -> None:
    """Pulumi starts the pack in policies/; it must find policies.* and components.tables.roles
    there, then serve: the SDK prints the port it listens on and never returns."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    server = subprocess.Popen(
        [sys.executable, "-u", "."], cwd=REPO / "policies", env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    try:
        port = server.stdout.readline().strip() if server.stdout else ""
        assert port.isdigit(), server.stderr.read() if server.stderr and server.poll() is not None else port
    finally:
        server.kill()
        server.wait()


def test_one_policy_per_rule_with_its_type_level_and_config_schema() -> None:
    policies = build_policies()
    assert [p.name for p in policies] == [r.name for r in RULES]
    for policy, rule in zip(policies, RULES, strict=True):
        kind = ResourceValidationPolicy if rule in RESOURCE_RULES else StackValidationPolicy
        assert isinstance(policy, kind)
        assert policy.enforcement_level == EnforcementLevel(rule.enforcement)
        schema = policy.config_schema.properties if policy.config_schema else {}
        assert schema == {name: PROPERTIES[name] for name in rule.uses}
        assert all("default" in spec and "description" in spec for spec in schema.values())
    assert len(STACK_RULES) == 4


def test_unknown_values_elsewhere_do_not_stop_a_rule() -> None:
    """During preview a config checksum may be unknown; the rules read only what they judge."""
    deployment = control_plane()
    deployment["spec"]["template"]["metadata"]["annotations"] = {"openstack.org/config-checksum": UNKNOWN_STRING_VALUE}
    container(deployment)["securityContext"]["privileged"] = True
    config = stack_config(Topology.POD_PER_SERVICE)
    assert run_policy("pod-security-baseline", deployment, config) == []
    assert len(run_policy("privileged-containers", deployment, config)) == 1


def test_an_unknown_value_a_rule_needs_is_left_to_the_engine() -> None:
    """The engine turns UnknownValueError into "can't run policy during preview" and runs the
    policy again at `pulumi up`, when the value is known; the pack must not guess."""
    deployment = control_plane()
    container(deployment)["securityContext"]["privileged"] = UNKNOWN_BOOLEAN_VALUE
    with pytest.raises(UnknownValueError):
        run_policy("privileged-containers", deployment, stack_config(Topology.POD_PER_SERVICE))
