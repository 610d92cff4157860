#!/bin/sh
# Installs the Debian packages the tests need, without starting any system service: the
# tests run their own instances in temporary directories and namespaces. `make test` runs
# this first; as root it installs what is missing, otherwise it prints the one command to run.
set -eu

# The servers that stand in for the operators' MariaDB and RabbitMQ, and memcached.
SERVERS="mariadb-server rabbitmq-server memcached"
# What the OpenStack virtualenv compiles: uWSGI (Python headers) and libvirt-python.
BUILD="gcc libc6-dev python3-dev pkg-config libvirt-dev"
# What the pods of the compute and network nodes run, as the Kolla images ship it
# (nova-libvirt, openvswitch-*, neutron-*-agent, nova-novncproxy; nova-compute's genisoimage
# builds config drives), and the kubelet's tools.
NODE="openvswitch-switch libvirt-daemon libvirt-daemon-driver-qemu libvirt-clients sasl2-bin libsasl2-modules qemu-system-x86 qemu-utils \
genisoimage sudo novnc util-linux procps kmod dumb-init"
# What neutron's agents call, as Kolla's neutron-base and neutron-l3-agent images ship it
# (docker/neutron/*/Dockerfile.j2, stable/2026.1): dnsmasq and dhcp_release[6] (DHCP agent),
# haproxy (metadata proxy), radvd (the L3 agent's IPv6 router advertisements), keepalived
# (HA routers), conntrack, ipset and iptables (firewall drivers), ip and arping.
AGENTS="dnsmasq-base dnsmasq-utils haproxy radvd keepalived conntrack ipset iptables iproute2 iputils-arping iputils-ping"
# The guest of the cloud test: Debian's kernel (downloaded, not installed) and a busybox initramfs.
GUEST="busybox-static cpio file fdisk dosfstools mtools syslinux syslinux-common"
# The external Ceph's stand-in (tests/lab/cloud/ceph.py: a monitor, a manager and an OSD of Debian's
# Ceph 16, and the ceph and rbd commands that make its pools and keys), Ceph's Python bindings that
# Kolla's images take from the distribution and the OpenStack venv links (rados, rbd), and QEMU's
# RBD block driver, through which libvirt's guests open their disks in Ceph with librbd.
CEPH="ceph-mon ceph-mgr ceph-osd ceph-common python3-rados python3-rbd qemu-block-extra"
# What the lab's packet capture runs (tests/lab/cloud/capture.py: is internal traffic TLS?).
CAPTURE="tcpdump"
# The store of the real kube-apiserver the user's commands run against (tests/engine/cluster.py).
ENGINE="etcd-server"
# The systemd-run whose option parser judges libvirt_start.sh's scope command (tests/test_compute.py).
SYSTEMD="systemd"
PACKAGES="$SERVERS $BUILD $NODE $AGENTS $GUEST $CEPH $CAPTURE $ENGINE $SYSTEMD"

missing=""
for package in $PACKAGES; do
    if ! dpkg-query -W -f '${Status}' "$package" 2>/dev/null | grep -q "install ok installed"; then
        missing="$missing $package"
    fi
done
if [ -z "$missing" ]; then
    echo "install_system_packages.sh: all $(echo "$PACKAGES" | wc -w) Debian packages present"
    exit 0
fi

if [ "$(id -u)" -ne 0 ]; then
    echo "install_system_packages.sh: missing Debian packages:$missing" >&2
    echo "run as root, then make test again:  sudo $0" >&2
    exit 1
fi

# invoke-rc.d consults policy-rc.d; exit code 101 means "action forbidden", so the
# postinst scripts install the units but start nothing. Only remove what we added.
created_policy=""
if [ ! -e /usr/sbin/policy-rc.d ]; then
    printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d
    chmod 0755 /usr/sbin/policy-rc.d
    created_policy=1
fi
cleanup() { [ -n "$created_policy" ] && rm -f /usr/sbin/policy-rc.d; return 0; }
trap cleanup EXIT

env DEBIAN_FRONTEND=noninteractive apt-get update -q
# shellcheck disable=SC2086
env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends $missing
