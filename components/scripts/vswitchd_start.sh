#!/bin/bash
# Starts ovs-vswitchd once ovsdb is up. BRIDGES lists the provider bridges as 'bridge=nic'
# (nic may be empty): each bridge is created with DATAPATH_TYPE (system: the kernel module;
# netdev: the userspace datapath), and its NIC added as its uplink, as openstack-helm's
# auto_bridge_add does. A NIC this node lacks leaves the bridge without uplink, with a warning.
set -euo pipefail
until [ -S /run/openvswitch/db.sock ]; do echo "waiting for ovsdb" >&2; sleep 2; done
ovs-vsctl --no-wait init
if [ "${DATAPATH_TYPE}" = netdev ]; then
  # Guests' virtio NICs leave TCP checksums to the host (offload). The userspace datapath reads
  # their taps without the offload header unless userspace TSO is on, and its conntrack (the
  # security groups) then calls every such packet invalid and drops it. Open vSwitch before 3.3
  # cannot tunnel such packets (neutron.userspaceTso). Read at start only: set before the daemon.
  ovs-vsctl --no-wait set Open_vSwitch . other_config:userspace-tso-enable="${USERSPACE_TSO:-true}"
fi
for pair in ${BRIDGES:-}; do
  bridge=${pair%%=*}
  nic=${pair#*=}
  ovs-vsctl --no-wait --may-exist add-br "$bridge" -- set bridge "$bridge" datapath_type="${DATAPATH_TYPE}"
  [ -n "$nic" ] || continue
  if ip link show "$nic" >/dev/null 2>&1; then
    ovs-vsctl --no-wait --may-exist add-port "$bridge" "$nic"
    ip link set "$nic" up
  else
    echo "warning: $nic does not exist on this node: $bridge has no uplink (neutron.bridgeInterfaces)" >&2
  fi
done
exec ovs-vswitchd unix:/run/openvswitch/db.sock --mlockall --pidfile=/run/openvswitch/ovs-vswitchd.pid
