"""What the Pulumi engine does with each object when a stack's program changes: its step, and the deletes' order.

From the engine (pkg/resource/deploy/step_generator.go) and pulumi-kubernetes' Diff
(provider/pkg/provider/provider.go): each object of the new program is matched with the one in
the stack by URN (tools/plan_configs.py object_key) and diffed on its inputs, secrets included,
less its `ignoreChanges` (the engine diffs those with their old value). Unchanged is a *same*
step: nothing happens and nothing is awaited. A change of a field pulumi-kubernetes cannot update
in place (tools/plan_diff.py FORCE_NEW: a Job's template and completions, a selector, Secret and
ConfigMap data, the name) or of a `replaceOnChanges` path is a *replacement*, any other change an
*update*. An object only the old program has is a *delete*, done after every other step,
dependents first. tools/plan_diff.py reads the same table from masked inputs for `--against`;
here the inputs are the revealed ones, as the engine sends them to the provider.
"""

from __future__ import annotations

from dataclasses import dataclass

from tools.plan_configs import object_key
from tools.plan_diff import changed_paths, forces_new, show, template_path, under_property
from tools.runtime import Registration


@dataclass(frozen=True)
class Step:
    """What the engine does with one object."""

    op: str  # same, create, update, replace, delete
    kind: str
    name: str
    fields: tuple[str, ...] = ()  # what changed
    forced: tuple[str, ...] = ()  # what of it forces the replacement
    template: bool = False  # its pod template changed

    @property
    def ref(self) -> str:
        return f"{self.kind}/{self.name}"


def step_of(old: Registration | None, new: Registration | None) -> Step:
    """The engine's step for one object: in the old plan, the new one, or both."""
    if new is None:
        assert old is not None
        return Step("delete", _kind(old), old.k8s_name or old.name)
    kind, name = _kind(new), new.k8s_name or new.name
    if old is None:
        return Step("create", kind, name)
    paths = [
        p for p in changed_paths(old.revealed, new.revealed)
        if not any(under_property(p, declared) for declared in new.ignore_changes)
    ]  # fmt: skip
    if not paths:
        return Step("same", kind, name)
    options = {"kind": kind, "options": {"replaceOnChanges": new.replace_on_changes}}
    forced = [p for p in paths if forces_new(options, p) or new.type.startswith("random:")]
    template = any(template_path(p) is not None for p in paths)
    shown = tuple(show(p) for p in paths)
    return Step("replace" if forced else "update", kind, name, shown, tuple(show(p) for p in forced), template)


def _kind(r: Registration) -> str:
    """A Kubernetes object's kind, or the last part of another resource's type (RandomPassword), as
    tools/plan_diff.py names them."""
    return r.kind or r.type.rsplit(":", 1)[-1]


def engine_steps(old: list[Registration], new: list[Registration]) -> dict[str, Step]:
    """object key → the engine's step, for every object of either plan."""
    before = {object_key(r.urn): r for r in old}
    after = {object_key(r.urn): r for r in new}
    return {key: step_of(before.get(key), after.get(key)) for key in sorted(before.keys() | after.keys())}


def delete_order(removed: list[Registration], dependencies: dict[str, list[str]]) -> list[Registration]:
    """The removed objects, dependents before what they depend on (the engine deletes in reverse order)."""
    pending = {r.urn: r for r in removed}
    ordered: list[Registration] = []
    while pending:
        # Deletable: nothing still pending depends on it.
        free = sorted(
            (r for urn, r in pending.items() if not any(urn in dependencies.get(o, ()) for o in pending if o != urn)),
            key=lambda r: r.urn,
        )
        if not free:
            raise ValueError(f"dependency cycle among removed objects: {', '.join(sorted(pending))}")
        for r in free:
            ordered.append(r)
            del pending[r.urn]
    return ordered
