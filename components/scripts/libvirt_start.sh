#!/bin/bash
# Starts libvirtd. With ESCAPE_POD_CGROUP=true (topology pod-per-service-host-pid) libvirtd
# and the QEMU processes it starts leave the pod's cgroup first, so that stopping,
# restarting or upgrading this pod does not kill running VMs: the container runtime kills
# only what is in the container's cgroup. Needs hostPID and the host's cgroup tree.
set -euo pipefail
if [ "${ESCAPE_POD_CGROUP:-false}" = "true" ]; then
  if command -v systemd-run >/dev/null && [ -S /run/systemd/private ]; then
    # The host's systemd puts libvirtd in a scope of its own under machine.slice.
    exec systemd-run --scope --slice=machine.slice --unit="libvirtd-pod-$$" --collect \
      libvirtd --config /etc/libvirt/libvirtd.conf
  fi
  if [ -f /sys/fs/cgroup/cgroup.controllers ]; then
    # cgroup v2: one unified tree; move into a group of our own at the top.
    mkdir -p /sys/fs/cgroup/machine.slice/libvirtd-pod
    echo $$ > /sys/fs/cgroup/machine.slice/libvirtd-pod/cgroup.procs
  else
    # cgroup v1: one tree per controller; join each controller's group of our own.
    for controller in /sys/fs/cgroup/*/; do
      [ -f "${controller}tasks" ] || continue
      mkdir -p "${controller}machine.slice/libvirtd-pod"
      echo $$ > "${controller}machine.slice/libvirtd-pod/tasks"
    done
  fi
fi
exec libvirtd --config /etc/libvirt/libvirtd.conf
