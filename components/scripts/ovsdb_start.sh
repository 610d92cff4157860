#!/bin/bash
# Starts ovsdb-server on the node's database, creating or upgrading the database first.
# Remotes as kolla-ansible serves them: the unix socket (ovs-vsctl, libvirt), TCP on the node's
# loopback, where neutron's agents and nova's os-vif connect by default (tcp:127.0.0.1:6640;
# os-vif has no fallback), and whatever managers the database itself names.
set -euo pipefail
db=/var/lib/openvswitch/conf.db
schema=/usr/share/openvswitch/vswitch.ovsschema
if [ ! -s "$db" ]; then
  ovsdb-tool create "$db" "$schema"
elif [ "$(ovsdb-tool needs-conversion "$db" "$schema")" = "yes" ]; then
  ovsdb-tool convert "$db" "$schema"
fi
exec ovsdb-server "$db" --remote=punix:/run/openvswitch/db.sock --remote="ptcp:${OVSDB_PORT}:127.0.0.1" \
  --remote=db:Open_vSwitch,Open_vSwitch,manager_options --pidfile=/run/openvswitch/ovsdb-server.pid
