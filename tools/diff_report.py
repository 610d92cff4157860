"""diff.md: the plan diff as a pull request comment (GitHub renders it; 65,536 characters at most)."""

from __future__ import annotations

import json
from typing import Any

from tools import ca_rotation_view, certificate_impact, upgrade_view

# GitHub refuses longer comments; config diffs past this are left to diff.json.
MAX_CHARS = 60_000
LISTED = 40
DATA_REPLACED = (
    "Secrets and ConfigMaps whose data changes are deleted and created again under the same name "
    "(pulumi-kubernetes, unless the provider sets enableSecretMutable / enableConfigMapMutable); "
    "pods that mount them roll through their config checksum, above."
)  # objects listed per section before "... and N more"


# What a replacement of an object Pulumi keeps on delete does: pulumi-kubernetes deletes a named
# object before creating its replacement (provider.go, Diff); retained, the old one stays, and
# creating the new one under its name fails while it is there.
RETAINED_REPLACED = (
    "Marked (retained): retainOnDelete, so the old object stays in the cluster with its data (a claim: its "
    "volume) and `pulumi up` cannot create the new one under the same name until it is removed by hand; "
    "move the data first."
)


def _ref(o: dict[str, Any]) -> str:
    return f"{o['kind']} `{o['name']}`"


def _kept(o: dict[str, Any]) -> str:
    """What a replaced or removed object's options keep in the cluster."""
    notes = ["retained"] if o.get("retained") else []
    notes += [f"its children: {does}" for does in o.get("children", [])]
    return f" ({'; '.join(notes)})" if notes else ""


def _listing(objects: list[dict[str, Any]], detail: str | None = None) -> list[str]:
    lines = []
    for o in objects[:LISTED]:
        extra = f": {', '.join(f'`{f}`' for f in o[detail][:4])}" if detail and o.get(detail) else ""
        more = f" (+{len(o[detail]) - 4})" if detail and len(o.get(detail) or []) > 4 else ""
        lines.append(f"- {_ref(o)}{extra}{more}{_kept(o)}")
    if len(objects) > LISTED:
        lines.append(f"- ... and {len(objects) - LISTED} more (diff.json)")
    return lines


def _value(value: Any) -> str:
    text = json.dumps(value, sort_keys=True)
    return text if len(text) <= 80 else text[:77] + "..."


def render(diff: dict[str, Any], against: str) -> str:
    counts = {k: len(diff[k]) for k in ("added", "changed", "replaced", "removed")}
    counts["with new options"] = len(diff["options"])
    out = [f"### Plan diff of stack `{diff['stack']}` against {against}", ""]
    if diff["against_stack"] != diff["stack"]:
        out += [f"(The earlier plan is of stack `{diff['against_stack']}`.)", ""]
    if not diff["options_compared"]:
        out += ["The earlier plan recorded no resource options (an older tools.plan): they were not compared.", ""]
    if not diff["configs_compared"]:
        out += [
            "The earlier plan has no configs.json (an older tools.plan): Secrets and config files were not compared.",
            "",
        ]
    if not any(counts.values()) and not diff["config_files"]:
        return "\n".join([*out, "No object changes.", ""])
    out.append(", ".join(f"{n} {k}" for k, n in counts.items()) + ".")
    out.append("")
    if diff["settings"]:
        out += ["**Settings**", ""]
        out += [f"- `{s['setting']}`: `{_value(s['before'])}` → `{_value(s['after'])}`" for s in diff["settings"][:20]]
        out.append("")
    if diff.get("upgrade"):
        upgrade = diff["upgrade"]
        out += upgrade_view.render(upgrade["from"], upgrade["to"], upgrade["steps"], upgrade["then_rolls"])
    vms = diff["vms"]
    out += ["**Running VMs**", "", vms["verdict"], ""]
    if vms["touched"]:
        out += [f"- DaemonSet `{t['name']}` ({', '.join(t['holds'])}): {t['why']}" for t in vms["touched"]]
        rows = [(t, v) for t, v in vms["per_topology"].items() if len(v) > 1]
        out += ["", "| topology | what restarting these pods does |", "| --- | --- |"]
        for topology, effects in rows:
            mark = " (this stack)" if topology == vms["topology"] else ""
            said = "; ".join(f"{k}: {v}" for k, v in effects.items() if k != "option")
            out.append(f"| `{topology}` ({effects['option']}){mark} | {said} |")
        out.append("")
    out += ["**Pods that roll**", ""]
    out += [f"- {_ref(r)}: {r['how']}; {'; '.join(r['why'])}" for r in diff["rolls"]] or ["- none"]
    out += ["", *ca_rotation_view.render(diff.get("ca_rotation"))]
    out += certificate_impact.render(diff.get("certificates") or [])
    out += ["", "**Jobs that run**", ""]
    out += [f"- {_ref(j)} {j['runs']}" + (f": {'; '.join(j['why'])}" if j["why"] else "") for j in diff["jobs"]]
    if not diff["jobs"]:
        out.append("- none")
    out.append("")
    for section, detail in (("added", None), ("replaced", "immutable"), ("changed", "fields"), ("removed", None)):
        if diff[section]:
            out += [f"**{section.capitalize()}**", "", *_listing(diff[section], detail), ""]
        if section == "replaced" and any(o["kind"] in ("Secret", "ConfigMap") for o in diff[section]):
            out += [DATA_REPLACED, ""]
        if section == "replaced" and any(o.get("retained") for o in diff[section]):
            out += [RETAINED_REPLACED, ""]
    if diff["unapplied"]:
        out += ["**Changes the operators do not apply to what exists**", ""]
        out += [
            f"- {_ref(u)}: `{u['field']}` `{_value(u['before'])}` → `{_value(u['after'])}`: {u['why']}"
            for u in diff["unapplied"]
        ]
        out.append("")
    if diff["options"]:
        out += ["**Resource options** (what a later delete or replacement does)", ""]
        for o in diff["options"][:LISTED]:
            said = "; ".join(f"`{c['option']}`: `{_value(c['before'])}` → `{_value(c['after'])}`" for c in o["changes"])
            out.append(f"- {_ref(o)}: {said}")
        out.append("")
    return _with_configs(out, diff)


def _with_configs(out: list[str], diff: dict[str, Any]) -> str:
    files = diff["config_files"]
    if files:
        out += ["**Config files** (secret values masked)", ""]
    text, left = "\n".join(out), 0
    for change in files:
        title = f"{change['kind']} {change['name']}: {change['key']} ({change['change']})"
        if change["diff"] is None:
            block = f"- {title}: a secret value, not shown\n"
        else:
            block = f"<details><summary>{title}</summary>\n\n```diff\n{change['diff']}```\n\n</details>\n"
        if len(text) + len(block) > MAX_CHARS:
            left += 1
            continue
        text += "\n" + block
    if left:
        text += f"\n{left} more config file diffs are in diff.json (this comment has a size limit).\n"
    return text
