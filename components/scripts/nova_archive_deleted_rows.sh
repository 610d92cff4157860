#!/bin/bash
# nova-archive-deleted-rows: move soft-deleted rows of every cell into the shadow tables, then
# delete shadow rows deleted more than AGE_IN_DAYS days ago (openstack-helm's
# _db-archive-deleted-row.sh.tpl archives; the purge is nova-manage's own `db purge`).
# nova/cmd/manage.py: archive_deleted_rows returns 0 when nothing was archived and 1 when rows
# were; purge returns 0 when rows were purged and 3 when there were none. Both are success.
set -uo pipefail
manage() { nova-manage --config-file /etc/nova/nova.conf "$@"; }

manage db archive_deleted_rows --all-cells --until-complete --verbose
status=$?
if [ "$status" -gt 1 ]; then
  echo "nova-manage db archive_deleted_rows failed ($status)" >&2
  exit "$status"
fi
before=$(date -u -d "${AGE_IN_DAYS} days ago" '+%Y-%m-%d %H:%M:%S')
manage db purge --all-cells --before "$before" --verbose
status=$?
if [ "$status" -ne 0 ] && [ "$status" -ne 3 ]; then
  echo "nova-manage db purge failed ($status)" >&2
  exit "$status"
fi
