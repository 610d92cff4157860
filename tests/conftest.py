"""Shared fixtures: plans of the real stacks, made once per test session."""

from __future__ import annotations

import json
from functools import cache
from typing import Any

import pytest

from components.settings.releases import DEFAULT_RELEASE
from tests.release_stack import release_overrides
from tools.plan import Plan, build_plan
from tools.runtime import stack_config

STACKS = ("dev", "staging", "prod")


@cache
def _plan(stack: str, overrides_json: str) -> Plan:
    return build_plan(stack, json.loads(overrides_json))


def plan_of(stack: str, **overrides: Any) -> Plan:
    """The plan of a stack file, with settings changed by `overrides` (camelCase keys)."""
    return _plan(stack, json.dumps(overrides, sort_keys=True))


def stacks_release() -> str:
    """The release every stack file names (the tests' OpenStack venv is that release's)."""
    found = {plan_of(stack).settings.release for stack in STACKS}
    if len(found) != 1:
        raise AssertionError(f"the stack files name several releases: {sorted(found)}")
    return found.pop()


@pytest.fixture(params=STACKS)
def stack_plan(request: pytest.FixtureRequest) -> Plan:
    return plan_of(request.param)


def release_plan(stack: str, release: str) -> Plan:
    """The plan of a stack file as `release` deploys it: its own release, or another one, with the settings
    tests/release_stack.py changes for it (as the lab's upgrade deploys its first release)."""
    if release == DEFAULT_RELEASE:
        return plan_of(stack)
    return plan_of(stack, **release_overrides(stack_config(stack), release))
