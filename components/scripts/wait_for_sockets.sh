#!/bin/bash
# wait_for_sockets.sh SECONDS SOCKET... -- COMMAND...
# Pulumi orders creation only; on a node, containers restart on their own. So a process
# that talks to a sibling over a socket (nova-compute → libvirt, the OVS agent → ovsdb)
# waits for that socket at every start, and fails with a clear message when it never comes.
set -euo pipefail
timeout=$1; shift
sockets=()
while [ "$#" -gt 0 ] && [ "$1" != "--" ]; do sockets+=("$1"); shift; done
shift
for socket in "${sockets[@]}"; do
  waited=0
  until [ -S "$socket" ]; do
    if [ "$waited" -ge "$timeout" ]; then
      echo "error: $socket is not there after ${timeout}s. ${SOCKET_HINT:-}" >&2
      exit 1
    fi
    sleep 2; waited=$((waited + 2))
  done
done
exec "$@"
