#!/bin/bash
# Map compute hosts that registered since the last run into their cell; idempotent.
# With WAIT_FOR_A_HOST_SECONDS > 0, keep discovering until some host is mapped: a compute
# pod is Ready before its compute node record exists, and a cloud with no host mapped takes
# no VM. After the wait a warning, not a failure: the CronJob maps late hosts.
set -euo pipefail
manage() { nova-manage --config-file /etc/nova/nova.conf "$@"; }
mapped() { manage cell_v2 list_hosts | awk -F'|' 'NR > 3 && NF > 3 {found = 1} END {exit !found}'; }
waited=0
manage cell_v2 discover_hosts --verbose
while ! mapped && [ "$waited" -lt "${WAIT_FOR_A_HOST_SECONDS:-0}" ]; do
  echo "no compute host mapped yet; waiting for nova-compute to register (${waited}s)" >&2
  sleep 10; waited=$((waited + 10))
  manage cell_v2 discover_hosts --verbose
done
if ! mapped; then
  echo "warning: no compute host is mapped to a cell yet; the nova-cell-setup CronJob will map them" >&2
fi
manage cell_v2 list_hosts
