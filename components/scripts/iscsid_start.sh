#!/bin/bash
# Starts the iSCSI initiator daemon. The node's initiator name is made once and kept on the host
# (/etc/iscsi), where nova-compute reads it when it attaches a volume (as Kolla's iscsid image does).
set -euo pipefail
if [ ! -s /etc/iscsi/initiatorname.iscsi ]; then
  echo "InitiatorName=$(iscsi-iname)" > /etc/iscsi/initiatorname.iscsi
fi
exec iscsid -f
