"""Enable or disable this node's nova-compute service in Nova.

`compute_service.py disable` runs as the pod's preStop hook: when a node is drained the
scheduler stops placing VMs here. `compute_service.py enable` runs at start and re-enables
the service only if this hook disabled it, so an operator's own disable is kept.
Authenticates as the nova service user from OS_* variables.

At start Nova's API may be away: nova-compute's pods roll when the control plane does (an
upgrade, a changed nova.conf), and the lab's apply showed nova-api restarting while the new
nova-compute pod started. One failed attempt left the node disabled for good, so `enable`
tries until it is done (`--retry-seconds`, default: for as long as the pod runs); the start
script runs it beside nova-compute rather than before it.
"""

import argparse
import socket
import sys
import time

import openstack
from keystoneauth1 import exceptions as auth_exceptions
from openstack import exceptions as sdk_exceptions

REASON = "disabled by the nova-compute pod while it stopped"
# What a Nova or Keystone that is restarting or not yet reachable raises; anything else is a bug.
UNAVAILABLE = (
    auth_exceptions.ConnectFailure,
    auth_exceptions.ConnectTimeout,
    auth_exceptions.RetriableConnectionFailure,
    auth_exceptions.http.ServiceUnavailable,
    auth_exceptions.http.BadGateway,
    auth_exceptions.http.GatewayTimeout,
    sdk_exceptions.HttpException,
)
FIRST_WAIT, LONGEST_WAIT = 2.0, 30.0


def change(action: str, host: str) -> None:
    conn = openstack.connect()
    for service in conn.compute.services(host=host, binary="nova-compute"):
        if action == "disable" and service.status == "enabled":
            conn.compute.disable_service(service, disabled_reason=REASON)
            print(f"disabled nova-compute on {host}", flush=True)
        elif action == "enable" and service.status == "disabled" and service.disabled_reason == REASON:
            conn.compute.enable_service(service)
            print(f"re-enabled nova-compute on {host}", flush=True)


def is_unavailable(error: Exception) -> bool:
    """Nova or Keystone away for now (a connection refused, a 5xx), not a request Nova refuses."""
    if isinstance(error, sdk_exceptions.HttpException):
        return error.status_code is None or error.status_code >= 500
    return isinstance(error, UNAVAILABLE)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("action", choices=("enable", "disable"))
    parser.add_argument("--retry-seconds", type=float, default=None,
                        help="keep trying while Nova is away, this long (default: one try for disable, "
                        "no end for enable)")  # fmt: skip
    args = parser.parse_args()
    host = socket.gethostname()  # nova-compute's default host; the pod shares the node's name
    limit = args.retry_seconds if args.retry_seconds is not None else (0.0 if args.action == "disable" else None)
    deadline = None if limit is None else time.monotonic() + limit
    wait = FIRST_WAIT
    while True:
        try:
            change(args.action, host)
            return
        except Exception as error:  # sorted by is_unavailable; anything else is raised
            if not is_unavailable(error):
                raise
            if deadline is not None and time.monotonic() + wait > deadline:
                sys.exit(f"nova-compute on {host} not {args.action}d: Nova is unavailable ({error})")
            print(f"Nova unavailable, {args.action} again in {wait:.0f} s: {error}", file=sys.stderr, flush=True)
            time.sleep(wait)
            wait = min(wait * 2, LONGEST_WAIT)


if __name__ == "__main__":
    main()
