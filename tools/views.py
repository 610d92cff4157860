"""What `make plan` writes besides plan.json and manifests.yaml, and --explain.

The plan tool calls `write` once its own files are written: configs.json (the config
files, secrets masked), graph.svg and graph.md (the deploy graph drawn), graph.txt (the
graph with every edge's reason, as `--graph` prints it) and, with --against DIR,
diff.md and diff.json (what changes against that earlier plan).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from tools import ca_rotation_view, certificate_impact, diff_report, graph_draw, plan_diff, upgrade_view
from tools.plan import Plan
from tools.plan_configs import configs, secret_values
from tools.plan_graph import DeployGraphView, graph_waves


class SecretLeakError(RuntimeError):
    pass


def _plan_directory(text: str) -> Path:
    if not (Path(text) / "plan.json").is_file():
        raise argparse.ArgumentTypeError(f"{text} holds no plan.json (an output directory of tools.plan)")
    return Path(text)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--explain", metavar="NAME", help="explain one object (or Kind/NAME): what it waits for and why"
    )
    parser.add_argument(
        "--graph",
        action="store_true",
        help="print the deploy graph (components/cloud/graph.py): per wave, each object and why it waits",
    )
    parser.add_argument(
        "--against",
        type=_plan_directory,
        metavar="DIR",
        help="an earlier plan's output directory: write diff.md and diff.json of what changes against it",
    )


def graph_text(plan: Plan) -> str:
    return "\n".join(plan.graph.lines(graph_waves(plan))) + "\n"


def diff_result(earlier: plan_diff.PlanView, plan: Plan) -> dict[str, Any]:
    """diff.json: what `pulumi up` of `plan` changes against an earlier plan (the lab's apply checks it)."""
    now = plan_diff.view_of(plan)
    result = plan_diff.diff(earlier, now)
    result["certificates"] = certificate_impact.reissued(earlier, now)
    result["ca_rotation"] = ca_rotation_view.change(earlier, now)
    listed = upgrade_view.steps(plan)
    if listed is not None and plan.settings.upgrade is not None:
        result["upgrade"] = {
            "from": plan.settings.upgrade.from_release,
            "to": plan.settings.release,
            "steps": upgrade_view.annotate(listed, result),
            "then_rolls": upgrade_view.rolled_after(plan),
        }
    return result


def write(plan: Plan, out: Path, against: Path | None = None) -> list[Path]:
    """Write the views of a plan into `out`; the files written."""
    graph = DeployGraphView(plan)
    title = f"Deploy graph of stack {plan.stack} ({plan.settings.hypervisor_isolation.value}): waves left to right"
    written = {
        "configs.json": json.dumps(configs(plan), indent=1, sort_keys=True) + "\n",
        "graph.svg": graph_draw.svg(graph, title),
        "graph.md": graph_draw.markdown(graph, plan.stack),
        "graph.txt": graph_text(plan),
    }
    if against is not None:
        result = diff_result(plan_diff.load(against), plan)
        written["diff.json"] = json.dumps(result, indent=1) + "\n"
        written["diff.md"] = diff_report.render(result, f"`{against}`")
        # The diff is made from masked data only; check it, since it is posted on pull requests.
        leaked = [s for s in secret_values(plan) for name in ("diff.json", "diff.md") if s in written[name]]
        if leaked:
            raise SecretLeakError(f"the plan diff would show {len(leaked)} secret value(s); nothing written")
    for name, text in written.items():
        (out / name).write_text(text)
    return [out / name for name in written]
