#!/bin/bash
# Starts nova-compute once libvirt answers, re-enabling the service the preStop hook disabled.
set -euo pipefail
# /var/lib/nova is the host's (instance disks outlive the pod), so the image's instances
# directory is hidden under it: make it on a fresh node (as openstack-helm's start does).
mkdir -p /var/lib/nova/instances
# Re-enable the service beside nova-compute, trying until Nova answers (compute_service.py): the
# control plane may be rolling too. Started from a subshell so that PID 1 (dumb-init) reaps it.
( python3 /scripts/compute_service.py enable & )
exec /scripts/wait_for_sockets.sh "${SOCKET_TIMEOUT}" /run/libvirt/libvirt-sock -- \
  nova-compute --config-file /etc/nova/nova.conf
