"""The offline plan: what `pulumi up` would create for a stack, without a CLI or a cluster.

    python -m tools.plan --stack dev --out build/dev [--show-secrets] [--stack-file PATH] [--against DIR]
    python -m tools.plan --stack dev --explain NAME

Runs the real program under the mock runtime, writes plan.json and manifests.yaml,
validates every built-in object against the stack's Kubernetes API schema, runs the
policy pack over the result with the stack's policy config (derived from its settings by
tools/policy_config.py, and written as policy-config.json), and prints a summary with the
deploy waves. tools/views.py adds the deploy graph (graph.svg, graph.md), the masked config
files (configs.json), the diff against an earlier plan (--against: diff.md, diff.json) and
--explain.
"""

from __future__ import annotations

import argparse
import gc
import json
import sys
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cache, cached_property
from pathlib import Path
from typing import Any

import kubernetes_validate

from components.cloud.graph import CloudGraph, cloud_graph
from components.cloud.stack_config import settings_from_config
from components.settings.model import PROJECT, Settings, SettingsError
from policies.report import check_resources
from policies.settings import ConfigError
from tools import command_line, manifest_yaml, schemas
from tools.policy_config import policy_config, render
from tools.runtime import SECRET_MARK, Registration, run_program, stack_config, stack_with
from tools.stack_secrets import SecretText


@dataclass
class Plan:
    """A planned stack; what it derives from its registrations is computed once (tests ask often)."""

    stack: str
    settings: Settings
    registrations: list[Registration]
    dependencies: dict[str, list[str]]  # urn → custom resources the engine waits for
    secret_settings: frozenset[str] = frozenset()  # settings the stack file holds as secrets (`secure:`)

    def shown_settings(self, *, reveal: bool) -> dict[str, Any]:
        """The settings as plan.json writes them: a secret one as [secret] unless revealed."""
        dumped = self.settings.model_dump(mode="json", by_alias=True)
        return dumped if reveal else {k: SECRET_MARK if k in self.secret_settings else v for k, v in dumped.items()}

    @cached_property
    def graph(self) -> CloudGraph:
        """The deploy graph the program walked to create these resources."""
        return cloud_graph(self.settings)

    @cached_property
    def custom(self) -> list[Registration]:
        """What the engine creates: custom resources, and remote components (charts) without children."""
        return [r for r in self.registrations if r.custom or (r.remote and not self._children.get(r.urn))]

    @cached_property
    def _children(self) -> dict[str, list[Registration]]:
        children: dict[str, list[Registration]] = {}
        for r in self.registrations:
            children.setdefault(r.parent, []).append(r)
        return children

    @cached_property
    def _named(self) -> dict[str | None, list[Registration]]:
        named: dict[str | None, list[Registration]] = {}
        for r in self.custom:
            named.setdefault(r.k8s_name, []).append(r)
        return named

    def by_name(self, k8s_name: str, kind: str | None = None) -> Registration:
        found = [r for r in self._named.get(k8s_name, ()) if kind is None or r.kind == kind]
        if len(found) != 1:
            raise KeyError(f"{len(found)} objects named {k8s_name!r}" + (f" of kind {kind}" if kind else ""))
        return found[0]

    def ancestors(self, urn: str) -> set[str]:
        """Everything `urn` waits for, directly or through others."""
        seen: set[str] = set()
        stack = list(self.dependencies.get(urn, ()))
        while stack:
            current = stack.pop()
            if current not in seen:
                seen.add(current)
                stack.extend(self.dependencies.get(current, ()))
        return seen

    def waves(self) -> list[list[Registration]]:
        """Deploy order as waves: everything whose dependencies are met starts together."""
        return [list(wave) for wave in self._waves]

    @cached_property
    def _waves(self) -> list[list[Registration]]:
        remaining = {r.urn: r for r in self.custom}
        done: set[str] = set()
        waves = []
        while remaining:
            ready = [r for urn, r in remaining.items() if set(self.dependencies[urn]) <= done]
            if not ready:
                raise ValueError(f"dependency cycle among: {', '.join(sorted(remaining))}")
            waves.append(sorted(ready, key=lambda r: (r.kind or r.type, r.name)))
            for r in ready:
                done.add(r.urn)
                del remaining[r.urn]
        return waves


def engine_dependencies(registrations: list[Registration]) -> dict[str, list[str]]:
    """The custom resources each custom resource waits for, as the engine orders them.

    An edge to a component stands for all of its custom descendants; an edge declared on a
    component is inherited by everything inside it.
    """
    by_urn = {r.urn: r for r in registrations}
    children: dict[str, list[str]] = {}
    for r in registrations:
        children.setdefault(r.parent, []).append(r.urn)

    @cache  # a component's leaves, asked again for everything that waits for it or inherits from it
    def leaves(urn: str) -> list[str]:
        node = by_urn.get(urn)
        if node is None:
            return []
        if node.custom:
            return [urn]
        below = [leaf for child in children.get(urn, []) for leaf in leaves(child)]
        return below or ([urn] if node.remote else [])

    @cache
    def declared(urn: str) -> list[str]:
        node = by_urn[urn]
        inherited = declared(node.parent) if node.parent in by_urn else []
        return node.dependencies + inherited

    result = {}
    for r in registrations:
        if r.custom or (r.remote and not children.get(r.urn)):
            waits = [leaf for dep in declared(r.urn) for leaf in leaves(dep) if leaf != r.urn]
            result[r.urn] = list(dict.fromkeys(waits))
    return result


def build_plan(stack: str, overrides: dict[str, Any] | None = None, stack_path: Path | None = None) -> Plan:
    """The plan of a stack; `overrides` change `openstack:` settings, `stack_path` reads its file elsewhere.

    Settings are read as the program reads them (components.cloud.stack_config), from what the CLI
    would pass it: a stack that the program would refuse raises SettingsError here first.
    """
    config = stack_with(stack_config(stack, stack_path), overrides)
    secret = frozenset(key for key, value in config.items() if isinstance(value, SecretText))
    settings = settings_from_config(config, secret)
    registrations = run_program(config, stack)
    hidden = frozenset(key.partition(":")[2] for key in secret if key.startswith(f"{PROJECT}:"))
    return Plan(stack, settings, registrations, engine_dependencies(registrations), hidden)


def manifests(plan: Plan, *, reveal: bool) -> list[dict[str, Any]]:
    """Every Kubernetes object, in an order that respects the dependencies."""
    ordered = [r for wave in plan.waves() for r in wave if r.kind]
    return [r.revealed if reveal else masked(r.inputs, r.revealed) for r in ordered]


def masked(shown: Any, revealed: Any) -> Any:
    """`shown` with each secret masked where its value sits, so the manifest stays valid: a secret
    mapping (a Secret's stringData) keeps its keys, each value [secret], and a secret in `data`,
    which the API server reads as base64, goes to stringData like the rest."""
    if shown == SECRET_MARK and isinstance(revealed, dict):
        return {key: SECRET_MARK for key in revealed}
    if isinstance(shown, dict) and isinstance(revealed, dict):
        result = {key: masked(value, revealed.get(key)) for key, value in shown.items()}
        data = result.get("data")
        if result.get("kind") == "Secret" and isinstance(data, dict) and SECRET_MARK in data.values():
            hidden = {key: value for key, value in data.items() if value == SECRET_MARK}
            result["data"] = {key: value for key, value in data.items() if key not in hidden} or None
            result["stringData"] = {**(result.get("stringData") or {}), **hidden}
            if result["data"] is None:
                del result["data"]
        return result
    if isinstance(shown, list) and isinstance(revealed, list):
        return [masked(value, other) for value, other in zip(shown, revealed, strict=False)]
    return shown


def validate(plan: Plan) -> tuple[list[str], list[str]]:
    """(errors, not validated) for every built-in object against the stack's API schemas."""
    version = f"{plan.settings.kubernetes_version}.0"
    errors, skipped = [], []
    for r in plan.custom:
        if not r.kind:
            continue
        try:
            schemas.validate(r.revealed, version, strict=True)
        except kubernetes_validate.SchemaNotFoundError:
            skipped.append(f"{r.kind} {r.k8s_name} ({r.inputs.get('apiVersion')}: custom resource, no schema)")
        except kubernetes_validate.ValidationError as error:
            path = ".".join(str(p) for p in error.path)
            errors.append(f"{r.kind} {r.k8s_name}: {path}: {error.message}")
    return errors, skipped


def policy_report(plan: Plan, config: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """The policy pack's resource and stack rules over the planned stack, as the CLI would run them
    with `config` (by default the one derived from the stack's settings)."""
    resources = [resource_record(r, plan) for r in plan.registrations]
    return [v.to_dict() for v in check_resources(resources, policy_config(plan.settings) if config is None else config)]


def resource_record(r: Registration, plan: Plan, reveal: bool = False) -> dict[str, Any]:
    return {
        "urn": r.urn,
        "type": r.type,
        "name": r.name,
        "parent": r.parent,
        "custom": r.custom,
        "dependencies": plan.dependencies.get(r.urn, []),
        "kind": r.kind,
        "k8s_name": r.k8s_name,
        "namespace": r.namespace,
        "inputs": r.revealed if reveal else r.inputs,
        # What the engine does beyond the inputs (keep on delete, replace how, wait how long, the
        # transforms a chart's children go through): the plan diff compares these too.
        "options": r.options(),
    }


def main(argv: list[str] | None = None) -> int:
    from tools import views  # it builds on this module

    parser = argparse.ArgumentParser(prog="python -m tools.plan", description=__doc__.split("\n\n")[0])
    parser.add_argument("--stack", required=True, help="a stack in stacks/Pulumi.<stack>.yaml")
    parser.add_argument("--out", type=Path, help="directory for plan.json, manifests.yaml and the views")
    parser.add_argument("--show-secrets", action="store_true", help="write secret values instead of [secret]")
    parser.add_argument(
        "--stack-file",
        type=Path,
        help="read the stack's settings from this file instead of stacks/Pulumi.<stack>.yaml "
        "(the policy config follows from them too)",
    )
    views.add_arguments(parser)
    args = parser.parse_args(argv)
    if not args.out and not args.explain and not args.graph:
        parser.error("--out is required (unless --explain or --graph)")
    with young_collections_only():
        return _plan(args)


@contextmanager
def young_collections_only() -> Iterator[None]:
    """No full garbage collections for a while (young ones go on).

    A plan's objects mostly live to its end, and each full collection walks all of them and
    everything imported: a quarter of a large plan's time. The short-lived cycles asyncio
    leaves are freed by the young collections, so memory stays as it was.
    """
    thresholds = gc.get_threshold()
    gc.set_threshold(5000, 10, 1_000_000)
    try:
        yield
    finally:
        gc.set_threshold(*thresholds)


def _plan(args: argparse.Namespace) -> int:
    from tools import explain, release_change, views  # they build on this module

    try:
        plan = build_plan(args.stack, stack_path=args.stack_file)
        if args.against is not None:  # the release deployed now: a change of it must be an upgrade
            deployed = json.loads((args.against / "plan.json").read_text())["settings"].get("release")
            refused = release_change.problem(deployed, plan.settings, str(args.against))
            if refused:
                print(f"error: stack {args.stack}: {refused}", file=sys.stderr)
                return 2
        if args.explain:
            return explain.main(plan, args.explain)
        if args.graph:
            print(views.graph_text(plan), end="")
            return 0
        config = policy_config(plan.settings)
        config_text = render(config)  # checked against the pack's schemas
        violations = policy_report(plan, config)
    except (SettingsError, FileNotFoundError, ConfigError) as error:
        print(f"error: stack {args.stack}: {error}", file=sys.stderr)
        return 2
    errors, skipped = validate(plan)
    args.out.mkdir(parents=True, exist_ok=True)
    document = {
        "stack": plan.stack,
        "settings": plan.shown_settings(reveal=args.show_secrets),
        "resources": [resource_record(r, plan, args.show_secrets) for r in plan.registrations],
        "policy": violations,
    }
    (args.out / "plan.json").write_text(json.dumps(document, indent=2) + "\n")
    (args.out / "manifests.yaml").write_text(manifest_yaml.dump_all(manifests(plan, reveal=args.show_secrets)))
    (args.out / "policy-config.json").write_text(config_text)
    summarize(plan, errors, skipped, violations, args.out)
    print(f"wrote {', '.join(str(p) for p in views.write(plan, args.out, args.against))}")
    mandatory = [v for v in violations if v["enforcement"] == "mandatory"]
    for invalid in errors:
        print(f"invalid manifest: {invalid}", file=sys.stderr)
    for violation in mandatory:
        print(f"mandatory policy violation: {violation['message']}", file=sys.stderr)
    return 1 if errors or mandatory else 0


def summarize(plan: Plan, errors: list[str], skipped: list[str], violations: list[dict], out: Path) -> None:
    kinds = Counter(r.kind or r.type for r in plan.custom)
    topology = plan.settings.hypervisor_isolation.value
    print(f"stack {plan.stack}: {len(plan.custom)} objects ({topology}, ha={plan.settings.ha})")
    for kind, count in sorted(kinds.items()):
        print(f"  {count:4d} {kind}")
    print("deploy waves (Jobs and workloads; each wave starts when the previous one is done):")
    shown = {"Job", "Deployment", "DaemonSet", "StatefulSet", "MariaDB", "RabbitmqCluster"}
    for number, wave in enumerate(plan.waves(), 1):
        names = [r.k8s_name or r.name for r in wave if (r.kind in shown) or r.remote]
        if names:
            print(f"  wave {number:2d}: {', '.join(names)}")
    version = plan.settings.kubernetes_version
    print(f"schema validation against Kubernetes {version}: {len(errors)} invalid, {len(skipped)} not validated")
    for line in skipped:
        print(f"  not validated: {line}")
    advisory = sum(1 for v in violations if v["enforcement"] == "advisory")
    print(f"policy: {len(violations) - advisory} mandatory, {advisory} advisory violation(s)")
    print(f"wrote {out / 'plan.json'}, {out / 'manifests.yaml'} and {out / 'policy-config.json'}")


if __name__ == "__main__":
    command_line.run(main)
