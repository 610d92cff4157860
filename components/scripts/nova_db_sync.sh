#!/bin/bash
# Nova's schema and cells, in the order Nova needs them. Each step is idempotent, so a
# re-run (a changed image or config replaces the Job) is safe.
set -euo pipefail
manage() { nova-manage --config-file /etc/nova/nova.conf "$@"; }
CELL0_UUID=00000000-0000-0000-0000-000000000000

manage api_db sync
# cell0's database URL is derived from [database]/connection with the name nova_cell0.
manage cell_v2 map_cell0
cell1() { manage cell_v2 list_cells | awk -F'|' '{gsub(/ /, "", $2); gsub(/ /, "", $3)} $2 == "cell1" {print $3}'; }
if [ -z "$(cell1)" ]; then
  manage cell_v2 create_cell --name cell1 --verbose
fi
# The mappings hold each cell's database and message queue URLs: rewrite them from this
# nova.conf, so that a changed password or database host reaches them (as openstack-helm's
# db-sync and kolla-ansible's create_cells do). cell0 has no message queue.
manage cell_v2 update_cell --cell_uuid "$(cell1)"
nova-manage --config-file /etc/nova/nova.conf --config-file /etc/nova/nova-cell0.conf \
  cell_v2 update_cell --cell_uuid "$CELL0_UUID" --transport-url none:///
# Upgrades cell1's database and cell0's with it.
manage db sync
manage cell_v2 list_cells
