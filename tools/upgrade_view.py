"""`--against` on a release upgrade: the upgrade as its steps, in order, with what each touches.

The steps are the program's own (components/cloud/upgrade.py, the same data that orders the deploy
graph); each is joined with what the plan diff says happens to its object under `pulumi up`:
a Job that runs (new) or re-runs, a workload that rolls, or nothing, because an earlier
`pulumi up` of this upgrade already completed it with the same spec (a resumed upgrade).
"""

from __future__ import annotations

from typing import Any

from components.cloud import upgrade
from tools.plan import Plan


def steps(plan: Plan) -> list[dict[str, Any]] | None:
    """The plan's upgrade steps in order, or None when the plan upgrades nothing."""
    if plan.settings.upgrade is None:
        return None
    return [
        {"phase": s.phase, "kind": s.kind, "name": s.name, "service": s.service, "touches": s.touches}
        for s in upgrade.steps(plan.graph.specs, plan.settings)
    ]


def annotate(listed: list[dict[str, Any]], diff: dict[str, Any]) -> list[dict[str, Any]]:
    """Each step with what `pulumi up` does to its object, as the diff predicts it."""
    jobs = {j["name"]: j["runs"] for j in diff["jobs"] if j["kind"] == "Job"}
    rolls = {r["name"]: r["how"] for r in diff["rolls"]}
    added = {(a["kind"], a["name"]) for a in diff["added"]}
    said = []
    for step in listed:
        name = step["name"]
        if step["kind"] == "Job":
            happens = jobs.get(name, "completed before with this spec: not run again")
        elif step["kind"] == "Backup":
            happens = "taken (new)" if ("Backup", name) in added else "taken before: not taken again"
        else:
            happens = rolls.get(name, "no change")
        said.append({**step, "happens": happens})
    return said


def rolled_after(plan: Plan) -> list[str]:
    """What the `pulumi up` that removes `upgrade.from` rolls again (components/cloud/upgrade.py)."""
    return list(upgrade.rolled_after(plan.graph.specs, plan.settings))


def render(from_release: str, to_release: str, said: list[dict[str, Any]], then: list[str]) -> list[str]:
    """The diff.md section: a numbered list, phase by phase, and what the next `pulumi up` rolls."""
    out = [f"**Upgrade {from_release} → {to_release}, step by step** (components/cloud/upgrade.py)", ""]
    for number, step in enumerate(said, 1):
        out.append(f"{number}. {step['phase']}: {step['kind']} `{step['name']}`: {step['touches']}; {step['happens']}")
    if then:
        rolled = ", ".join(f"`{name}`" for name in then)
        out += [
            "",
            f"Then remove `upgrade.from` and `pulumi up`: it rolls {rolled} once more, so they drop the "
            f"RPC versions of {from_release}'s services they cached during the upgrade.",
        ]
    return [*out, ""]
