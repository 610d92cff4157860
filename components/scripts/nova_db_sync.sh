#!/bin/bash
# Nova's schema and cells, in the order Nova needs them. Each step is idempotent, so a
# re-run (a changed image or config replaces the Job) is safe.
set -euo pipefail
manage() { nova-manage --config-file /etc/nova/nova.conf "$@"; }

manage api_db sync
# cell0's database URL is derived from [database]/connection with the name nova_cell0.
manage cell_v2 map_cell0
if ! manage cell_v2 list_cells | awk -F'|' '{gsub(/ /, "", $2); print $2}' | grep -qx cell1; then
  manage cell_v2 create_cell --name cell1 --verbose
fi
# Upgrades cell1's database and cell0's with it.
manage db sync
manage cell_v2 list_cells
