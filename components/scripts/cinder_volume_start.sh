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
# One config file, under /etc: cinder starts privsep-helper through rootwrap with the same
# --config-file arguments, and cinder's filters for it admit one. The node's address comes from
# the environment (OS_DEFAULT__MY_IP, OS_LVM__TARGET_IP_ADDRESS), which oslo.config reads first.
exec cinder-volume --config-file /etc/cinder/cinder.conf
