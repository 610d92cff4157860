"""Kubernetes RBAC as the API server reads it: the rules bound to a ServiceAccount.

Shared by the lab's API server (tests/lab/cloud/apiserver.py) and the maintenance controller's test
double (tests/doubles/kubefake.py), so both authorise as the plan's Roles and bindings say.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Rule:
    api_groups: frozenset[str]
    resources: frozenset[str]
    verbs: frozenset[str]
    names: frozenset[str]  # resourceNames; empty: any

    def allows(self, group: str, resource: str, verb: str, name: str | None) -> bool:
        return (
            (group in self.api_groups or "*" in self.api_groups)
            and (resource in self.resources or "*" in self.resources)
            and (verb in self.verbs or "*" in self.verbs)
            and (not self.names or (name is not None and name in self.names))
        )


def rbac_rules(objects: Iterable[Mapping[str, Any]], namespace: str, account: str) -> list[tuple[str | None, Rule]]:
    """(namespace the rule holds in, or None for cluster-wide; the rule) of a ServiceAccount, from RBAC objects."""
    objects = list(objects)
    roles = {(o["kind"], o["metadata"].get("namespace"), o["metadata"]["name"]): o for o in objects}
    found: list[tuple[str | None, Rule]] = []
    for binding in objects:
        if binding["kind"] not in ("RoleBinding", "ClusterRoleBinding"):
            continue
        if not any(
            s.get("kind") == "ServiceAccount" and s.get("name") == account and s.get("namespace") == namespace
            for s in binding.get("subjects") or []
        ):
            continue
        ref = binding["roleRef"]
        where = binding["metadata"].get("namespace") if binding["kind"] == "RoleBinding" else None
        role = roles.get((ref["kind"], where if ref["kind"] == "Role" else None, ref["name"]))
        for rule in (role or {}).get("rules") or []:
            found.append((where, Rule(
                frozenset(rule.get("apiGroups") or []), frozenset(rule.get("resources") or []),
                frozenset(rule.get("verbs") or []), frozenset(rule.get("resourceNames") or []),
            )))  # fmt: skip
    return found
