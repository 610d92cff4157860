"""Start the cloud of a stack's plan on this machine, use it as a user would, and report.

    python -m tests.lab.cloud --stack prod [--out build/cloud/prod] [--keep] [--cni node-ips-in-ipblock]
                              [--tempest smoke|full [--tempest-filter REGEX] [--tempest-workers N] [--tempest-only]]

Needs root (namespaces, cgroups, mounts) and the Debian packages of
tests/lab/realenv/install_system_packages.sh. Runs itself in a mount namespace of its own, so
nothing it mounts outlives it; everything it starts is killed when it ends, unless --keep.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from pathlib import Path

from tests.lab.cloud.netpol import CniMode
from tests.lab.cloud.run import TEST_STACKS, run
from tests.lab.cloud.tempest_run import MAX_WORKERS, SELECTIONS, TempestRequest

_INSIDE = "CLOUD_TEST_MOUNT_NAMESPACE"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.lab.cloud", description=__doc__.split("\n\n")[0])
    parser.add_argument("--stack", required=True, choices=TEST_STACKS, help="the stack whose cloud to start")
    parser.add_argument("--out", type=Path, help="report and logs (default build/cloud/<stack>)")
    parser.add_argument("--keep", action="store_true", help="leave the cloud running until Ctrl-C")
    parser.add_argument(
        "--cni",
        type=CniMode,
        choices=list(CniMode),
        default=CniMode.NODE_IPS_NOT_IN_IPBLOCK,
        help="whether NetworkPolicy ipBlocks match other nodes' addresses (Calico: yes; Cilium's default: no)",
    )
    parser.add_argument(
        "--tempest",
        choices=SELECTIONS,
        help="then run Tempest's API tests of every deployed service (smoke: those tagged smoke); "
        "writes tempest.json beside the report",
    )
    parser.add_argument(
        "--tempest-filter",
        metavar="REGEX",
        help="with --tempest: only the selection's tests whose id matches REGEX (e.g. to rerun some of them)",
    )
    parser.add_argument(
        "--tempest-workers",
        metavar="N",
        type=int,
        choices=range(1, MAX_WORKERS + 1),
        help=f"with --tempest: Tempest's test workers, 1 to {MAX_WORKERS} (default 1)",
    )
    parser.add_argument(
        "--tempest-only",
        action="store_true",
        help="with --tempest: deploy the stack's own release and run only Tempest, none of the lab's scenarios",
    )
    args = parser.parse_args(argv)
    if args.tempest_only and not args.tempest:
        parser.error("--tempest-only runs a Tempest selection alone: give --tempest smoke or --tempest full too")
    if args.tempest_workers is not None and not args.tempest:
        parser.error("--tempest-workers sets how a Tempest selection runs: give --tempest smoke or --tempest full too")
    if args.tempest_filter is not None:
        if not args.tempest:
            parser.error("--tempest-filter narrows a Tempest selection: give --tempest smoke or --tempest full too")
        try:
            re.compile(args.tempest_filter)
        except re.error as error:
            parser.error(f"--tempest-filter {args.tempest_filter!r} is not a regular expression: {error}")
    if os.geteuid() != 0:
        print("error: the cloud test needs root (network namespaces, cgroups, mounts)", file=sys.stderr)
        return 2
    if os.environ.get(_INSIDE) != "1":
        # A private mount namespace: the node's netns files and every mount go with this process.
        os.environ[_INSIDE] = "1"
        unshare = ["unshare", "--mount", "--propagation", "private"]
        os.execvp("unshare", [*unshare, sys.executable, "-m", "tests.lab.cloud", *(argv or sys.argv[1:])])
    out = args.out or Path("build/cloud") / args.stack
    tempest = TempestRequest(args.tempest, args.tempest_filter, args.tempest_workers or 1) if args.tempest else None
    report = run(args.stack, out, keep=args.keep, cni=args.cni, tempest=tempest, tempest_only=args.tempest_only)
    return 1 if report.deploy_error else 0


if __name__ == "__main__":
    sys.exit(main())
