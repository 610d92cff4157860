"""Enable or disable this node's nova-compute service in Nova.

`compute_service.py disable` runs as the pod's preStop hook: when a node is drained the
scheduler stops placing VMs here. `compute_service.py enable` runs at start and re-enables
the service only if this hook disabled it, so an operator's own disable is kept.
Authenticates as the nova service user from OS_* variables.
"""

import socket
import sys

import openstack

REASON = "disabled by the nova-compute pod while it stopped"


def main() -> None:
    action = sys.argv[1] if len(sys.argv) == 2 else ""
    if action not in ("enable", "disable"):
        sys.exit("usage: compute_service.py enable|disable")
    conn = openstack.connect()
    host = socket.gethostname()  # nova-compute's default host; the pod shares the node's name
    for service in conn.compute.services(host=host, binary="nova-compute"):
        if action == "disable" and service.status == "enabled":
            conn.compute.disable_service(service, disabled_reason=REASON)
            print(f"disabled nova-compute on {host}")
        elif action == "enable" and service.status == "disabled" and service.disabled_reason == REASON:
            conn.compute.enable_service(service)
            print(f"re-enabled nova-compute on {host}")


if __name__ == "__main__":
    main()
