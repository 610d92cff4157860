#!/bin/bash
# Starts ovsdb-server on the node's database, creating or upgrading the database first.
set -euo pipefail
db=/var/lib/openvswitch/conf.db
schema=/usr/share/openvswitch/vswitch.ovsschema
if [ ! -s "$db" ]; then
  ovsdb-tool create "$db" "$schema"
elif [ "$(ovsdb-tool needs-conversion "$db" "$schema")" = "yes" ]; then
  ovsdb-tool convert "$db" "$schema"
fi
exec ovsdb-server "$db" --remote=punix:/run/openvswitch/db.sock --pidfile=/run/openvswitch/ovsdb-server.pid
