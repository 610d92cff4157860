"""`python -m tools.plan --stack S --explain NAME`: one object of the plan, and why it waits.

For every object of that Kubernetes name: what it is (kind, namespace, labels, images), its
wave, the resource options the engine acts on (and the transforms a chart's children go
through), where components/**/*.py declare its name, what it waits for and why, where each edge
comes from (the `needs` of its Step or Process, its service's configs, an input computed
from a generated secret, its parent component), and what waits for it.
"""

from __future__ import annotations

import difflib
import json
import sys
from dataclasses import dataclass

from tools.edge_reasons import EdgeSources, declared_needs
from tools.plan import Plan
from tools.plan_graph import service_of, short_type, wave_numbers
from tools.runtime import Registration
from tools.source_index import Found, locate

LABELS = ("app.kubernetes.io/name", "app.kubernetes.io/component", "openstack.org/node-group")


class UnknownNameError(LookupError):
    def __init__(self, name: str, close: list[str]):
        super().__init__(name)
        self.name, self.close = name, close

    def __str__(self) -> str:
        hint = f"; did you mean {', '.join(self.close)}?" if self.close else ""
        return f"no object named {self.name!r} in the plan{hint}"


@dataclass(frozen=True)
class Query:
    name: str
    kind: str | None = None  # "Kind/name" picks one of several objects of the same name

    @classmethod
    def parse(cls, text: str) -> Query:
        kind, _, name = text.rpartition("/")
        return cls(name, kind or None)


def named(plan: Plan, text: str) -> list[Registration]:
    """The objects a NAME (or Kind/NAME) means: Kubernetes objects, or an operator's chart."""
    query = Query.parse(text)
    found = [
        r
        for r in plan.custom
        if (r.k8s_name or (r.name if r.remote else None)) == query.name
        and (query.kind is None or short_type(r).lower() == query.kind.lower())
    ]
    if not found:
        names = sorted({r.k8s_name or r.name for r in plan.custom if r.k8s_name or r.remote})
        raise UnknownNameError(text, difflib.get_close_matches(query.name, names, n=5, cutoff=0.6))
    return found


def images(r: Registration) -> list[str]:
    spec = r.inputs.get("spec") or {}
    template = (spec.get("jobTemplate") or {}).get("spec", spec).get("template") or {}
    pod = template.get("spec") or {}
    return list(dict.fromkeys(c["image"] for c in (*pod.get("initContainers", []), *pod.get("containers", []))))


GENERATED = ("RandomPassword", "RandomBytes")
# Jobs and workloads first, then what it reads, then where it lives.
ORDER = ("Job", "CronJob", "Deployment", "DaemonSet", "StatefulSet", "MariaDB", "RabbitmqCluster")


def _order(r: Registration) -> tuple[int, str]:
    kind = short_type(r)
    rank = 0 if kind in ORDER or r.remote else 1 if kind in ("Secret", "ConfigMap") else 2
    return rank, f"{kind} {r.k8s_name or r.name}"


def _what(r: Registration) -> str:
    return f"{short_type(r)} {r.k8s_name or r.name}"


def _row(what: str, why: str, source: str) -> str:
    return f"  {what:<42} {why}\n  {'':<42}   ({source})"


def _declaration(found: Found, fallback: Found | None, component: str | None) -> list[str]:
    lines = [f"  declared   {site}" for site in found.declared]
    lines += [f"  filled in  {site}" for site in found.filled_in]
    if not found.declared and fallback is not None and fallback.declared:
        lines.append(
            f"  declared   no literal or f-string in components/ spells the whole name; its pod {component!r}:"
        )
        lines += [f"             {site}" for site in fallback.declared]
    if not lines:
        lines.append("  declared   no declaration found in components/**/*.py")
    lines += [f"  named at   {site}" for site in found.mentioned[:3]]
    if len(found.mentioned) > 3:
        lines.append(f"             ... and {len(found.mentioned) - 3} more places")
    return lines


def _options(r: Registration) -> list[str]:
    """What the engine does with it beyond its inputs, one line per option it sets."""
    lines = []
    for name, value in r.options().items():
        if name == "transforms":
            whose = "its children (charts and manifests are not expanded offline)" if r.remote else "it"
            lines.append(f"  options    transforms of {whose}:")
            lines += [f"             - {does}" for does in value]
        elif value is True:
            lines.append(f"  options    {name}")
        elif isinstance(value, dict):
            lines.append(f"  options    {name} " + ", ".join(f"{k}={v}" for k, v in value.items()))
        else:
            shown = ", ".join(json.dumps(v, sort_keys=True) if isinstance(v, dict) else str(v) for v in value)
            lines.append(f"  options    {name} {shown}")
    return lines


def _descendants(plan: Plan, urn: str) -> set[str]:
    """Everything that waits for `urn`, directly or through others."""
    waiters: dict[str, list[str]] = {}
    for waiter, deps in plan.dependencies.items():
        for dep in deps:
            waiters.setdefault(dep, []).append(waiter)
    seen: set[str] = set()
    stack = list(waiters.get(urn, ()))
    while stack:
        current = stack.pop()
        if current not in seen:
            seen.add(current)
            stack.extend(waiters.get(current, ()))
    return seen


def explain_one(plan: Plan, r: Registration, sources: EdgeSources, waves: dict[str, int]) -> str:
    by_urn = sources.by_urn
    labels = (r.inputs.get("metadata") or {}).get("labels") or {}
    header = f"{short_type(r)} {r.k8s_name or r.name}" + (f" (namespace {r.namespace})" if r.namespace else "")
    lines = [header]
    shown = ", ".join(f"{k}={labels[k]}" for k in LABELS if k in labels)
    lines.append(f"  labels     {shown or 'none'}" + ("" if labels else f" (service {service_of(r, by_urn)})"))
    lines += [f"  image      {image}" for image in images(r)]
    lines.append(f"  wave       {waves[r.urn]} of {max(waves.values())}")
    lines.append(f"  urn        {r.urn}")
    lines += _options(r)
    node = sources.node(r)
    needs = declared_needs(node) if node else None
    if needs:
        lines.append(f"  needs      {', '.join(needs.needs) or '(nothing)'}: {needs}")
    component = labels.get("app.kubernetes.io/component")
    found = locate(r.k8s_name or r.name)
    fallback = locate(component) if component and not found.declared else None
    lines += _declaration(found, fallback, component)
    deps = sorted((by_urn[d] for d in plan.dependencies[r.urn]), key=_order)
    lines.append(f"waits for ({len(deps)}):" if deps else "waits for nothing")
    generated = [d for d in deps if short_type(d) in GENERATED]
    lines += [_row(_what(d), sources.reason(r, d), sources.source(r, d)) for d in deps if d not in generated]
    if generated:
        # One row for them all: each gives the same reason, an input computed from its value.
        why = sources.reason(r, generated[0]).replace(f" ({generated[0].name})", "")
        why = why.replace("this generated secret", "them")
        lines.append(_row(f"{len(generated)} generated secrets", why, sources.source(r, generated[0])))
        lines.append(f"  {'':<42}   ({', '.join(d.name for d in generated)})")
    waiters = [x for x in plan.custom if r.urn in plan.dependencies[x.urn]]
    every = _descendants(plan, r.urn)
    if waiters:
        lines.append(f"waited for by ({len(waiters)} directly, {len(every)} in all):")
        lines += [_row(_what(w), sources.reason(w, r), sources.source(w, r)) for w in waiters]
    else:
        lines.append("nothing waits for it")
    return "\n".join(lines)


def explain(plan: Plan, text: str) -> str:
    found = named(plan, text)
    sources, waves = EdgeSources(plan), wave_numbers(plan)
    parts = [explain_one(plan, r, sources, waves) for r in found]
    if len(found) > 1:
        kinds = ", ".join(short_type(r) for r in found)
        first = f"{len(found)} objects are named {text!r}: {kinds} (pick one with Kind/{text})"
        parts.insert(0, first)
    return "\n\n".join(parts)


def main(plan: Plan, text: str) -> int:
    try:
        print(explain(plan, text))
    except UnknownNameError as error:
        print(f"error: stack {plan.stack}: {error}", file=sys.stderr)
        return 2
    return 0
