"""Who may touch the host: the one table of node pods, their containers and privileges.

The compute and network components build their pods from this table, and the policy
pack (policies/) judges workloads against the same table, so what the program declares
and what the pack allows cannot drift apart. Pure standard library on purpose: the
policy pack imports it without the program's dependencies.

Each topology of seed 000 is a list of pods; each pod lists its containers by role.
A role says exactly what one container needs of the host and why.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from functools import cache


class Topology(StrEnum):
    """The five hypervisor isolation options of seed 000, in option order."""

    ALL_IN_ONE = "all-in-one"
    BAREMETAL_HYPERVISOR_SHARED_POD = "baremetal-hypervisor-shared-pod"
    BAREMETAL_HYPERVISOR = "baremetal-hypervisor"
    POD_PER_SERVICE = "pod-per-service"
    POD_PER_SERVICE_HOST_PID = "pod-per-service-host-pid"

    @property
    def option(self) -> int:
        return list(Topology).index(self) + 1

    @property
    def host_runs_hypervisor(self) -> bool:
        """Options 2 and 3: libvirt/QEMU and OVS are installed on the host, not declared here."""
        return self in (Topology.BAREMETAL_HYPERVISOR_SHARED_POD, Topology.BAREMETAL_HYPERVISOR)

    @classmethod
    def parse(cls, value: object) -> Topology:
        """Accept a topology by name or by its option number (1-5), as the seed numbers them."""
        if isinstance(value, Topology):
            return value
        if isinstance(value, bool):
            raise ValueError(f"{value!r} is not a topology")
        if isinstance(value, int) or (isinstance(value, str) and value.strip().isdigit()):
            number = int(value)
            if 1 <= number <= len(cls):
                return list(cls)[number - 1]
            raise ValueError(f"option {number} does not exist (1-{len(cls)})")
        if isinstance(value, str) and value in cls._value2member_map_:
            return cls(value)
        raise ValueError(f"{value!r} is not a topology")

    @classmethod
    def allowed(cls) -> str:
        return ", ".join(f"{t.value} ({t.option})" for t in cls)


class NodeKind(StrEnum):
    COMPUTE = "compute"
    NETWORK = "network"
    STORAGE = "storage"


@dataclass(frozen=True)
class HostPath:
    path: str
    read_only: bool
    why: str
    # Bidirectional propagation lets mounts made inside the container (network namespaces,
    # attached volumes) show on the host and in sibling pods; Kubernetes requires privileged.
    propagation: str | None = None


@dataclass(frozen=True)
class Role:
    """One container's needs of the host. `image` is the Kolla image name (no registry)."""

    name: str
    image: str
    privileged: bool = False
    capabilities: tuple[str, ...] = ()
    host_network: bool = False
    host_pid: bool = False
    host_ipc: bool = False
    host_paths: tuple[HostPath, ...] = ()
    # QEMU runs in this container's cgroup (unless it moves out): a CPU or memory limit would cap
    # every guest of the node, so it gets none (openstack-helm's default); Nova accounts for the
    # node's memory through reserved_host_memory_mb.
    hosts_guests: bool = False
    why: str = ""


_MODULES = HostPath("/lib/modules", True, "load openvswitch/kvm/iscsi kernel modules")
_OVS_RUN = HostPath("/run/openvswitch", False, "ovsdb and vswitchd control sockets")
_LIBVIRT_RUN = HostPath("/run/libvirt", False, "libvirt's control socket")
_NOVA_STATE = HostPath("/var/lib/nova", False, "instance disks; must outlive the pod", propagation="Bidirectional")
_LIBVIRT_STATE = HostPath("/var/lib/libvirt", False, "libvirt domain state and QEMU images")
_CGROUP = HostPath("/sys/fs/cgroup", False, "place QEMU in the host's cgroup tree")
_NETNS = HostPath("/run/netns", False, "router and DHCP namespaces", propagation="Bidirectional")
_NEUTRON_STATE = HostPath("/var/lib/neutron", False, "metadata proxy socket shared by the agents")


def _libvirt(host_pid: bool) -> Role:
    paths: tuple[HostPath, ...] = (
        _MODULES,
        _LIBVIRT_RUN,
        _NOVA_STATE,
        _LIBVIRT_STATE,
        HostPath("/dev", False, "/dev/kvm, tap devices"),
        # libvirt plugs guest taps into br-int itself (ovs-vsctl, <virtualport type='openvswitch'>).
        _OVS_RUN,
        # Persistent domain definitions must outlive the pod (openstack-helm mounts the host's).
        HostPath("/etc/libvirt/qemu", False, "persistent domain definitions; must outlive the pod"),
    )
    if host_pid:
        # QEMU must run in a cgroup of the host, not of the pod, to survive a pod restart.
        paths += (
            _CGROUP,
            HostPath("/run/systemd", False, "ask host systemd for a scope outside the pod"),
            HostPath("/run/dbus", False, "the system bus that systemd-run talks over"),
        )
    return Role(
        name="libvirt",
        image="nova-libvirt",
        privileged=True,
        host_network=True,
        host_pid=host_pid,
        host_paths=paths,
        hosts_guests=True,
        why="runs QEMU guests: needs /dev/kvm, tap devices, cgroups and the host network",
    )


OVSDB = Role(
    name="openvswitch-db",
    image="openvswitch-db-server",
    host_network=True,
    host_paths=(_OVS_RUN, HostPath("/var/lib/openvswitch", False, "the OVS database file")),
    why="serves the switch database over a host socket",
)
VSWITCHD = Role(
    name="openvswitch-vswitchd",
    image="openvswitch-vswitchd",
    # The userspace datapath (neutron.datapathType netdev) opens /dev/net/tun for every internal
    # port, which an unprivileged container's device rules deny; the kernel datapath loads its
    # module. kolla-ansible and openstack-helm run vswitchd privileged.
    privileged=True,
    host_network=True,
    host_paths=(_MODULES, _OVS_RUN),
    why="the datapath: creates bridges and ports in the host network (kernel module or /dev/net/tun)",
)
_ISCSI = HostPath("/etc/iscsi", False, "the node's iSCSI initiator name, shared by iscsid and nova-compute")
NOVA_COMPUTE = Role(
    name="nova-compute",
    image="nova-compute",
    privileged=True,
    host_network=True,
    host_paths=(
        _MODULES,
        _LIBVIRT_RUN,
        _NOVA_STATE,
        _LIBVIRT_STATE,
        HostPath("/dev", False, "attach volumes (iSCSI, rbd)"),
        _ISCSI,
    ),
    why="drives libvirt, attaches block devices and serves live migration on the host network",
)
OVS_AGENT = Role(
    name="neutron-ovs-agent",
    image="neutron-openvswitch-agent",
    # Its privsep daemon asks for SYS_ADMIN, NET_ADMIN, DAC_OVERRIDE, DAC_READ_SEARCH and SYS_PTRACE
    # (neutron/privileged/__init__.py) and dies without them; kolla-ansible and openstack-helm run
    # it privileged.
    privileged=True,
    host_network=True,
    host_paths=(_MODULES, _OVS_RUN),
    why="programs OVS flows and host iptables for security groups through neutron's privsep daemon",
)
# The compute nodes' OpenStack agents: a pod of them (NodePod.agent) may be replaced on several nodes at once.
AGENT_ROLES = frozenset({NOVA_COMPUTE.name, OVS_AGENT.name})
L3_AGENT = Role(
    name="neutron-l3-agent",
    image="neutron-l3-agent",
    privileged=True,
    host_network=True,
    host_paths=(_MODULES, _OVS_RUN, _NETNS, _NEUTRON_STATE),
    why="routers live in host network namespaces, which needs Bidirectional mounts",
)
DHCP_AGENT = Role(
    name="neutron-dhcp-agent",
    image="neutron-dhcp-agent",
    privileged=True,
    host_network=True,
    host_paths=(_OVS_RUN, _NETNS, _NEUTRON_STATE),
    why="dnsmasq runs in host network namespaces, which needs Bidirectional mounts",
)
METADATA_AGENT = Role(
    name="neutron-metadata-agent",
    image="neutron-metadata-agent",
    host_paths=(_NEUTRON_STATE,),
    why="answers the proxies of the l3/dhcp agents over a socket on the host",
)


ISCSID = Role(
    name="iscsid",
    image="iscsid",
    privileged=True,
    # iscsiadm (in nova-compute) reaches iscsid over an abstract socket of the host network;
    # kolla-ansible also gives it the host's IPC namespace.
    host_network=True,
    host_ipc=True,
    host_paths=(_MODULES, HostPath("/dev", False, "the SCSI devices of attached volumes"), _ISCSI),
    why="the iSCSI initiator daemon through which nova-compute attaches LVM/iSCSI volumes",
)
CINDER_VOLUME = Role(
    name="cinder-volume",
    image="cinder-volume",
    privileged=True,
    host_network=True,
    host_paths=(
        _MODULES,
        HostPath("/dev", False, "loop and device-mapper devices of the volume group"),
        HostPath(
            "/var/lib/cinder", False, "the loop file or NFS mounts; must outlive the pod", propagation="Bidirectional"
        ),
        HostPath("/sys/kernel/config", False, "LIO iSCSI target configuration (configfs)"),
        HostPath("/run/lock/lvm", False, "LVM's lock files, shared with the host"),
    ),
    why="manages LVM volumes and exports them over iSCSI from the node's address",
)
# The rbd backend talks to Ceph through librbd: none of the LVM and iSCSI target's host paths (a
# node without configfs or LVM could not start the pod). Privileged and in the host network as
# kolla-ansible runs every cinder-volume (os-brick's privsep daemon, for volume copies and
# migrations); the host network also keeps the service's host name the node's across restarts.
CINDER_VOLUME_RBD = Role(
    name="cinder-volume",
    image="cinder-volume",
    privileged=True,
    host_network=True,
    why="manages the volumes of the rbd backend in Ceph through librbd",
)


CINDER_BACKUP = Role(
    name="cinder-backup",
    image="cinder-backup",
    # cinder-backup reads a volume through os-brick's connector, and os-brick gathers every
    # connector's properties first, some through its privsep daemon (rootwrap, SYS_ADMIN):
    # kolla-ansible runs it privileged. It backs up rbd volumes only, to Ceph through librbd and
    # the rbd command (export-diff | import-diff), or to S3 reading them through librbd (os-brick's
    # RBD connector without a kernel mapping), so it needs none of the host's paths or network.
    privileged=True,
    why="backs volumes up through os-brick, whose connector probes run in its privsep daemon",
)


@dataclass(frozen=True)
class NodePod:
    """One DaemonSet's pod on a node: the labels it carries and its containers' roles."""

    name: str  # DaemonSet name; also app.kubernetes.io/component
    service: str  # app.kubernetes.io/name
    node: NodeKind
    roles: tuple[Role, ...]
    # Datapath pods are restarted only by the operator under a VM-safe stack (OnDelete).
    holds_vms_or_datapath: bool = False

    def role(self, container: str) -> Role:
        """The role of a container of this pod; containers are named after their roles."""
        for role in self.roles:
            if role.name == container:
                return role
        raise KeyError(f"pod {self.name} has no role {container!r} (roles: {', '.join(r.name for r in self.roles)})")

    @property
    def host_network(self) -> bool:
        return any(r.host_network for r in self.roles)

    @property
    def agent(self) -> bool:
        """An OpenStack agent's pod (nova-compute, the OVS agent) that holds neither the VMs nor the datapath:
        replaced, it leaves the node's VMs and their traffic running (compute.agentsMaxUnavailable)."""
        return not self.holds_vms_or_datapath and any(r.name in AGENT_ROLES for r in self.roles)

    @property
    def host_pid(self) -> bool:
        return any(r.host_pid for r in self.roles)

    @property
    def host_ipc(self) -> bool:
        return any(r.host_ipc for r in self.roles)


NETWORK_NODE_PODS: tuple[NodePod, ...] = (
    NodePod("neutron-l3-agent", "neutron", NodeKind.NETWORK, (L3_AGENT,)),
    NodePod("neutron-dhcp-agent", "neutron", NodeKind.NETWORK, (DHCP_AGENT,)),
    NodePod("neutron-metadata-agent", "neutron", NodeKind.NETWORK, (METADATA_AGENT,)),
)


CINDER_VOLUME_NAME = "cinder-volume"
# A backend's role: LVM's host paths and iSCSI target, or none of them for librbd (and NFS mounts
# need LVM's /var/lib/cinder with its propagation, so nfs takes the LVM role).
CINDER_VOLUME_ROLES = {"lvm": CINDER_VOLUME, "nfs": CINDER_VOLUME, "rbd": CINDER_VOLUME_RBD}


def cinder_volume_pod(backend: str, first: bool) -> NodePod:
    """The cinder-volume pod of one backend: `cinder-volume` for the first listed (so adding a
    backend leaves the existing pods as they are), `cinder-volume-<backend>` for every other."""
    name = CINDER_VOLUME_NAME if first else f"{CINDER_VOLUME_NAME}-{backend}"
    return NodePod(name, "cinder", NodeKind.STORAGE, (CINDER_VOLUME_ROLES[backend],))


# Declared only with cinder.backup (components/services/cinder.py).
CINDER_BACKUP_POD = NodePod("cinder-backup", "cinder", NodeKind.STORAGE, (CINDER_BACKUP,))
# Every cinder-volume pod a stack may run, and cinder-backup's. The pack judges `cinder-volume`
# by the LVM role (which grants the most): whichever backend is listed first runs in it.
STORAGE_NODE_PODS: tuple[NodePod, ...] = (
    cinder_volume_pod("lvm", first=True),
    *(cinder_volume_pod(backend, first=False) for backend in CINDER_VOLUME_ROLES),
    CINDER_BACKUP_POD,
)


# libvirt's certificate on a compute node (tls.libvirt, components/nodes/libvirt_tls.py): it asks
# cert-manager for the node's certificate and writes it where libvirt and QEMU read it, under the
# host's /run/libvirt (memory, not disk), then has libvirtd and the running QEMUs load a renewal.
# No privilege: root only to reach libvirt's root-only admin socket, and CHOWN to give QEMU's group
# (nova) its key. A pod of its own, not a container of libvirt's: the API token stays out of the
# privileged pod, and it may restart or roll without touching libvirt or a VM.
LIBVIRT_TLS = Role(
    name="libvirt-tls",
    image="nova-libvirt",
    capabilities=("CHOWN",),
    host_paths=(_LIBVIRT_RUN,),
    why="keeps the node's libvirt certificate current: writes it under /run/libvirt and reloads libvirt's TLS",
)
LIBVIRT_TLS_POD = NodePod("libvirt-tls", "nova", NodeKind.COMPUTE, (LIBVIRT_TLS,))


# Attaching iSCSI volumes needs the initiator daemon on every compute node. Under options 2 and
# 3 the host runs it with libvirt and OVS; otherwise it is a pod of its own, declared only for
# an iSCSI backend (lvm among cinder.backends).
ISCSID_POD = NodePod("iscsid", "nova", NodeKind.COMPUTE, (ISCSID,))


def compute_node_pods(topology: Topology) -> tuple[NodePod, ...]:
    """The pods on every compute node for a topology: seed 000, options 1-5 (iscsid aside)."""
    compute = NodeKind.COMPUTE
    if topology is Topology.ALL_IN_ONE:
        return (
            NodePod(
                "compute-node",
                "nova",
                compute,
                (_libvirt(False), OVSDB, VSWITCHD, NOVA_COMPUTE, OVS_AGENT),
                holds_vms_or_datapath=True,
            ),
        )
    if topology is Topology.BAREMETAL_HYPERVISOR_SHARED_POD:
        return (NodePod("compute-node", "nova", compute, (NOVA_COMPUTE, OVS_AGENT)),)
    if topology is Topology.BAREMETAL_HYPERVISOR:
        return (
            NodePod("nova-compute", "nova", compute, (NOVA_COMPUTE,)),
            NodePod("neutron-ovs-agent", "neutron", compute, (OVS_AGENT,)),
        )
    host_pid = topology is Topology.POD_PER_SERVICE_HOST_PID
    return (
        NodePod("libvirt", "nova", compute, (_libvirt(host_pid),), holds_vms_or_datapath=True),
        NodePod("openvswitch-db", "openvswitch", compute, (OVSDB,), holds_vms_or_datapath=True),
        NodePod("openvswitch-vswitchd", "openvswitch", compute, (VSWITCHD,), holds_vms_or_datapath=True),
        NodePod("nova-compute", "nova", compute, (NOVA_COMPUTE,)),
        NodePod("neutron-ovs-agent", "neutron", compute, (OVS_AGENT,)),
    )


def network_node_pods(topology: Topology) -> tuple[NodePod, ...]:
    """Network nodes that are not also compute nodes need OVS and its agent of their own.

    Under options 2 and 3 the hosts run OVS themselves, so only the agent is a pod.
    """
    network = NodeKind.NETWORK
    ovs = (
        ()
        if topology.host_runs_hypervisor
        else (
            NodePod("network-openvswitch-db", "openvswitch", network, (OVSDB,), holds_vms_or_datapath=True),
            NodePod("network-openvswitch-vswitchd", "openvswitch", network, (VSWITCHD,), holds_vms_or_datapath=True),
        )
    )
    return (*ovs, NodePod("network-neutron-ovs-agent", "neutron", network, (OVS_AGENT,)), *NETWORK_NODE_PODS)


@cache  # the policy pack asks for every pod template it judges
def node_pods(topology: Topology) -> tuple[NodePod, ...]:
    """Every privileged pod a stack with this topology may run."""
    in_pods = () if topology.host_runs_hypervisor else (ISCSID_POD, LIBVIRT_TLS_POD)
    return compute_node_pods(topology) + in_pods + network_node_pods(topology) + STORAGE_NODE_PODS
