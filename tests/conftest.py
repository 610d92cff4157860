"""Shared fixtures: plans of the real stacks, made once per test session."""

from __future__ import annotations

import json
from functools import cache
from typing import Any

import pytest

from tools.plan import Plan, build_plan

STACKS = ("dev", "staging", "prod")


@cache
def _plan(stack: str, overrides_json: str) -> Plan:
    return build_plan(stack, json.loads(overrides_json))


def plan_of(stack: str, **overrides: Any) -> Plan:
    """The plan of a stack file, with settings changed by `overrides` (camelCase keys)."""
    return _plan(stack, json.dumps(overrides, sort_keys=True))


@pytest.fixture(params=STACKS)
def stack_plan(request: pytest.FixtureRequest) -> Plan:
    return plan_of(request.param)
