"""This machine's limits as Tempest meets them, and tempest.json: every result counted and classed.

A test that fails here is class `cloud` unless a row of LAB_FAILURES names it (a regex over the
test id, searched) with the limit of this machine that makes it fail. A test that needs what this
machine cannot run at all is not started: NEEDS_VOLUME_BACKEND lists those that create, attach or
otherwise need a volume, left out when cinder-volume cannot run here, and counted as skipped with
the lab's reason. Nothing else is excused.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

PASSED = {"success", "xfail"}
SKIPPED = {"skip"}
NO_INTERNET = (
    "glance-api downloads the image from the Internet ([image] http_image, download.cirros-cloud.net); "
    "the lab's node network has no route or name service beyond this machine"
)


@dataclass(frozen=True)
class LabLimit:
    tests: str  # a regex searched in the test id (setUpClass failures name their class)
    reason: str


LAB_FAILURES: tuple[LabLimit, ...] = (
    LabLimit(r"tempest\.api\.image\.v2\.test_images\.ImportImagesTest\.test_image_web_download_import\b", NO_INTERNET),
)
# Tests that need a running cinder-volume (a volume that becomes available), by class or test.
NEEDS_VOLUME_BACKEND: tuple[str, ...] = ()


def lab_reason(test_id: str, limits: Iterable[LabLimit] = LAB_FAILURES) -> str | None:
    return next((limit.reason for limit in limits if re.search(limit.tests, test_id)), None)


def excluded(test_ids: Iterable[str], patterns: Iterable[str], reason: str) -> dict[str, str]:
    """The tests of the selection that are left out, each with why."""
    compiled = [re.compile(p) for p in patterns]
    return {t: reason for t in test_ids if any(p.search(t) for p in compiled)}


def _why(record: Mapping[str, Any]) -> str:
    """The exception a failed test ended with: the traceback's last line."""
    details = record.get("details") or {}
    text = details.get("traceback") or details.get("reason") or next(iter(details.values()), "")
    lines = [line.strip() for line in str(text).splitlines() if line.strip()]
    return lines[-1][:500] if lines else f"status {record.get('status')}, no traceback"


def summarize(
    records: Iterable[Mapping[str, Any]], left_out: Mapping[str, str], limits: Iterable[LabLimit] = LAB_FAILURES
) -> dict[str, Any]:
    """tempest.json: counts, every failure with its class and reason, every skip reason with its count."""
    limits = tuple(limits)
    passed, failures, skips = 0, [], Counter(left_out.values())
    for record in records:
        status = record["status"]
        if status in PASSED:
            passed += 1
        elif status in SKIPPED:
            skips[_why(record)] += 1
        elif status != "exists":
            lab = lab_reason(record["id"], limits)
            failures.append(
                {"test": record["id"], "reason": lab or _why(record), "class": "lab" if lab else "cloud"}
                | ({"error": _why(record)} if lab else {})
            )
    return {
        "passed": passed,
        "failed": len(failures),
        "skipped": sum(skips.values()),
        "failures": sorted(failures, key=lambda f: (f["class"], f["test"])),
        "skips": dict(skips.most_common()),
    }
