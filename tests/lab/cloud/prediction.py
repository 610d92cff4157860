"""What `--against` predicted for a change (diff.json) set against what the lab's apply did.

The prediction is tools/views.py `diff_result`, the code that writes diff.json, for the plan the
cloud ran and the new one: the workloads whose pods roll (`rolls` that restart: OnDelete ones do
not), the Jobs that run (`jobs` of kind Job: replaced ones again, new ones), the objects replaced.
The lab's record is tests/lab/cloud/apply.py's: the workloads whose pods it replaced, the Jobs it ran,
the objects its engine replaced (diffed on the revealed inputs, where the prediction sees secrets
masked and Secret data through digests). A workload the lab does not run (tests/lab/cloud/run.py
`cannot_run`, a DaemonSet no node admits) is compared on neither side and said why.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from tests.lab.cloud.apply import Applied
from tests.lab.cloud.deploy import Cloud


def _ref(entry: Mapping[str, Any]) -> str:
    return f"{entry['kind']}/{entry['name']}"


def compared(predicted: Iterable[str], actual: Iterable[str], skipped: Mapping[str, str]) -> dict[str, list[str]]:
    wanted = {r for r in predicted if r not in skipped}
    found = {r for r in actual if r not in skipped}
    return {
        "predicted": sorted(wanted),
        "actual": sorted(found),
        "missing": sorted(wanted - found),  # predicted, and the lab did not see it
        "unexpected": sorted(found - wanted),  # seen, and not predicted
    }


def not_compared(cloud: Cloud) -> dict[str, str]:
    """The workloads, Jobs and CronJobs the lab does not run, and why."""
    workloads = [*cloud.workloads.values(), *cloud.cron_jobs]
    return {f"{w.kind}/{w.name}": w.why_not_scheduled for w in workloads if w.why_not_scheduled}


def predicted_vs_actual(diff: Mapping[str, Any], applied: Applied, skipped: Mapping[str, str]) -> dict[str, Any]:
    rolls = [_ref(r) for r in diff["rolls"] if r["restarts"]]
    jobs = [_ref(j) for j in diff["jobs"] if j["kind"] == "Job"]
    replaced = [_ref(o) for o in diff["replaced"]]
    result: dict[str, Any] = {
        "pods_rolled": compared(rolls, applied.rolled, skipped),
        "jobs_run": compared(jobs, applied.jobs_run, skipped),
        "objects_replaced": compared(replaced, applied.objects().get("replace", []), {}),
        "not_compared": dict(sorted(skipped.items())),
    }
    result["matches"] = all(not result[k]["missing"] and not result[k]["unexpected"] for k in (
        "pods_rolled", "jobs_run", "objects_replaced"))  # fmt: skip
    return result
