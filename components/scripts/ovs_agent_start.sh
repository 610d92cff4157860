#!/bin/bash
# Starts the Open vSwitch agent with this node's tunnel address, which only the pod knows.
set -euo pipefail
printf '[ovs]\nlocal_ip = %s\n' "${NODE_IP}" > /tmp/node.ini
exec /scripts/wait_for_sockets.sh "${SOCKET_TIMEOUT}" /run/openvswitch/db.sock -- \
  neutron-openvswitch-agent --config-file /etc/neutron/neutron.conf \
  --config-file /etc/neutron/plugins/ml2/openvswitch_agent.ini --config-file /tmp/node.ini
