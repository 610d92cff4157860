"""A ValidatingAdmissionPolicy's spec judged as the API server judges a request, for the tests.

The CEL is evaluated with cel-python (celpy), a CEL implementation, over what the API server hands a
policy: `object` and `oldObject`, `request` (operation, name, namespace, userInfo) and `variables`,
computed first in order. The policy applies when every matchCondition is true; it then admits the
request when every validation is true (a binding with validationActions Deny refuses it otherwise).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import celpy

CEL = celpy.Environment()


def evaluate(expression: str, activation: Mapping[str, Any]) -> Any:
    return CEL.program(CEL.compile(expression)).evaluate(dict(activation))


def admits(
    policy: Mapping[str, Any],
    request: Mapping[str, Any],
    obj: Mapping[str, Any] | None,
    old: Mapping[str, Any] | None = None,
) -> bool:
    """Whether `policy` (a ValidatingAdmissionPolicy's spec) admits `request` with its object(s)."""
    activation: dict[str, Any] = {
        "object": celpy.json_to_cel(dict(obj)) if obj is not None else celpy.celtypes.MapType({}),
        "oldObject": celpy.json_to_cel(dict(old or {})),
        "request": celpy.json_to_cel(dict(request)),
    }
    if not all(evaluate(c["expression"], activation) for c in policy.get("matchConditions", [])):
        return True  # the policy does not apply to this request
    variables: dict[Any, Any] = {}
    for variable in policy.get("variables", []):
        activation["variables"] = celpy.celtypes.MapType(variables)
        variables[celpy.celtypes.StringType(variable["name"])] = evaluate(variable["expression"], activation)
    activation["variables"] = celpy.celtypes.MapType(variables)
    results = [evaluate(v["expression"], activation) for v in policy["validations"]]
    assert all(isinstance(result, celpy.celtypes.BoolType) for result in results), results  # no CEL error
    return all(results)
