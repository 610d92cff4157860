"""How long the offline plan takes: a real stack, and that stack with many compute node groups.

    python -m tools.bench [--runs 5] [--groups 1,10,100,500] [--base prod]

Each run is a fresh process, as `make plan` is. It first imports every module a plan
imports (found once by a plan in a process of its own), then times what `make plan` does
(tools.plan.main: the program under the mock runtime, schema validation, the policy pack,
plan.json and manifests.yaml written, the summary). So a run measures the plan's own work
beyond Python's start-up and imports, with nothing cached from an earlier run.

The synthetic stacks are the base stack's file with `openstack:compute.nodeGroups` replaced
by N copies of its first group, each named gN and on nodes labelled
`openstack-compute-group=gN` (disjoint nodeSelectors). Prints a table: per case the median
and the fastest of the runs, and the median's ratio to the one-group stack.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import io
import json
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from components.settings.model import PROJECT
from tools import command_line, plan
from tools.runtime import REPO, stack_file

NODE_GROUPS_KEY = f"{PROJECT}:compute"
GROUP_LABEL = "openstack-compute-group"


def node_groups(document: dict[str, Any]) -> list[dict[str, Any]]:
    """A stack file's compute node groups; without any, the program's one group `default`."""
    compute = (document.get("config") or {}).get(NODE_GROUPS_KEY) or {}
    return compute.get("nodeGroups") or [{"name": "default"}]


def with_node_groups(base: Path, count: int) -> dict[str, Any]:
    """The stack file `base` with `count` compute node groups, copies of its first one."""
    document = yaml.safe_load(base.read_text())
    compute = dict(document["config"].get(NODE_GROUPS_KEY) or {})
    template = node_groups(document)[0]
    compute["nodeGroups"] = [
        {**template, "name": f"g{n}", "nodeSelector": {GROUP_LABEL: f"g{n}"}} for n in range(1, count + 1)
    ]
    return {**document, "config": {**document["config"], NODE_GROUPS_KEY: compute}}


def write_stack(document: dict[str, Any], path: Path) -> Path:
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    return path


@dataclass
class Case:
    name: str
    groups: int
    stack_file: Path
    synthetic: bool = True


@dataclass
class Result:
    case: Case
    wall: list[float]  # seconds per run
    cpu: list[float]  # CPU seconds per run, every thread of the process
    resources: int


def _child(args: list[str]) -> dict[str, Any]:
    """Run this module in a fresh interpreter with `args`; its last stdout line is JSON."""
    done = subprocess.run(
        [sys.executable, "-m", "tools.bench", *args], cwd=REPO, capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        raise SystemExit(f"tools.bench {' '.join(args)} failed:\n{done.stdout}{done.stderr}")
    return json.loads(done.stdout.splitlines()[-1])


def _plan_args(stack: str, stack_path: Path, out: Path) -> list[str]:
    return ["--stack", stack, "--stack-file", str(stack_path), "--out", str(out)]


def _run_plan(stack: str, stack_path: Path, out: Path) -> None:
    with contextlib.redirect_stdout(io.StringIO()):
        code = plan.main(_plan_args(stack, stack_path, out))
    if code != 0:
        raise SystemExit(f"the plan of {stack_path} exited {code}")


def discover_modules(stack: str, stack_path: Path, out: Path) -> list[str]:
    """Every module loaded once a plan has run, in the order they were loaded (child side)."""
    _run_plan(stack, stack_path, out)
    return [name for name in sys.modules if not name.startswith("__")]


def time_plan(stack: str, stack_path: Path, out: Path, modules: list[str]) -> dict[str, Any]:
    """Import `modules`, then time one plan (child side)."""
    for name in modules:
        with contextlib.suppress(Exception):
            # In load order, and each one executed: a lazily imported module (pulumi_kubernetes
            # has many) runs when first touched, and must run before its submodules are imported.
            getattr(importlib.import_module(name), "__name__", None)
    wall, cpu = time.perf_counter(), time.process_time()
    _run_plan(stack, stack_path, out)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    resources = len(json.loads((out / "plan.json").read_text())["resources"])
    return {"wall": wall, "cpu": cpu, "resources": resources}


def measure(stack: str, cases: list[Case], runs: int, work: Path, progress: bool = True) -> list[Result]:
    modules_file = work / "modules.json"
    modules = _child(["--discover", *_plan_args(stack, cases[0].stack_file, work / "discover")])
    modules_file.write_text(json.dumps(modules))
    results = []
    for case in cases:
        result = Result(case, [], [], 0)
        for run in range(runs):
            out = work / f"{case.name}-{run}"
            timed = _child(["--time", str(modules_file), *_plan_args(stack, case.stack_file, out)])
            result.wall.append(timed["wall"])
            result.cpu.append(timed["cpu"])
            result.resources = timed["resources"]
            if progress:
                print(
                    f"  {case.name} run {run + 1}/{runs}: {timed['wall']:.2f} s, {timed['cpu']:.2f} s CPU",
                    file=sys.stderr,
                )
        results.append(result)
    return results


def table(results: list[Result], runs: int) -> str:
    """Medians per case, and their ratio to the one-group stack's."""
    median = statistics.median
    one = next((r for r in results if r.case.groups == 1 and r.case.synthetic), None)

    def ratio(values: list[float], of_one: list[float] | None) -> str:
        return f"{median(values) / median(of_one):.2f}" if of_one else "-"

    lines = [
        f"plan work, median of {runs} run(s), each in a fresh process after its imports",
        "(wall and CPU seconds; x 1 group: the median's ratio to the stack with one node group)",
        f"{'case':<12} {'node groups':>11} {'resources':>9} {'wall s':>7} {'cpu s':>7} "
        f"{'wall x 1 group':>14} {'cpu x 1 group':>13}",
    ]
    for r in results:
        lines.append(
            f"{r.case.name:<12} {r.case.groups:>11} {r.resources:>9} {median(r.wall):>7.2f} {median(r.cpu):>7.2f} "
            f"{ratio(r.wall, one.wall if one else None):>14} {ratio(r.cpu, one.cpu if one else None):>13}"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.bench", description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5, help="runs per case; the table shows their median")
    parser.add_argument("--groups", default="1,10,100,500", help="node group counts of the synthetic stacks")
    parser.add_argument("--base", default="prod", help="the stack measured and the synthetic stacks derive from")
    parser.add_argument("--quiet", action="store_true", help="no progress on stderr")
    # A run's side, in its own process (not for direct use).
    parser.add_argument("--discover", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--time", type=Path, metavar="MODULES", help=argparse.SUPPRESS)
    parser.add_argument("--stack", help=argparse.SUPPRESS)
    parser.add_argument("--stack-file", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)

    if args.discover:
        print(json.dumps(discover_modules(args.stack, args.stack_file, args.out)))
        return 0
    if args.time:
        print(json.dumps(time_plan(args.stack, args.stack_file, args.out, json.loads(args.time.read_text()))))
        return 0

    base = stack_file(args.base)
    counts = [int(n) for n in args.groups.split(",") if n]
    with tempfile.TemporaryDirectory(prefix="bench-") as tmp:
        work = Path(tmp)
        cases = [Case(args.base, len(node_groups(yaml.safe_load(base.read_text()))), base, synthetic=False)]
        cases += [
            Case(
                f"{n} group" + ("s" if n != 1 else ""),
                n,
                write_stack(with_node_groups(base, n), work / f"Pulumi.groups-{n}.yaml"),
            )
            for n in counts
        ]
        results = measure(args.base, cases, args.runs, work, progress=not args.quiet)
    print(table(results, args.runs))
    return 0


if __name__ == "__main__":
    command_line.run(main)
