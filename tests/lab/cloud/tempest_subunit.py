"""A subunit v2 stream (stestr's record of a Tempest run) as JSON lines: one test per line.

    python -m tests.lab.cloud.tempest_subunit < results.subunit > results.jsonl

Runs with Tempest's virtualenv, whose python-subunit and testtools read the stream. Each line:
{"id", "status" (success, fail, skip, xfail, uxsuccess, ...), "details" (text attachments:
the traceback of a failure, the reason of a skip), "seconds"}.
"""

from __future__ import annotations

import json
import sys
from typing import Any

import subunit
import testtools


def records(stream: Any) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []

    def on_test(test: dict[str, Any]) -> None:
        details = {
            name: content.as_text() for name, content in test["details"].items() if content.content_type.type == "text"
        }
        start, stop = (test["timestamps"] + [None, None])[:2]
        seconds = (stop - start).total_seconds() if start and stop else None
        found.append({"id": test["id"], "status": test["status"], "details": details, "seconds": seconds})

    result = testtools.StreamToDict(on_test)
    result.startTestRun()
    try:
        subunit.ByteStreamToStreamResult(stream, non_subunit_name="stdout").run(result)
    finally:
        result.stopTestRun()
    return found


def main() -> None:
    for record in records(sys.stdin.buffer):
        print(json.dumps(record))


if __name__ == "__main__":
    main()
