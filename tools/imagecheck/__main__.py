"""python -m tools.imagecheck [--stack STACK ...] [--release RELEASE] [--notes]

Checks that every container of each stack's plan finds, in its Kolla image as kolla builds it
for the targeted release (the stack file's, or --release), every program it runs, file it reads
and Python module its scripts import. Prints per stack how many it checked and every miss; exits
1 when something is missing. The first run downloads kolla, Ubuntu noble's indexes and PyPI
metadata (a few minutes, and a few more for each release); later runs work offline from the cache.
"""

from __future__ import annotations

import argparse

from components.settings.releases import RELEASES
from tools import command_line
from tools.imagecheck.contents import limits
from tools.imagecheck.report import CANNOT_SEE, STACKS, check_stacks


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.imagecheck", description=__doc__.split("\n\n")[1])
    parser.add_argument("--stack", action="append", choices=STACKS, help="a stack (default: all)")
    parser.add_argument("--release", choices=list(RELEASES), help="plan the stacks as this release (default: theirs)")
    parser.add_argument("--notes", action="store_true", help="also print what was seen but not required")
    args = parser.parse_args(argv)
    reports = check_stacks(args.stack or STACKS, args.release)
    missing = 0
    for report in reports:
        print(report.summary())
        for miss in report.misses:
            print(f"  missing: {miss}")
        for skipped in report.skipped:
            print(f"  skipped: {skipped.where} ({skipped.image}): {skipped.reason}")
        if args.notes:
            for note in dict.fromkeys(report.notes):
                print(f"  note: {note}")
        missing += len(report.misses)
    print("what the check cannot see:")
    for release in sorted({report.release for report in reports}):
        images = {name for report in reports if report.release == release for name in report.images}
        for line in [*CANNOT_SEE, *limits(images, release)]:
            print(f"  {line}")
    return 1 if missing else 0


if __name__ == "__main__":
    command_line.run(main)
