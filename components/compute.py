"""Compute nodes: the stack's hypervisor isolation topology, built for every node group.

Which pods run on a node, and with which host access, comes from the role table
(`components.roles`); this module adds what each container runs and what it waits for.
Each node group gets its own DaemonSets, nova.conf and libvirt config, so groups of
different hardware (kvm, qemu, lxc; CPU models) live side by side.
"""

from __future__ import annotations

import dataclasses

import pulumi

from components import oslo
from components.api import HEALTH_SCRIPT, connected_to
from components.bootstrap import client_env, passwords_secret
from components.inifile import render_ini
from components.neutron import neutron_sections, ovs_agent_sections
from components.nova import host_discovery, nova_sections
from components.nova import render as render_nova
from components.openstack_service import BuildContext, OpenStackService
from components.roles import NodeKind, NodePod, Role, Topology, compute_node_pods, network_node_pods
from components.settings import NodeGroup, Settings
from components.spec import Process, RenderContext, ServiceSpec
from components.workload import Manifest, Probe, env

# The passwords of the services whose processes run on the nodes. The database password
# and the metadata secret only go into the nova.conf of host discovery, which no node mounts.
COMPUTE_SECRETS = (
    "nova-keystone",
    "nova-rabbitmq",
    "nova-db",
    "metadata-proxy-shared-secret",
    "neutron-rabbitmq",
    "neutron-keystone",
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


def group_suffix(group: NodeGroup) -> str:
    """DaemonSets of the group 'default' carry no suffix; names never change with the group count."""
    return "" if group.name == "default" else f"-{group.name}"


def _nova_compute_conf(nova_ctx: RenderContext, group: NodeGroup) -> str:
    sections = nova_sections(nova_ctx)
    # Compute nodes reach the databases only through nova-conductor, and the metadata
    # secret is for the metadata API and Neutron's agents only.
    for private in ("database", "api_database"):
        del sections[private]
    del sections["neutron"]["metadata_proxy_shared_secret"]
    cpu_models = ",".join(group.cpu_models) or None
    sections["DEFAULT"].update(
        compute_driver="libvirt.LibvirtDriver",
        reserved_host_memory_mb=group.reserved_host_memory_mb,
        reserved_host_cpus=group.reserved_host_cpus,
    )
    sections["vnc"].update(server_listen="0.0.0.0")
    sections["libvirt"] = {"virt_type": group.virt_type, "cpu_mode": group.cpu_mode, "cpu_models": cpu_models}
    return render_ini(sections)


def _libvirt_files(group: NodeGroup) -> dict[str, str]:
    # Plain key = value files read by libvirt, not INI: written line by line.
    libvirtd = {
        "listen_tls": 0,
        "unix_sock_group": '"root"',
        "unix_sock_rw_perms": '"0770"',
        "auth_unix_rw": '"none"',
        "log_outputs": '"3:stderr"',
    }
    qemu = {"user": '"root"', "group": '"root"', "stdio_handler": '"file"'}
    if group.virt_type == "lxc":
        qemu = {}
    text = lambda values: "".join(f"{k} = {v}\n" for k, v in values.items())  # noqa: E731
    return {f"libvirtd-{group.name}.conf": text(libvirtd), f"qemu-{group.name}.conf": text(qemu)}


def render(ctx: RenderContext) -> dict[str, str]:
    neutron_ctx = RenderContext(
        ctx.settings, {"keystone": ctx.secrets["neutron-keystone"], "rabbitmq": ctx.secrets["neutron-rabbitmq"]}
    )
    nova_ctx = RenderContext(
        ctx.settings,
        {
            "keystone": ctx.secrets["nova-keystone"],
            "rabbitmq": ctx.secrets["nova-rabbitmq"],
            "database": ctx.secrets["nova-db"],
            "metadata-proxy-shared-secret": ctx.secrets["metadata-proxy-shared-secret"],
        },
    )
    files = {
        "nova.conf": render_nova(nova_ctx)["nova.conf"],
        "neutron.conf": render_ini(neutron_sections(neutron_ctx, database=False)),
        "openvswitch_agent.ini": render_ini(ovs_agent_sections(neutron_ctx)),
    }
    for group in ctx.settings.compute.node_groups:
        files[f"nova-{group.name}.conf"] = _nova_compute_conf(nova_ctx, group)
        files.update(_libvirt_files(group))
    return files


def _nova_credentials(settings: Settings) -> tuple[Manifest, ...]:
    # Microversion 2.53 addresses services by id, as compute_service.py does.
    return (
        *client_env(settings, "nova", passwords_secret("nova"), "keystone", oslo.SERVICE_PROJECT),
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

    def libvirt(self, role: Role) -> Process:
        assert self.group is not None
        name = self.group.name
        return Process(
            name=role.name,
            image=role.image,
            command=("bash", "/scripts/libvirt_start.sh"),
            needs=(),
            config_files=(
                f"libvirtd-{name}.conf=/etc/libvirt/libvirtd.conf",
                f"qemu-{name}.conf=/etc/libvirt/qemu.conf",
            ),
            scripts=("libvirt_start.sh",),
            env=(env("ESCAPE_POD_CGROUP", str(role.host_pid).lower()),),
            probe=Probe(command=("virsh", "-c", "qemu:///system", "uri")),
        )

    def openvswitch_db(self, role: Role) -> Process:
        return Process(
            name=role.name,
            image=role.image,
            command=("bash", "/scripts/ovsdb_start.sh"),
            needs=(),
            scripts=("ovsdb_start.sh",),
            probe=Probe(command=("ovsdb-client", "list-dbs", "unix:/run/openvswitch/db.sock")),
        )

    def openvswitch_vswitchd(self, role: Role) -> Process:
        bridges = " ".join(sorted(set(self.settings.neutron.bridge_mappings.values())))
        return Process(
            name=role.name,
            image=role.image,
            command=("bash", "/scripts/vswitchd_start.sh"),
            needs=(),
            scripts=("vswitchd_start.sh",),
            env=(env("BRIDGES", bridges),),
            probe=Probe(command=("ovs-appctl", "-t", "ovs-vswitchd", "version")),
        )

    def nova_compute(self, role: Role) -> Process:
        assert self.group is not None
        return Process(
            name=role.name,
            image=role.image,
            command=("bash", "/scripts/nova_compute_start.sh"),
            needs=COMPUTE_NEEDS,
            config_files=(f"nova-{self.group.name}.conf=/etc/nova/nova.conf",),
            scripts=("nova_compute_start.sh", "wait_for_sockets.sh", "compute_service.py", HEALTH_SCRIPT),
            env=(
                *_nova_credentials(self.settings),
                env("SOCKET_TIMEOUT", str(self.wait)),
                env("SOCKET_HINT", self.hint),
            ),
            probe=connected_to(oslo.RABBITMQ_PORT),
            # Draining a node: first stop new VMs landing here, then let the pod go.
            lifecycle={"preStop": {"exec": {"command": ["python3", "/scripts/compute_service.py", "disable"]}}},
            termination_grace=COMPUTE_GRACE_SECONDS,
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
                {"name": "NODE_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.hostIP"}}},
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
        workload_name=name,
        **extra,  # type: ignore[arg-type]
    )


def compute(settings: Settings) -> ServiceSpec:
    topology = settings.hypervisor_isolation
    processes: list[Process] = []
    for group in settings.compute.node_groups:
        containers = _Containers(settings, topology, group)
        for pod in compute_node_pods(topology):
            processes.append(
                _pod_process(
                    pod,
                    containers,
                    settings,
                    f"{pod.name}{group_suffix(group)}",
                    node_selector=dict(group.node_selector),
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
    daemonsets = tuple(p.object_name for p in processes if p.node_pod and p.node_pod.node is NodeKind.COMPUTE)
    return ServiceSpec(
        name="compute",
        config_dir="/etc/nova",
        render=render,
        shared_secrets=COMPUTE_SECRETS,
        steps=(
            # Host discovery maps the compute hosts into cell1 once their services registered.
            host_discovery(needs=("nova-db-sync", *daemonsets)),
        ),
        processes=tuple(processes),
    )


class ComputeNodes(OpenStackService):
    def __init__(self, ctx: BuildContext, opts: pulumi.ResourceOptions | None = None):
        super().__init__(compute(ctx.settings), ctx, opts)
