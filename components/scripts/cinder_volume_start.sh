#!/bin/bash
# Starts cinder-volume. For the lvm backend, first make sure the node has the volume group
# on a sparse loop file, so that a plain cluster needs no prepared disks.
set -euo pipefail
if [ "${CINDER_BACKEND}" = "lvm" ] && ! vgs cinder-volumes >/dev/null 2>&1; then
  file=/var/lib/cinder/cinder-volumes.img
  [ -f "$file" ] || truncate -s "${LVM_SIZE}" "$file"
  device=$(losetup -j "$file" | cut -d: -f1)
  [ -n "$device" ] || device=$(losetup --show -f "$file")
  vgs cinder-volumes >/dev/null 2>&1 || vgcreate cinder-volumes "$device"
fi
# The iSCSI target listens on this node's address, which only the pod knows.
printf '[%s]\ntarget_ip_address = %s\n' "${CINDER_BACKEND}" "${NODE_IP}" > /tmp/node.conf
exec cinder-volume --config-file /etc/cinder/cinder.conf --config-file /tmp/node.conf
