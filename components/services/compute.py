"""Compute nodes: the stack's hypervisor isolation topology, built for every node group.

Which pods run on a node, and with which host access, comes from the role table
(`components.tables.roles`); this module adds what each container runs and what it waits for.
Each node group gets its own DaemonSets, nova.conf and libvirt config, so groups of
different hardware (kvm, qemu, lxc; CPU models) live side by side.
"""

from __future__ import annotations

import dataclasses

from components.infrastructure import ceph
from components.mechanism import oslo
from components.mechanism.api import HEALTH_SCRIPT, connected_to
from components.mechanism.bootstrap import client_env
from components.mechanism.inifile import render_ini
from components.mechanism.spec import Process, RenderContext, ServiceSpec
from components.mechanism.workload import Manifest, Mount, Probe, env
from components.nodes import libvirt, libvirt_tls, maintenance
from components.nodes.compute_pods import compute_pods
from components.services.neutron import agent_sections, ovs_agent_sections
from components.services.nova import nova_sections
from components.settings import scheduling
from components.settings.ceph import CephClient
from components.settings.model import NodeGroup, Settings
from components.tables.roles import (
    NodeKind,
    NodePod,
    Role,
    Topology,
    network_node_pods,
)

# The passwords of the services whose processes run on the nodes. The database password and
# the metadata secret only fill nova's shared sections, which a node group's nova.conf drops
# (_nova_compute_conf); host discovery is Nova's Job and reads nova-etc (components/services/nova.py).
COMPUTE_SECRETS = (
    "nova-keystone",
    "nova-rabbitmq",
    "nova-db",
    "nova-memcache",
    "metadata-proxy-shared-secret",
    "neutron-rabbitmq",
    libvirt.SASL_PASSWORD,
)
# A stopping nova-compute finishes what it is doing (a migration, a build) before it goes.
COMPUTE_GRACE_SECONDS = 600
# On the nodes' own pods, a sibling comes up within minutes; a host service is there or not.
SIBLING_WAIT, HOST_WAIT = 600, 20
NOVA_CONTROL_PLANE = ("nova-db-sync", "nova-rabbit-init", "nova-api", "nova-metadata")
# nova-compute reports its inventory to Placement and builds VMs from Glance images on
# Neutron ports from its first minutes; it starts when all of them answer.
COMPUTE_NEEDS = (*NOVA_CONTROL_PLANE, "placement-api", "glance-api", "neutron-server")
OVS_AGENT_NEEDS = ("neutron-server", "neutron-rabbit-init")


NODE_IP = oslo.NODE_IP
# nova-compute's options that name the node's own address, given through oslo.config's
# environment (oslo.node_address_env), so one rendered nova.conf serves every node of a group.
# Consoles and migrations then use the node's address, never 0.0.0.0 or the pod's loopback (as
# kolla-ansible's api_interface_address and openstack-helm's per-node init script do).
NODE_ADDRESS_OPTIONS = (
    ("DEFAULT", "my_ip"),
    ("vnc", "server_listen"),
    ("vnc", "server_proxyclient_address"),
    ("libvirt", "live_migration_inbound_addr"),
)


def node_address_env() -> tuple[Manifest, ...]:
    return oslo.node_address_env(*NODE_ADDRESS_OPTIONS)


def ceph_clients(settings: Settings, group: NodeGroup) -> tuple[CephClient, ...]:
    """The Ceph clients a node group's nova-compute and libvirt use: cinder's for rbd volumes,
    Nova's for disks in the vms pool (each once, when they are one client)."""
    if settings.ceph is None:
        return ()
    clients = settings.ceph.clients
    found: list[CephClient] = []
    if settings.services.on("cinder") and "rbd" in settings.cinder.backends:
        found.append(clients.cinder)
    if settings.compute.ephemeral_of(group) == "rbd":
        found.append(clients.nova_client)
    return ceph.distinct(found)


def _rbd_disks(settings: Settings) -> dict[str, object]:
    """kolla-ansible's [libvirt] options for nova_backend rbd (nova.conf.d/libvirt.conf.j2).

    rbd_user and rbd_secret_uuid are Nova's client for the disks in the vms pool (and the images
    it clones them from); a Cinder volume brings its own client and secret UUID in its connection
    info, which nova's libvirt volume driver prefers (nova/virt/libvirt/volume/net.py).
    """
    assert settings.ceph is not None  # settings refuse ephemeralStorage rbd without a cluster
    client = settings.ceph.clients.nova_client
    return {
        "images_type": "rbd",
        "images_rbd_pool": settings.ceph.pools.vms,
        "images_rbd_ceph_conf": ceph.CONF,
        "rbd_user": client.user,
        "rbd_secret_uuid": settings.ceph.libvirt_secret_uuid(client),
        # QEMU caches writes to RBD (librbd's cache honours the guest's flushes) and passes the
        # guest's discards down, so deleted data frees space in the pool: kolla-ansible's defaults.
        "disk_cachemodes": "network=writeback",
        "hw_disk_discard": "unmap",
    }


def _nova_compute_conf(nova_ctx: RenderContext, group: NodeGroup) -> str:
    sections = nova_sections(nova_ctx)
    # Compute nodes reach the databases only through nova-conductor, and the metadata
    # secret is for the metadata API and Neutron's agents only. nova-compute serves no API, so
    # it validates no tokens, and keeps no cache in memcached (which only the control plane's
    # pods may reach: components/infrastructure/isolation.py).
    for private in ("database", "api_database", "keystone_authtoken", "cache"):
        del sections[private]
    del sections["neutron"]["metadata_proxy_shared_secret"]
    cpu_models = ",".join(group.cpu_models) or None
    sections["DEFAULT"].update(
        compute_driver="libvirt.LibvirtDriver",
        reserved_host_memory_mb=group.reserved_host_memory_mb,
        reserved_host_cpus=group.reserved_host_cpus,
    )
    # server_listen, server_proxyclient_address, my_ip and live_migration_inbound_addr are the
    # node's own address, which only the pod knows: set from NODE_IP (node_address_env()).
    sections["libvirt"] = {"virt_type": group.virt_type, "cpu_mode": group.cpu_mode, "cpu_models": cpu_models}
    if libvirt_tls.enabled(nova_ctx.settings):
        sections["libvirt"].update(libvirt_tls.nova_compute_options())
    if nova_ctx.settings.compute.ephemeral_of(group) == "rbd":
        sections["libvirt"].update(_rbd_disks(nova_ctx.settings))
    return render_ini(sections)


def render(ctx: RenderContext) -> dict[str, str]:
    neutron_ctx = RenderContext(ctx.settings, {"rabbitmq": ctx.secrets["neutron-rabbitmq"]})
    nova_ctx = RenderContext(
        ctx.settings,
        {
            "keystone": ctx.secrets["nova-keystone"],
            "rabbitmq": ctx.secrets["nova-rabbitmq"],
            "database": ctx.secrets["nova-db"],
            "metadata-proxy-shared-secret": ctx.secrets["metadata-proxy-shared-secret"],
            oslo.MEMCACHE_KEY: ctx.secrets["nova-memcache"],
        },
    )
    files = {
        "neutron.conf": render_ini(agent_sections(neutron_ctx)),
        "openvswitch_agent.ini": render_ini(ovs_agent_sections(neutron_ctx)),
    }
    for group in ctx.settings.compute.node_groups:
        files[f"nova-{group.name}.conf"] = _nova_compute_conf(nova_ctx, group)
        files.update(libvirt.config_files(group, tls=libvirt_tls.enabled(ctx.settings)))
    files.update(libvirt.sasl_files(ctx.secrets[libvirt.SASL_PASSWORD], tls=libvirt_tls.enabled(ctx.settings)))
    if any(ceph_clients(ctx.settings, group) for group in ctx.settings.compute.node_groups):
        files.update(ceph.conf_files(ctx.settings))
    return files


# nova's Keystone password, for the compute node's own API calls (its preStop hook), in a
# Secret of its own: nova-passwords also holds nova's database password, which no node may read.
NODE_CREDENTIALS = "compute-credentials"


def _nova_credentials(settings: Settings) -> tuple[Manifest, ...]:
    # Microversion 2.53 addresses services by id, as compute_service.py does.
    return (
        *client_env(settings, "nova", NODE_CREDENTIALS, "keystone", oslo.SERVICE_PROJECT),
        env("OS_COMPUTE_API_VERSION", "2.53"),
    )


class _Containers:
    """What each role's container runs, for one node group (or the network nodes)."""

    def __init__(self, settings: Settings, topology: Topology, group: NodeGroup | None):
        self.settings, self.topology, self.group = settings, topology, group
        # Under options 2 and 3 libvirt and OVS are the host's: check once, and say so.
        self.wait = HOST_WAIT if topology.host_runs_hypervisor else SIBLING_WAIT
        self.hint = (
            f"hypervisorIsolation {topology.value} expects libvirt and Open vSwitch installed and running on the host"
            if topology.host_runs_hypervisor
            else "its sibling container on this node has not started it"
        )

    def __call__(self, role: Role) -> Process:
        return getattr(self, role.name.replace("-", "_"))(role)

    def _ceph(self) -> tuple[tuple[str, ...], tuple[Manifest, ...], tuple[Mount, ...], tuple[Manifest, ...]]:
        """ceph.conf, the keyrings of the group's Ceph clients (nova-compute and libvirt) and what
        libvirt defines its secrets from."""
        assert self.group is not None
        clients = ceph_clients(self.settings, self.group)
        if self.settings.ceph is None or not clients:
            return (), (), (), ()
        volumes, mounts = ceph.keyrings(self.settings.ceph, clients)
        conf = ceph.conf_entries(self.settings)
        return conf, volumes, mounts, ceph.libvirt_clients_env(self.settings.ceph, clients)

    def _ceph_needs(self) -> tuple[str, ...]:
        """With Rook, the Job that writes the keyrings this group's pods mount (if they mount any)."""
        assert self.group is not None
        return ceph.needs(self.settings) if ceph_clients(self.settings, self.group) else ()

    def libvirt(self, role: Role) -> Process:
        assert self.group is not None
        name = self.group.name
        ceph_files, ceph_volumes, ceph_mounts, ceph_env = self._ceph()
        return Process(
            name=role.name,
            image=role.image,
            command=("bash", "/scripts/libvirt_start.sh"),
            needs=self._ceph_needs(),
            config_files=(
                f"libvirtd-{name}.conf=/etc/libvirt/libvirtd.conf",
                f"qemu-{name}.conf=/etc/libvirt/qemu.conf",
                *libvirt.SASL_MOUNTS,
                *ceph_files,
            ),
            scripts=("libvirt_start.sh",),
            env=(
                env("ESCAPE_POD_CGROUP", str(role.host_pid).lower()),
                NODE_IP,
                *libvirt.sasl_env(),
                *libvirt.qemu_env(self.group),
                *ceph_env,
                *(libvirt_tls.libvirt_env() if libvirt_tls.in_pods(self.settings) else ()),
            ),
            extra_volumes=ceph_volumes,
            extra_mounts=ceph_mounts,
            probe=Probe(command=("virsh", "-c", "qemu:///system", "uri")),
        )

    def libvirt_tls(self, role: Role) -> Process:
        return libvirt_tls.node_process(self.settings)

    def openvswitch_db(self, role: Role) -> Process:
        return Process(
            name=role.name,
            image=role.image,
            command=("bash", "/scripts/ovsdb_start.sh"),
            needs=(),
            scripts=("ovsdb_start.sh",),
            env=(env("OVSDB_PORT", str(oslo.OVSDB_PORT)),),
            # Ready when it answers where its clients connect: TCP on the loopback, and the socket.
            probe=Probe(command=("ovsdb-client", "list-dbs", f"tcp:127.0.0.1:{oslo.OVSDB_PORT}")),
        )

    def openvswitch_vswitchd(self, role: Role) -> Process:
        neutron = self.settings.neutron
        own = self.group.bridge_interfaces if self.group else None
        interfaces = neutron.bridge_interfaces if own is None else own
        bridges = " ".join(f"{b}={interfaces.get(b, '')}" for b in sorted(set(neutron.bridge_mappings.values())))
        return Process(
            name=role.name,
            image=role.image,
            command=("bash", "/scripts/vswitchd_start.sh"),
            needs=(),
            scripts=("vswitchd_start.sh",),
            env=(
                env("BRIDGES", bridges),
                env("DATAPATH_TYPE", neutron.datapath_type),
                env("USERSPACE_TSO", str(neutron.userspace_tso).lower()),
            ),
            probe=Probe(command=("ovs-appctl", "-t", "ovs-vswitchd", "version")),
        )

    def nova_compute(self, role: Role) -> Process:
        assert self.group is not None
        ceph_files, ceph_volumes, ceph_mounts, _ = self._ceph()
        return Process(
            name=role.name,
            image=role.image,
            command=("bash", "/scripts/nova_compute_start.sh"),
            needs=(*COMPUTE_NEEDS, *self._ceph_needs()),
            config_files=(f"nova-{self.group.name}.conf=/etc/nova/nova.conf", libvirt.AUTH_MOUNT, *ceph_files),
            extra_volumes=ceph_volumes,
            extra_mounts=ceph_mounts,
            scripts=("nova_compute_start.sh", "wait_for_sockets.sh", "compute_service.py", HEALTH_SCRIPT),
            env=(
                *_nova_credentials(self.settings),
                env("SOCKET_TIMEOUT", str(self.wait)),
                env("SOCKET_HINT", self.hint),
                *node_address_env(),
            ),
            probe=connected_to(oslo.RABBITMQ_PORT),
            # Draining a node: first stop new VMs landing here, then let the pod go.
            lifecycle={"preStop": {"exec": {"command": ["python3", "/scripts/compute_service.py", "disable"]}}},
            termination_grace=COMPUTE_GRACE_SECONDS,
        )

    def iscsid(self, role: Role) -> Process:
        return Process(
            name=role.name,
            image=role.image,
            command=("bash", "/scripts/iscsid_start.sh"),
            needs=(),
            scripts=("iscsid_start.sh",),
            probe=Probe(command=("pgrep", "-x", "iscsid")),
        )

    def neutron_ovs_agent(self, role: Role) -> Process:
        return Process(
            name=role.name,
            image=role.image,
            command=("bash", "/scripts/ovs_agent_start.sh"),
            needs=OVS_AGENT_NEEDS,
            config_files=(
                "neutron.conf=/etc/neutron/neutron.conf",
                "openvswitch_agent.ini=/etc/neutron/plugins/ml2/openvswitch_agent.ini",
            ),
            scripts=("ovs_agent_start.sh", "wait_for_sockets.sh", HEALTH_SCRIPT),
            env=(
                env("SOCKET_TIMEOUT", str(self.wait)),
                env("SOCKET_HINT", self.hint),
                NODE_IP,
            ),
            probe=connected_to(oslo.RABBITMQ_PORT),
        )


def _pod_process(pod: NodePod, containers: _Containers, settings: Settings, name: str, **extra: object) -> Process:
    """One DaemonSet: the pod's first role is its main container, the others its sidecars."""
    main, *sidecars = (containers(role) for role in pod.roles)
    return dataclasses.replace(
        main,
        needs=tuple(dict.fromkeys(n for p in (main, *sidecars) for n in p.needs)),
        node_pod=pod,
        sidecars=tuple(sidecars),
        on_delete=settings.compute.vm_safe and pod.holds_vms_or_datapath,
        # A network node's agents hold its routers and DHCP: one node at a time.
        max_unavailable=settings.compute.agents_max_unavailable if pod.agent and pod.node is NodeKind.COMPUTE else 1,
        workload_name=name,
        **extra,  # type: ignore[arg-type]
    )


def compute(settings: Settings) -> ServiceSpec:
    topology = settings.hypervisor_isolation
    processes: list[Process] = []
    containers_of: dict[str, _Containers] = {}
    for group, pod, name in compute_pods(settings):
        if group.name not in containers_of:
            containers_of[group.name] = _Containers(settings, topology, group)
        containers = containers_of[group.name]
        processes.append(
            _pod_process(
                pod,
                containers,
                settings,
                name,
                node_selector=dict(group.node_selector),
                tolerations=tuple(scheduling.manifests(group.tolerations)),
                extra_labels={"openstack.org/node-group": group.name},
            )
        )
    network_containers = _Containers(settings, topology, None)
    for pod in network_node_pods(topology):
        if pod.name.startswith("network-"):
            # Network nodes that are also compute nodes already run OVS in their compute pods.
            processes.append(
                _pod_process(pod, network_containers, settings, pod.name, avoid_nodes=settings.node_selectors.compute)
            )
    if maintenance.enabled(settings):
        processes.append(maintenance.maintenance_process(settings, _nova_credentials(settings)))
    return ServiceSpec(
        name="compute",
        extra_secrets={
            libvirt.SASL_SECRET: {"password": libvirt.SASL_PASSWORD},
            NODE_CREDENTIALS: {"keystone": "nova-keystone"},
        },
        config_dir="/etc/nova",
        render=render,
        shared_secrets=COMPUTE_SECRETS,
        processes=tuple(processes),
    )
