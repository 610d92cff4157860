"""Jobs end, fail visibly and run again: a failed deploy recovers with the next `pulumi up`."""

from __future__ import annotations

import re

from tests.helpers import objects, pod_template
from tools.plan import Plan


def _seconds(duration: str) -> int:
    """A Go duration as Pulumi's customTimeouts take it, e.g. '30m' or '1h30m'."""
    units = {"h": 3600, "m": 60, "s": 1}
    parts = re.findall(r"(\d+)([hms])", duration)
    assert "".join(n + u for n, u in parts) == duration, duration
    return sum(int(n) * units[u] for n, u in parts)


def test_every_job_is_replaced_when_unready_and_ends_before_pulumi_stops_waiting(stack_plan: Plan) -> None:
    jobs = objects(stack_plan, "Job")
    assert jobs
    for name, job in jobs.items():
        assert job.inputs["metadata"]["annotations"]["pulumi.com/replaceUnready"] == "true", name
        deadline = job.inputs["spec"]["activeDeadlineSeconds"]
        assert 0 < deadline < _seconds(job.custom_timeouts["create"]), name
        # A failed run keeps its pod (and logs); retries get new pods.
        assert pod_template(job)["spec"]["restartPolicy"] == "Never", name
        assert job.inputs["spec"]["backoffLimit"] > 0, name


def test_cron_jobs_skip_late_runs_and_a_hung_run_ends(stack_plan: Plan) -> None:
    cron_jobs = objects(stack_plan, "CronJob")
    assert cron_jobs
    for name, cron in cron_jobs.items():
        spec = cron.inputs["spec"]
        assert spec["concurrencyPolicy"] == "Forbid", name  # a slow run never has a second beside it
        assert spec["timeZone"] == "Etc/UTC", name  # as the settings check schedules (components/settings/cron.py)
        assert spec["startingDeadlineSeconds"] >= 10, name  # the controller looks every 10 s
        assert spec["jobTemplate"]["spec"]["activeDeadlineSeconds"] > 0, name
        assert pod_template(cron)["spec"]["restartPolicy"] == "Never", name


def test_no_other_workload_asks_for_replacement(stack_plan: Plan) -> None:
    # replaceUnready works for Jobs only; elsewhere pulumi-kubernetes just warns.
    for r in stack_plan.custom:
        if r.kind != "Job":
            assert "pulumi.com/replaceUnready" not in (r.inputs.get("metadata") or {}).get("annotations", {}), r.name
