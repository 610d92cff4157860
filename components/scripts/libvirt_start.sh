#!/bin/bash
# Starts libvirtd. With ESCAPE_POD_CGROUP=true (topology pod-per-service-host-pid) libvirtd
# and the QEMU processes it starts leave the pod's cgroup first, so that stopping,
# restarting or upgrading this pod does not kill running VMs: the container runtime kills
# only what is in the container's cgroup. Needs hostPID and the host's cgroup tree.
set -euo pipefail

# Migrations arrive over TCP (or TLS, tls.libvirt) on this node's address, as the SASL user of the
# pod's Secret (kolla-ansible's saslpasswd2, its listen_addr and `libvirtd --listen`).
printf '%s' "${LIBVIRT_SASL_PASSWORD}" | saslpasswd2 -c -p -a libvirt -f /etc/libvirt/passwd.db "${LIBVIRT_SASL_USER}"
{ cat /etc/libvirt/libvirtd.conf; printf 'listen_addr = "%s"\n' "${NODE_IP}"; } > /tmp/libvirtd.conf
libvirtd=(libvirtd --listen --config /tmp/libvirtd.conf)

# QEMU runs as QEMU_USER (qemu.conf) with that user's groups, and with virtType kvm opens the
# host's /dev/kvm. Where the host gives it to a group of its own (Ubuntu, Debian: root:kvm 0660),
# QEMU's user joins that group in this container and the host is left as it is. Otherwise
# (root's group, or no group access: crw------- root root) the device goes to Kolla's qemu group,
# of which the image's nova is a member, mode 0660: what kolla-ansible's udev rule
# 99-kolla-kvm.rules does on every KVM host (openstack-helm's libvirt chowns it to kvm likewise).
# Also under virtType qemu, where guests never use it, wherever the node has one: libvirt's cache of
# QEMU's capabilities holds only while its probe (which finds KVM) agrees with whether QEMU's user
# may open /dev/kvm ("KVM was enabled when probing ..., but it is not available now": libvirt
# qemu_capabilities.c virQEMUCapsIsValid). Disagreeing, libvirt probes QEMU again at every lookup,
# and each boot waited on those probes for over a minute in the lab. kolla-ansible installs its
# rule only where nova_compute_virt_type is kvm (nova-cell config-host.yml); a node whose QEMU is
# emulated there has the same disagreement.
kvm=/dev/kvm
if [ ! -e "$kvm" ]; then
  if [ "${VIRT_TYPE:-}" = "kvm" ]; then
    echo "warning: $kvm does not exist: guests of virtType kvm will not start on this node" >&2
  fi
else
  gid=$(stat -c %g "$kvm")
  # The group's read and write bits: characters 5 and 6 of `ls -l`'s mode, e.g. crw-rw----.
  if [ "$gid" != 0 ] && [ "$(stat -c %A "$kvm" | cut -c5-6)" = rw ]; then
    group=$(getent group "$gid" | cut -d: -f1 || true)
    if [ -z "$group" ]; then
      group="kvm-$gid"
      groupadd -g "$gid" "$group"
    fi
    usermod -a -G "$group" "${QEMU_USER}"
    echo "$kvm: group $gid has read-write access; QEMU's user ${QEMU_USER} joins it as $group" >&2
  else
    chgrp "${KOLLA_QEMU_GID}" "$kvm"
    chmod 0660 "$kvm"
    echo "$kvm: given to group ${KOLLA_QEMU_GID} (Kolla's qemu group, ${QEMU_USER}'s), mode 0660" >&2
  fi
fi

# QEMU opens RBD disks with a libvirt secret holding a Ceph client's key, under the UUID that
# nova.conf and cinder.conf name (rbd_secret_uuid). libvirtd loads persistent secrets from
# /etc/libvirt/secrets when it starts, as kolla-ansible's nova-libvirt has them: <uuid>.xml and
# <uuid>.base64, the key as `ceph auth get-key` prints it (base64 already). Written at every start
# from the mounted keyrings, so a rotated key takes effect with the pod's next start.
# LIBVIRT_CEPH_CLIENTS: 'uuid=client.name=keyring-path' entries separated by spaces.
if [ -n "${LIBVIRT_CEPH_CLIENTS:-}" ]; then
  install -d -m 0700 /etc/libvirt/secrets
  for entry in ${LIBVIRT_CEPH_CLIENTS}; do
    uuid=${entry%%=*}
    rest=${entry#*=}
    client=${rest%%=*}
    keyring=${rest#*=}
    key=$(sed -n 's/^[[:space:]]*key[[:space:]]*=[[:space:]]*\([^[:space:]]*\).*/\1/p' "$keyring" | head -n 1)
    if [ -z "$key" ]; then
      echo "error: $keyring holds no 'key = ...' line for $client (the Secret's key 'keyring' must be the keyring file)" >&2
      exit 1
    fi
    (
      umask 077
      printf "<secret ephemeral='no' private='no'>\n  <uuid>%s</uuid>\n  <usage type='ceph'>\n    <name>%s secret</name>\n  </usage>\n</secret>\n" \
        "$uuid" "$client" > "/etc/libvirt/secrets/$uuid.xml"
      printf '%s' "$key" > "/etc/libvirt/secrets/$uuid.base64"
    )
  done
fi

# Under tls.libvirt the pod libvirt-tls on this node keeps the node's certificate under
# LIBVIRT_PKI_DIR (the host's /run/libvirt/pki; components/libvirt_tls.py), in the directories
# libvirt and QEMU read by default: /etc/pki/CA, /etc/pki/libvirt, /etc/pki/qemu link there, through
# `current`, which it swaps at each renewal (and `virt-admin server-update-tls` reloads only those
# default paths). libvirtd starts once the certificate is there: with listen_tls and no certificate
# it would not start, and /etc/pki/qemu must exist when it does (qemu.conf).
if [ -n "${LIBVIRT_PKI_DIR:-}" ]; then
  waited=0
  until [ -e "${LIBVIRT_PKI_DIR}/current/libvirt/servercert.pem" ]; do
    if [ "$waited" -ge "${LIBVIRT_PKI_WAIT:-600}" ]; then
      echo "error: no certificate under ${LIBVIRT_PKI_DIR}/current after ${waited}s: the pod libvirt-tls on this node writes it (its log says why not)" >&2
      exit 1
    fi
    sleep 2
    waited=$((waited + 2))
  done
  mkdir -p /etc/pki
  for dir in CA libvirt qemu; do
    rm -rf "/etc/pki/${dir}"
    ln -s "${LIBVIRT_PKI_DIR}/current/${dir}" "/etc/pki/${dir}"
  done
  echo "TLS: /etc/pki/{CA,libvirt,qemu} -> ${LIBVIRT_PKI_DIR}/current (the node's certificate)" >&2
fi

if [ "${ESCAPE_POD_CGROUP:-false}" = "true" ]; then
  if command -v systemd-run >/dev/null && [ -S /run/systemd/private ]; then
    # The host's systemd puts libvirtd in a scope of its own under machine.slice.
    exec systemd-run --scope --slice=machine.slice --unit="libvirtd-pod-$$" --collect "${libvirtd[@]}"
  fi
  if [ -f /sys/fs/cgroup/cgroup.controllers ]; then
    # cgroup v2: one unified tree; move into a group of our own at the top.
    mkdir -p /sys/fs/cgroup/machine.slice/libvirtd-pod
    echo $$ > /sys/fs/cgroup/machine.slice/libvirtd-pod/cgroup.procs
  else
    # cgroup v1: one tree per controller; join each controller's group of our own.
    for controller in /sys/fs/cgroup/*/; do
      [ -f "${controller}tasks" ] || continue
      for group in "${controller}machine.slice" "${controller}machine.slice/libvirtd-pod"; do
        mkdir -p "$group"
        # A new cpuset group has no CPUs and memory nodes, and nothing can join it until it
        # has some: give it the root's.
        for setting in cpuset.cpus cpuset.mems; do
          if [ -f "$group/$setting" ] && [ -z "$(cat "$group/$setting")" ]; then
            cat "${controller}$setting" > "$group/$setting"
          fi
        done
      done
      echo $$ > "${controller}machine.slice/libvirtd-pod/tasks"
    done
  fi
fi
exec "${libvirtd[@]}"
