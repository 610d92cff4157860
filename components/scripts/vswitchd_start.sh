#!/bin/bash
# Starts ovs-vswitchd once ovsdb is up, with the provider bridges of BRIDGES (space-separated).
set -euo pipefail
until [ -S /run/openvswitch/db.sock ]; do echo "waiting for ovsdb" >&2; sleep 2; done
ovs-vsctl --no-wait init
for bridge in ${BRIDGES:-}; do
  ovs-vsctl --no-wait --may-exist add-br "$bridge"
done
exec ovs-vswitchd unix:/run/openvswitch/db.sock --mlockall --pidfile=/run/openvswitch/ovs-vswitchd.pid
