#!/bin/bash
# Starts nova-compute once libvirt answers, re-enabling the service the preStop hook disabled.
set -euo pipefail
python3 /scripts/compute_service.py enable || echo "warning: could not re-enable the compute service yet" >&2
exec /scripts/wait_for_sockets.sh "${SOCKET_TIMEOUT}" /run/libvirt/libvirt-sock -- \
  nova-compute --config-file /etc/nova/nova.conf
