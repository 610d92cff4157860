"""The whole stack configuration as one validated model.

Stack YAML (`openstack:<key>`) → `Settings.parse(raw)` → typed settings handed to the
components. Every problem in the input is reported at once, each naming the key, the
bad value and what is allowed, before any resource is declared. The checks that need more
than the settings (the names the map settings use, against the services' specs) are passed
in from above: components/cloud/stack_config.py reads a stack with all of them.
"""

from __future__ import annotations

import datetime
import ipaddress
import re
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BeforeValidator,
    Field,
    ValidationError,
    create_model,
    field_validator,
    model_validator,
)
from pydantic.alias_generators import to_camel, to_snake

from components.settings import cron, releases
from components.settings import gateway as gateway_settings
from components.settings import upgrade as upgrade_settings
from components.settings.base import Model
from components.settings.ceph import ROOK_RESERVED_CLIENTS, Ceph
from components.settings.gateway import Gateway, Tls
from components.settings.memory import SHARES as MEMORY_SHARES
from components.settings.memory import value_of
from components.settings.problems import PROJECT, Problem, SettingsError, problem
from components.settings.releases import DEFAULT_RELEASE, RELEASES
from components.settings.scheduling import NodeTolerations, PriorityClasses, Tolerations
from components.settings.value_types import (
    MAX_PORT,
    ByteQuantity,
    ChartVersion,
    CinderClusterName,
    Count,
    CpuModel,
    CpuQuantity,
    CronSchedule,
    DnsLabel,
    DnsName,
    DnsSubdomain,
    Duration,
    ImageReference,
    ImageRegistry,
    ImageTag,
    InterfaceName,
    LabelMap,
    NodesAtOnce,
    PhysnetName,
    S3Bucket,
    S3Endpoint,
    Text,
    VlanRange,
    admission_policy_problems,
    duration_seconds,
)
from components.tables import catalog
from components.tables.roles import Topology, compute_node_pods

# kubernetes-validate ships the schemas of these minor versions.
KUBERNETES_VERSIONS = tuple(f"1.{minor}" for minor in range(25, 38))
# The label the README proposes for node groups: one key, a value per group, so groups are disjoint.
NODE_GROUP_LABEL = "openstack-compute-group"
OPTIONAL_SERVICES = catalog.optional_services()
# What each service needs of the others at run time; settings refuse a cloud without them.
SERVICE_NEEDS = catalog.service_needs()


def _topology(value: object) -> Topology:
    try:
        return Topology.parse(value)
    except ValueError as error:
        raise ValueError(f"{error}; allowed: {Topology.allowed()}") from None


def _unset_when_empty(value: object) -> object:
    """`{}` is an optional section left unset. Pulumi.yaml gives every object key the default `{}`:
    the CLI refuses a stack that lacks a key declared without one (pulumi pkg/workspace/config.go,
    mergeConfig) and hands the program that default as JSON text."""
    return None if isinstance(value, Mapping) and not value else value


class Images(Model):
    registry: ImageRegistry = "quay.io/openstack.kolla"
    tag: ImageTag | None = Field(None, description="defaults to the release's Kolla tag")
    overrides: dict[Text, ImageReference] = Field(
        default_factory=dict, description="Kolla image name → full image reference, pinned by tag or digest"
    )


class Endpoints(Model):
    scheme: Literal["http", "https"] = "https"
    domain: DnsName = "cloud.example.com"
    hosts: dict[Text, DnsName] = Field(
        default_factory=dict, description="service → public host; default '<service>.<domain>'"
    )
    cluster_domain: DnsName = "cluster.local"


class Resources(Model):
    """A container's requests and limits; `resources.<workload>` sets some, `resources.default` the rest."""

    requests_cpu: CpuQuantity = "100m"
    requests_memory: ByteQuantity = "256Mi"
    limits_cpu: CpuQuantity = "1"
    limits_memory: ByteQuantity = "1Gi"


# What the program keeps on persistent volumes, each use with a storage class of its own.
StorageUse = Literal["database", "queue", "images", "backups"]


class StorageClasses(Model):
    """`storage.classes`: the storage class of each use; a use not named here takes `storage.storageClass`."""

    database: DnsSubdomain | None = Field(None, description="MariaDB's volumes: block storage (Galera fsyncs)")
    queue: DnsSubdomain | None = Field(None, description="RabbitMQ's volumes (quorum queues): block storage")
    images: DnsSubdomain | None = Field(
        None, description="the claim glance-images: ReadWriteMany (CephFS, NFS) when glance-api has several replicas"
    )
    backups: DnsSubdomain | None = Field(
        None, description="the claim mariadb-backup, unless backup.storage.pvc.storageClass names one"
    )


class Storage(Model):
    storage_class: DnsSubdomain | None = Field(
        None,
        description="the class of every use storage.classes does not name (what it meant before there were "
        "classes per use); None: the cluster's default storage class",
    )
    classes: StorageClasses = StorageClasses()
    mariadb_size: ByteQuantity = "10Gi"
    rabbitmq_size: ByteQuantity = "5Gi"
    glance_size: ByteQuantity = "20Gi"

    def class_for(self, use: StorageUse) -> str | None:
        """The storage class of a use: its own, else storageClass; None leaves it to the cluster's default."""
        return getattr(self.classes, use) or self.storage_class


class NodeSelectors(Model):
    control_plane: LabelMap = Field(default_factory=lambda: {"openstack-control-plane": "enabled"})
    network: LabelMap = Field(default_factory=lambda: {"openstack-network-node": "enabled"})
    compute: LabelMap = Field(default_factory=lambda: {"openstack-compute-node": "enabled"})
    storage: LabelMap = Field(default_factory=lambda: {"openstack-storage-node": "enabled"})


class ServiceSwitches(Model):
    """`services.<name>`: one switch per optional service of the catalog (components/tables/catalog.py)."""

    keystone: Literal[True] = Field(True, description="Keystone is always deployed")

    @model_validator(mode="after")
    def _needs(self) -> ServiceSwitches:
        missing = [
            f"{service} needs {need}"
            for service, needs in SERVICE_NEEDS.items()
            if self.on(service)
            for need in needs
            if not self.on(need)
        ]
        if missing:
            raise ValueError("; ".join(missing) + " to be enabled")
        return self

    def on(self, service: str) -> bool:
        """Whether the stack deploys this service (Keystone always)."""
        if service != "keystone" and service not in OPTIONAL_SERVICES:
            raise KeyError(f"no service {service!r} in components/tables/catalog.py")
        return bool(getattr(self, service))

    def enabled(self) -> tuple[str, ...]:
        return tuple(s for s in OPTIONAL_SERVICES if self.on(s))


# The switches are the catalog's: a service added there gets its `services.<name>` setting.
if TYPE_CHECKING:
    Services = ServiceSwitches
else:
    Services = create_model(
        "Services",
        __base__=ServiceSwitches,
        **{name: (bool, Field(True, description=f"deploy {name}")) for name in OPTIONAL_SERVICES},
    )


class Glance(Model):
    backend: Literal["file", "cinder", "rbd"] = Field(
        "file", description="file: a PersistentVolumeClaim; cinder: volumes; rbd: the ceph.pools.images pool"
    )
    scratch_size: ByteQuantity = Field(
        "20Gi",
        description="each glance-api pod's scratch volumes (emptyDirs of this sizeLimit) for images staged by "
        "an import and for the tasks' files: at least the largest image imported at once",
    )


CinderBackend = Literal["lvm", "nfs", "rbd"]


class Cinder(Model):
    backends: tuple[CinderBackend, ...] = Field(
        ("lvm",),
        min_length=1,
        description="each its own volume type and cinder-volume pods, the first the default type; lvm: a volume "
        "group on a loop file per storage node; nfs: nfsShares; rbd: ceph.pools.volumes",
    )
    backup: Literal["none", "ceph", "s3"] = Field(
        "none",
        description="cinder-backup and where it writes (rbd volumes only): ceph: the ceph.pools.backups pool; "
        "s3: the bucket backupS3 names",
    )
    backup_s3: CinderBackupBucket | None = Field(None, description="with backup s3: the bucket cinder-backup writes to")
    lvm_size: ByteQuantity = "50Gi"
    conversion_size: ByteQuantity = Field(
        "20Gi",
        description="each cinder-volume pod's scratch volume (an emptyDir of this sizeLimit) where images are "
        "converted before they are written to a volume: at least the largest image's virtual size",
    )
    cluster: CinderClusterName = Field(
        "cinder",
        description="[DEFAULT] cluster of the rbd backend's cinder-volume pods (cinder's active/active): every "
        "storage node serves every rbd volume, so a volume outlives the node that created it; each node's "
        "volumes join the cluster when its pod first starts with it (lvm and nfs stay per node)",
    )
    nfs_shares: tuple[Text, ...] = Field((), description="'host:/export' entries for the nfs backend")

    @model_validator(mode="before")
    @classmethod
    def _one_backend(cls, data: Any) -> Any:
        """`backend: x`, the setting before several backends, still means `backends: [x]`."""
        if not isinstance(data, Mapping) or "backend" not in data:
            return data
        if "backends" in data:
            raise ValueError("backend and backends both given: write the backends list only, e.g. backends: [rbd]")
        rest = {k: v for k, v in data.items() if k != "backend"}
        backend = data["backend"]
        return {**rest, "backends": [backend] if isinstance(backend, str) else backend}

    @field_validator("backends")
    @classmethod
    def _distinct(cls, backends: tuple[str, ...]) -> tuple[str, ...]:
        twice = sorted({b for b in backends if backends.count(b) > 1})
        if twice:
            raise ValueError(f"{', '.join(twice)} listed twice: each backend is one volume type, listed once")
        return backends

    @model_validator(mode="after")
    def _shares(self) -> Cinder:
        if "nfs" in self.backends and not self.nfs_shares:
            raise ValueError("backend 'nfs' needs at least one entry in nfsShares ('host:/export')")
        for share in self.nfs_shares:
            if not re.match(r"^[^:/\s]+:/\S*$", share):
                raise ValueError(f"nfsShares entry {share!r} is not of the form 'host:/export'")
        return self

    @property
    def default_backend(self) -> CinderBackend:
        """The backend of default_volume_type: the first listed."""
        return self.backends[0]

    def problems(self) -> Iterator[Problem]:
        """What cinder's S3 backup driver cannot do with backupS3, said of the key that fixes it."""
        s3 = self.backup_s3
        if self.backup == "s3" and s3 is None:
            yield problem(
                ("cinder", "backupS3"),
                None,
                "backup 's3' writes to a bucket: give bucket, endpoint and credentials (the name of a Secret in the "
                "stack's namespace with the keys access-key-id and secret-access-key)",
            )
        if s3 is None:
            return
        if self.backup != "s3":
            yield problem(
                ("cinder", "backupS3"),
                s3.model_dump(by_alias=True, exclude_defaults=True),
                f"is read only with backup 's3' (backup is {self.backup!r}): set backup: s3 or unset backupS3",
            )
        if s3.prefix is not None:
            # cinder/backup/drivers/s3.py: objects are named volume_<id>/<time>/az_<zone>_backup_<id>..., no option
            # puts them under a prefix.
            yield problem(
                ("cinder", "backupS3", "prefix"),
                s3.prefix,
                "cinder's S3 backup driver has no prefix option (it names objects volume_<id>/...): unset prefix, "
                "and give cinder-backup a bucket of its own",
            )
        if s3.ca_secret is not None and not s3.tls:
            yield problem(
                ("cinder", "backupS3", "caSecret"),
                s3.ca_secret,
                "verifies the endpoint's certificate, and tls is false (http): set tls: true or unset caSecret",
            )


# The OVS agent's VXLAN tunnels listen in the nodes' own network namespace, where the cluster's
# network plugin runs its tunnels too: a port bound twice fails one of them, or delivers one's
# packets to the other. UDP ports taken there, and by whom.
TAKEN_UDP_PORTS = {
    4789: "IANA's VXLAN port, used by Calico, Antrea's VXLAN mode and kube-ovn (and Open vSwitch's default)",
    4790: "VXLAN-GPE's port",
    4791: "RoCEv2's port (RDMA NICs take its packets in hardware)",
    6081: "Geneve's port, used by Antrea, OVN-Kubernetes and Cilium's Geneve mode",
    8472: "Linux's own VXLAN default, used by Flannel and Cilium",
}
# A UDP NodePort Service on the tunnel's port would take its packets (kube-proxy forwards them).
NODE_PORTS = range(30000, 32768)  # Kubernetes' default --service-node-port-range
VXLAN_UDP_PORT = 4792


def _vxlan_udp_port(port: int) -> int:
    if port in TAKEN_UDP_PORTS:
        raise ValueError(
            f"UDP {port} is {TAKEN_UDP_PORTS[port]}, which the cluster's network plugin may bind in the nodes' "
            f"network namespace too; take another, e.g. {VXLAN_UDP_PORT}"
        )
    if port in NODE_PORTS:
        raise ValueError(
            f"UDP {port} is in Kubernetes' NodePort range ({NODE_PORTS.start}-{NODE_PORTS.stop - 1}), where a "
            f"Service could take the tunnels' packets; take another, e.g. {VXLAN_UDP_PORT}"
        )
    return port


# neutron's OVS agent owns these bridges (integration_bridge, tunnel_bridge): no provider network goes there.
AGENT_BRIDGES = ("br-int", "br-tun")


def uplink_problems(interfaces: Mapping[str, str], bridges: Collection[str]) -> list[str]:
    """What is wrong with `bridge → NIC` uplinks: a NIC is a port of one bridge at most (OVS moves
    it, so the first bridge would lose it), and a bridge is no node's NIC."""
    problems = []
    for nic in sorted(set(interfaces.values())):
        owners = sorted(bridge for bridge, given in interfaces.items() if given == nic)
        if len(owners) > 1:
            problems.append(f"{nic} is the uplink of {' and '.join(owners)}: a NIC can be a port of one bridge only")
        if nic in {*AGENT_BRIDGES, *bridges, *interfaces}:
            problems.append(
                f"{nic} is a bridge (neutron's OVS agent's or one of bridgeMappings), not a NIC: "
                "an uplink is the node's own interface, e.g. eth1"
            )
    return problems


def _uplinks(value: dict[str, str]) -> dict[str, str]:
    problems = uplink_problems(value, ())
    if problems:
        raise ValueError("; ".join(problems))
    return value


BridgeInterfaces = Annotated[dict[InterfaceName, InterfaceName], AfterValidator(_uplinks)]


class Neutron(Model):
    bridge_mappings: dict[PhysnetName, InterfaceName] = Field(
        default_factory=lambda: {"physnet1": "br-ex"}, description="provider network → OVS bridge on network nodes"
    )
    bridge_interfaces: BridgeInterfaces = Field(
        default_factory=dict,
        description="OVS bridge → the node's NIC added to it (openstack-helm's auto_bridge_add), e.g. br-ex: eth1",
    )
    datapath_type: Literal["system", "netdev"] = Field(
        "system", description="system: the kernel datapath; netdev: Open vSwitch's userspace datapath"
    )
    userspace_tso: bool = Field(
        True,
        description="netdev only: Open vSwitch reads guests' taps with their offload header (userspace-tso-enable), "
        "so that the packets of guests that leave checksums to the host pass its conntrack. Open vSwitch before "
        "3.3 drops such packets at a VXLAN tunnel: turn it off there (Kolla's noble images have 3.3 or later)",
    )
    tenant_network_type: Literal["vxlan", "vlan"] = "vxlan"
    vlan_ranges: tuple[VlanRange, ...] = Field((), description="'physnet:first:last' for vlan tenant networks")
    network_node_count: Count | None = Field(
        None,
        ge=1,
        description="how many nodes nodeSelectors.network selects (the cluster knows, not the program); "
        "unset: 3 under ha, else 1. Under ha, routers are HA on up to 3 of them and networks get DHCP on 2",
    )
    vxlan_udp_port: Annotated[Count, Field(ge=1, le=MAX_PORT), AfterValidator(_vxlan_udp_port)] = Field(
        VXLAN_UDP_PORT,
        description="UDP port of the OVS agents' VXLAN tunnels, in the nodes' network namespace: not one of the "
        "ports network plugins tunnel on there (4789 Calico/Antrea, 8472 Flannel/Cilium, 6081 Geneve, "
        "4790 VXLAN-GPE), nor RoCEv2's 4791 or the NodePort range; the nodes' firewalls must pass it",
    )

    @field_validator("bridge_mappings")
    @classmethod
    def _one_bridge_per_network(cls, value: dict[str, str]) -> dict[str, str]:
        # neutron's OVS agent refuses a bridge mapped twice (parse_mappings(unique_values=True)).
        shared = sorted({bridge for bridge in value.values() if list(value.values()).count(bridge) > 1})
        if shared:
            raise ValueError(f"one bridge per physical network; mapped more than once: {', '.join(shared)}")
        taken = sorted(set(value.values()) & set(AGENT_BRIDGES))
        if taken:
            raise ValueError(f"{', '.join(taken)} belongs to neutron's OVS agent; name a bridge of its own, e.g. br-ex")
        return value

    @model_validator(mode="after")
    def _vlans(self) -> Neutron:
        if self.tenant_network_type == "vlan" and not self.vlan_ranges:
            raise ValueError("tenantNetworkType 'vlan' needs vlanRanges such as 'physnet1:100:199'")
        for entry in self.vlan_ranges:
            physnet = entry.split(":")[0]
            if physnet not in self.bridge_mappings:
                raise ValueError(f"vlanRanges entry {entry!r} names {physnet!r}, which bridgeMappings does not map")
        unmapped = sorted(set(self.bridge_interfaces) - set(self.bridge_mappings.values()))
        if unmapped:
            raise ValueError(f"bridgeInterfaces names bridges that bridgeMappings does not map: {', '.join(unmapped)}")
        return self

    @property
    def bridges(self) -> tuple[str, ...]:
        return tuple(self.bridge_mappings.values())

    def problems(self) -> Iterator[Problem]:
        for message in uplink_problems(self.bridge_interfaces, self.bridges):
            yield problem(("neutron", "bridgeInterfaces"), self.bridge_interfaces, message)


class ChartOperator(Model):
    """An operator installed from its Helm chart."""

    install: bool = Field(True, description="false when the cluster already runs this operator")
    chart_version: ChartVersion


# Where a cluster's own operator runs when the stack installs none (`install: false`), unless
# `namespace` says otherwise. mariadb-operator's docs name no namespace; its release name is the
# one an admin is likeliest to give one. The RabbitMQ Cluster Operator's manifest fixes its own.
MARIADB_OPERATOR_NAMESPACE = "mariadb-operator"
RABBITMQ_OPERATOR_NAMESPACE = "rabbitmq-system"


class MariadbOperator(ChartOperator):
    """mariadb-operator: the one a stack installs runs in the stack's namespace and serves it alone
    (its chart's currentNamespaceOnly); a cluster's own (`install: false`) runs in `namespace`."""

    namespace: DnsLabel | None = Field(
        None, description=f"with install: false, where the cluster's operator runs; {MARIADB_OPERATOR_NAMESPACE!r}"
    )

    @model_validator(mode="after")
    def _namespace_of_a_running_operator(self) -> MariadbOperator:
        if self.install and self.namespace is not None:
            raise ValueError(
                "namespace is where a cluster's own operator runs (install: false); the operator this stack "
                "installs runs in the stack's namespace (the chart's currentNamespaceOnly)"
            )
        return self

    def namespace_in(self, stack_namespace: str) -> str:
        """Where the operator that serves this stack runs."""
        return stack_namespace if self.install else (self.namespace or MARIADB_OPERATOR_NAMESPACE)


class ManifestOperator(Model):
    """An operator installed from the manifest its project publishes with each release."""

    install: bool = Field(True, description="false when the cluster already runs this operator")
    version: Annotated[Text, Field(pattern=r"^v[0-9]+\.[0-9]+\.[0-9]+$", description="release tag, e.g. v2.21.1")]


class RabbitmqOperator(ManifestOperator):
    """The RabbitMQ Cluster Operator: one per cluster (its manifest's names are cluster-wide).

    The stack that installs it makes it watch its own namespace and `watchNamespaces`, those of
    the other stacks on the cluster, which set `install: false` (and `namespace`, if it is not
    the manifest's `rabbitmq-system`).
    """

    namespace: DnsLabel = Field(RABBITMQ_OPERATOR_NAMESPACE, description="where the operator runs")
    watch_namespaces: tuple[DnsLabel, ...] = Field(
        (), description="with install: true, the namespaces of the other stacks this operator serves"
    )

    @model_validator(mode="after")
    def _one_owner(self) -> RabbitmqOperator:
        if self.install and self.namespace != RABBITMQ_OPERATOR_NAMESPACE:
            raise ValueError(
                f"the release manifest installs the operator into {RABBITMQ_OPERATOR_NAMESPACE!r}; namespace names "
                "where a cluster's own operator runs (install: false)"
            )
        if not self.install and self.watch_namespaces:
            raise ValueError(
                "watchNamespaces is set by the stack that installs the operator (install: true); this stack's "
                "namespace goes into that stack's watchNamespaces"
            )
        return self

    def scope(self, stack_namespace: str) -> tuple[str, ...]:
        """The namespaces the operator this stack installs watches: its own, then the others'."""
        return tuple(dict.fromkeys((stack_namespace, *self.watch_namespaces)))


# Where Rook's operator runs: its chart's documented namespace (Documentation/Helm-Charts/operator-chart.md).
ROOK_OPERATOR_NAMESPACE = "rook-ceph"


class RookOperator(ChartOperator):
    """Rook's operator (chart rook-ceph of https://charts.rook.io/release), for `ceph.rook` only.

    Not installed unless asked: one operator serves the whole Kubernetes cluster (its CRDs, the
    Ceph CSI drivers) and the CephCluster it runs holds every user's data, so it is the cluster's
    more than a stack's; and the CephCluster `ceph.rook.cluster` names must exist for the pools to
    become Ready.
    """

    install: bool = Field(False, description="true: this stack installs Rook's operator chart (cluster-wide)")
    # Rook's chart versions are its release tags, 'v' included (https://charts.rook.io/release).
    chart_version: Annotated[Text, Field(pattern=r"^v[0-9]+\.[0-9]+\.[0-9]+$", description="e.g. v1.20.6")]
    namespace: DnsLabel = Field(ROOK_OPERATOR_NAMESPACE, description="where the operator runs (and is installed)")


# The RabbitMQ Cluster Operator's manifest needs cert-manager from this release on: it adds
# Certificates and webhooks that reject every RabbitmqCluster while they fail (issue #2187).
RABBITMQ_OPERATOR_NEEDS_CERT_MANAGER = (2, 22, 0)


class Operators(Model):
    mariadb: MariadbOperator = MariadbOperator(chart_version="26.6.0")
    mariadb_crds: ChartOperator = ChartOperator(chart_version="26.6.0")
    rabbitmq: RabbitmqOperator = RabbitmqOperator(version="v2.21.1")
    # The release whose CRDs tests/fixtures/rook holds (CephBlockPool, CephClient are checked against them).
    rook: RookOperator = RookOperator(chart_version="v1.20.6")

    @field_validator("rabbitmq")
    @classmethod
    def _without_cert_manager(cls, value: RabbitmqOperator) -> RabbitmqOperator:
        release = tuple(int(part) for part in value.version.removeprefix("v").split("."))
        if value.install and release >= RABBITMQ_OPERATOR_NEEDS_CERT_MANAGER:
            raise ValueError(
                "RabbitMQ Cluster Operator releases from v2.22.0 need cert-manager, which this program does not "
                "install; use v2.21.x, or install the operator yourself and set install: false"
            )
        return value


# Where a node group's VM disks live: files on the node, or RBD images in the Ceph cluster.
EphemeralStorage = Literal["local", "rbd"]


class NodeGroup(Model):
    name: DnsLabel
    node_selector: LabelMap = Field(default_factory=dict, description="added to nodeSelectors.compute")
    tolerations: Tolerations = Field((), description="added to tolerations.compute")
    virt_type: Literal["kvm", "qemu", "lxc"] = "kvm"
    cpu_mode: Literal["host-model", "host-passthrough", "custom", "none"] = "host-model"
    cpu_models: tuple[CpuModel, ...] = ()
    reserved_host_memory_mb: Count = Field(2048, ge=0)
    reserved_host_cpus: Count = Field(0, ge=0)
    bridge_interfaces: BridgeInterfaces | None = Field(
        None, description="OVS bridge → NIC on this group's nodes; unset: neutron.bridgeInterfaces"
    )
    qemu_max_processes: Count = Field(
        131072,
        ge=1024,
        description="qemu.conf max_processes (kolla-ansible's qemu_max_processes): QEMU's RLIMIT_NPROC, which "
        "counts every QEMU thread of the node (QEMU runs as nova). It must not exceed the hard limit the "
        "libvirt container starts with (containerd and CRI-O: none), or no guest starts",
    )
    qemu_max_files: Count = Field(
        32768, ge=1024, description="qemu.conf max_files (kolla-ansible's qemu_max_files): QEMU's RLIMIT_NOFILE"
    )
    ephemeral_storage: EphemeralStorage | None = Field(
        None, description="where this group's VM disks live; unset: compute.ephemeralStorage"
    )

    @model_validator(mode="after")
    def _cpu_models(self) -> NodeGroup:
        if self.cpu_mode == "custom" and not self.cpu_models:
            raise ValueError("cpuMode 'custom' needs at least one entry in cpuModels")
        if self.cpu_mode != "custom" and self.cpu_models:
            raise ValueError(f"cpuModels is only used with cpuMode 'custom', not {self.cpu_mode!r}")
        if self.virt_type != "kvm" and self.cpu_mode == "host-passthrough":
            raise ValueError(f"cpuMode 'host-passthrough' needs virtType 'kvm', not {self.virt_type!r}")
        return self


class Compute(Model):
    node_groups: tuple[NodeGroup, ...] = (NodeGroup(name="default"),)
    vm_safe: bool = Field(False, description="libvirt and OVS DaemonSets update only OnDelete")
    agents_max_unavailable: NodesAtOnce = Field(
        1,
        description="how many nodes of a node group a rolling update of its agent pods (nova-compute, and the "
        "Neutron agent where it has a pod of its own) takes at once: a number, or a percentage of the group's nodes "
        "(rounded up, as Kubernetes does). A stopping nova-compute waits out nova's manager_shutdown_timeout "
        "(160 s) first, so one node at a time rolls a group of 100 nodes in about five hours; VMs keep running "
        "meanwhile, but the nodes rolling take no new ones. The pods that hold the VMs or the datapath (libvirt, "
        "Open vSwitch) never take part: they roll one node at a time, or only when deleted (vmSafe)",
    )
    ephemeral_storage: EphemeralStorage = Field(
        "local",
        description="where VM disks live: local, files on each node (/var/lib/nova); rbd, the ceph.pools.vms pool "
        "(nova's images_type = rbd: disks cloned from RBD images, live migration without copying disks)",
    )

    def ephemeral_of(self, group: NodeGroup) -> EphemeralStorage:
        return group.ephemeral_storage or self.ephemeral_storage

    @field_validator("node_groups")
    @classmethod
    def _unique(cls, groups: tuple[NodeGroup, ...]) -> tuple[NodeGroup, ...]:
        if not groups:
            raise ValueError("at least one node group is needed")
        names = [g.name for g in groups]
        duplicated = sorted({n for n in names if names.count(n) > 1})
        if duplicated:
            raise ValueError(f"node group names must be unique; repeated: {', '.join(duplicated)}")
        return groups


def _cidr(value: str) -> str:
    try:
        return str(ipaddress.ip_network(value, strict=True))
    except ValueError:
        raise ValueError(f"{value!r} is not a network in CIDR form, e.g. 10.0.0.0/16") from None


class NetworkPolicies(Model):
    enabled: bool = Field(
        True, description="NetworkPolicies admit only the cloud's pods to MariaDB, RabbitMQ and memcached"
    )
    node_cidrs: tuple[Annotated[Text, AfterValidator(_cidr)], ...] = Field(
        (),
        description="where the network plugin shows host-network pods' traffic coming from (the nodes' own "
        "addresses, on plugins that keep them: README); set, the MariaDB and RabbitMQ client ports that "
        "host-network pods use admit the cloud's pods and these instead of every source",
    )


class Maintenance(Model):
    enabled: bool = Field(
        True,
        description="nova-compute-maintenance: cordoned nodes get their compute service disabled, and "
        "openstack.org/maintenance=requested moves a node's VMs away and restarts its hypervisor pods; "
        "only with services.nova",
    )


# Keystone-api pods see a rotated key Secret when the kubelet next syncs it (a minute or so by
# default); a second rotation before every pod has the first would leave some unable to read
# what the others write (keystone doc admin/fernet-token-faq: rotate, then distribute).
MIN_ROTATION_GAP = datetime.timedelta(hours=1)


class KeyRotation(Model):
    """keystone-fernet-rotate and keystone-credential-rotate: Keystone's keys rotated in their Secrets."""

    enabled: bool = True
    # openstack-helm's keystone values (jobs.fernet_rotate.cron, jobs.credential_rotate.cron).
    fernet_schedule: CronSchedule = Field("0 */12 * * *", description="sizes [fernet_tokens] max_active_keys")
    credential_schedule: CronSchedule = "0 0 1 * *"

    @field_validator("fernet_schedule", "credential_schedule")
    @classmethod
    def _not_too_often(cls, value: str) -> str:
        gap = cron.shortest_gap(cron.parse(value))
        if gap < MIN_ROTATION_GAP:
            raise ValueError(
                f"rotates every {_minutes(gap)} at the shortest; at most once an hour: keystone-api pods get a "
                "rotated Secret a minute or more later, and a second rotation before that leaves them without the "
                "key the others use"
            )
        return value


def _minutes(gap: datetime.timedelta) -> str:
    return f"{gap // datetime.timedelta(minutes=1)} minutes"


class BackupClaim(Model):
    """A PersistentVolumeClaim of its own, kept when the Backup or the stack is deleted."""

    size: ByteQuantity = "20Gi"
    storage_class: DnsSubdomain | None = Field(None, description="None: the class of storage.classes.backups")


# The keys of an S3 credentials Secret: mariadb-operator's example Secret's (docs/logical_backup.md);
# cinder-backup reads the same, so one Secret may serve both.
S3_KEYS = ("access-key-id", "secret-access-key")


class BackupBucket(Model):
    """An S3 bucket and the Secret (`credentials`, in the stack's namespace) whose keys
    access-key-id and secret-access-key the backup Job authenticates with."""

    bucket: S3Bucket
    endpoint: S3Endpoint
    region: Text | None = None
    prefix: Text | None = None
    credentials: DnsSubdomain = Field(description="the name of a Secret with access-key-id and secret-access-key")
    tls: bool = True


class CinderBackupBucket(BackupBucket):
    """cinder-backup's bucket: the same Secret keys as mariadb-backup's (one Secret may serve both),
    and the CA that verifies an https endpoint; region is boto3's (AWS_DEFAULT_REGION), prefix refused
    (Cinder.problems)."""

    ca_secret: DnsSubdomain | None = Field(
        None,
        description="a Secret in the stack's namespace whose key ca.crt verifies the endpoint's certificate; unset: "
        "the public CAs botocore ships",
    )


class BackupStorage(Model):
    """Where the dumps go: a PersistentVolumeClaim (the default) or an S3 bucket, not both."""

    pvc: BackupClaim | None = None
    s3: BackupBucket | None = None

    @model_validator(mode="after")
    def _one(self) -> BackupStorage:
        if self.pvc is not None and self.s3 is not None:
            raise ValueError("set pvc or s3, not both")
        return self

    @property
    def claim(self) -> BackupClaim | None:
        return None if self.s3 is not None else (self.pvc or BackupClaim())


class Backup(Model):
    """mariadb-backup: mariadb-operator's scheduled logical Backup of every database."""

    enabled: bool = True
    schedule: CronSchedule = "0 2 * * *"
    max_retention: Duration = Field("168h", description="a Go duration; backups older than this are deleted")
    storage: BackupStorage = BackupStorage()

    def problems(self) -> Iterator[Problem]:
        # The Backup Job deletes what is older than maxRetention after each backup (logical_backup.md).
        gap = cron.longest_gap(cron.parse(self.schedule))
        if duration_seconds(self.max_retention) < gap.total_seconds():
            yield problem(
                ("backup", "maxRetention"),
                self.max_retention,
                f"must be at least the longest time between two backups of schedule {self.schedule!r} "
                f"({gap.total_seconds() / 3600:g}h); shorter, each backup deletes the one before it",
            )


class Purge(Model):
    """A housekeeping CronJob: when it runs, and how old a deleted row must be to go."""

    schedule: CronSchedule
    age_in_days: Count = Field(30, ge=1, le=3650)


class Housekeeping(Model):
    """CronJobs that remove soft-deleted rows: nova-archive-deleted-rows, cinder-db-purge, glance-db-purge."""

    enabled: bool = True
    # openstack-helm runs nova's archive hourly and cinder's purge daily (30 days); staggered here.
    nova_archive_deleted_rows: Purge = Purge(schedule="10 * * * *")
    cinder_db_purge: Purge = Purge(schedule="20 0 * * *")
    glance_db_purge: Purge = Purge(schedule="40 0 * * *")


class Settings(Model):
    """The stack file's `openstack:` keys. Each field's description is its entry in Pulumi.yaml and the
    settings reference (tools/project_file.py writes both from here)."""

    namespace: DnsLabel = Field("openstack", description="Kubernetes namespace for every object of the cloud.")
    kubernetes_version: Text = Field(
        "1.31", description=("Kubernetes minor version the manifests are validated against (1.25-1.37).")
    )
    hypervisor_isolation: Annotated[Topology, BeforeValidator(_topology)] = Field(
        Topology.POD_PER_SERVICE,
        description=(
            "Compute-node topology: all-in-one (1), baremetal-hypervisor-shared-pod (2), baremetal-"
            "hypervisor (3), pod-per-service (4), pod-per-service-host-pid (5)."
        ),
    )
    release: Text = Field(DEFAULT_RELEASE, description="OpenStack release the configs are rendered for.")
    images: Images = Field(
        Images(),
        description=(
            "Object: registry (default quay.io/openstack.kolla), tag (default: the release's Kolla "
            "tag), overrides (image name -> pinned reference)."
        ),
    )
    region: Annotated[Text, Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")] = Field(
        "RegionOne", description="Keystone region of every endpoint."
    )
    endpoints: Endpoints = Field(
        Endpoints(),
        description=(
            "Object: scheme (https), domain (cloud.example.com), hosts (service -> public host), "
            "clusterDomain (cluster.local)."
        ),
    )
    gateway: Annotated[Gateway | None, BeforeValidator(_unset_when_empty)] = Field(
        None,
        description=(
            "Object (unset: no routes): existing (name, namespace, sectionName: a Gateway of the "
            "cluster the routes attach to) or className (a GatewayClass: the program creates a Gateway "
            "with an HTTPS listener on 443); envoyGateway (install false, chartVersion v1.9.0: Envoy "
            "Gateway's chart for className); proxies (namespace envoy-gateway-system, labels: where the"
            " gateway's pods run, for the NetworkPolicies)."
        ),
    )
    tls: Tls = Field(
        Tls(),
        description=(
            "Object: public (with gateway: issuer (kind Issuer or ClusterIssuer, name) or selfSigned "
            "true: who issues the certificate of the public hosts); internal (with gateway: issuer, "
            "selfSigned true, or plainText true: the CA of the certificates the APIs, RabbitMQ, MariaDB"
            " and memcached serve inside the cluster, apart from the public one); libvirt (a third CA, "
            "refused until libvirt's TLS is built)."
        ),
    )
    replicas: dict[Text, Annotated[Count, Field(ge=1, le=50)]] = Field(
        default_factory=dict, description=("Object: workload name -> replicas (default 1; at least 3 under ha).")
    )
    resources: dict[Text, Resources] = Field(
        default_factory=dict,
        description=("Object: workload name (or 'default') -> requestsCpu, requestsMemory, limitsCpu, limitsMemory."),
    )
    storage: Storage = Field(
        Storage(),
        description=(
            "Object: classes (database, queue, images, backups -> a storage class each; unset: "
            "storageClass), storageClass (the class of every use classes does not name; unset: the "
            "cluster default), mariadbSize, rabbitmqSize, glanceSize."
        ),
    )
    node_selectors: NodeSelectors = Field(
        NodeSelectors(), description=("Object: controlPlane, network, compute, storage -> node labels.")
    )
    tolerations: NodeTolerations = Field(
        NodeTolerations(),
        description="Object: controlPlane, network, compute, storage -> the node taints their pods tolerate (key, "
        "operator Equal or Exists, value, effect, tolerationSeconds), as Kubernetes writes tolerations.",
    )
    priority_classes: PriorityClasses = Field(
        PriorityClasses(),
        description="Object: nodeAgents, dataStores -> a PriorityClass of the cluster for the pods on network, "
        "compute and storage nodes, and for MariaDB, RabbitMQ and memcached (unset: the cluster's default).",
    )
    services: Services = Field(
        Services(),
        description=(
            "Object: glance, placement, nova, neutron, cinder, horizon -> enabled (all true by default;"
            " keystone is always on)."
        ),
    )
    ha: bool = Field(
        False,
        description=("At least 3 replicas per API, PodDisruptionBudgets, anti-affinity, Galera and a 3-node RabbitMQ."),
    )
    operators: Operators = Field(
        Operators(),
        description=(
            "Object: mariadb, mariadbCrds -> install (true), chartVersion (pinned Helm chart), "
            "mariadb.namespace (with install false: where the cluster's operator runs, mariadb-"
            "operator); rabbitmq -> install (true), version (pinned release manifest, v2.21.1), "
            "namespace (rabbitmq-system), watchNamespaces (with install true: the other stacks' "
            "namespaces it serves); rook -> install (false: the cluster's own operator), chartVersion "
            "(v1.20.6), namespace (rook-ceph)."
        ),
    )
    compute: Compute = Field(
        Compute(),
        description=(
            "Object: nodeGroups (list of name, nodeSelector, virtType, cpuMode, cpuModels, "
            "reservedHostMemoryMb, reservedHostCpus, bridgeInterfaces, ephemeralStorage), vmSafe, "
            "agentsMaxUnavailable (1: nodes, or a percentage of a group's, whose nova-compute and OVS "
            "agent pods a rolling update replaces at once), ephemeralStorage (local, or rbd: VM disks "
            "in ceph.pools.vms)."
        ),
    )
    glance: Glance = Field(
        Glance(), description=("Object: backend (file on a PersistentVolumeClaim, cinder, or rbd: ceph.pools.images).")
    )
    cinder: Cinder = Field(
        Cinder(),
        description=(
            "Object: backend (lvm on a loop file per storage node, nfs, or rbd: ceph.pools.volumes) or "
            "backends (a list of them, each its own volume type, the first the default), backup (none, "
            "or ceph: cinder-backup to ceph.pools.backups), lvmSize, nfsShares."
        ),
    )
    ceph: Annotated[Ceph | None, BeforeValidator(_unset_when_empty)] = Field(
        None,
        description=(
            "Object (unset: no Ceph): external (fsid, monitors), pools (images, volumes, vms, backups),"
            " clients (glance, cinder, cinderBackup, nova -> user, keyringSecret: a Secret whose key "
            "keyring holds the client's keyring, libvirtSecretUuid); or rook (cluster: name and "
            "namespace (rook-ceph) of the CephCluster Rook runs, replicas 3, failureDomain host: the "
            "program declares the pools and clients there and copies their keys)."
        ),
    )
    neutron: Neutron = Field(
        Neutron(),
        description=(
            "Object: bridgeMappings (physnet -> bridge), bridgeInterfaces (bridge -> node NIC), "
            "datapathType (system or netdev), tenantNetworkType (vxlan or vlan), vlanRanges, "
            "vxlanUdpPort (4792: not a network plugin's tunnel port), networkNodeCount (1, 3 under ha: "
            "HA routers and DHCP on 2 agents under ha)."
        ),
    )
    network_policies: NetworkPolicies = Field(
        NetworkPolicies(),
        description=(
            "Object: enabled (true: NetworkPolicies for MariaDB, RabbitMQ, memcached: client ports that"
            " host-network pods use open to every source, the rest for the cloud's pods, peers and "
            "operators only), nodeCidrs (where the network plugin shows host-network traffic from; set,"
            " those client ports admit the cloud's pods and these only)."
        ),
    )
    maintenance: Maintenance = Field(
        Maintenance(),
        description=(
            "Object: enabled (true: nova-compute-maintenance disables a cordoned compute node's service"
            " in Nova and, on openstack.org/maintenance=requested, live-migrates its VMs away and "
            "restarts its hypervisor and OVS pods; only with services.nova)."
        ),
    )
    key_rotation: KeyRotation = Field(
        KeyRotation(),
        description=(
            "Object: enabled (true), fernetSchedule (0 */12 * * *; sizes [fernet_tokens] "
            "max_active_keys), credentialSchedule (0 0 1 * *): the keystone-fernet-rotate and keystone-"
            "credential-rotate CronJobs, in UTC."
        ),
    )
    backup: Backup = Field(
        Backup(),
        description=(
            "Object: enabled (true), schedule (0 2 * * *, UTC), maxRetention (168h), storage (pvc: size"
            " 20Gi, storageClass; or s3: bucket, endpoint, region, prefix, credentials, tls): mariadb-"
            "operator's Backup mariadb-backup of every database."
        ),
    )
    housekeeping: Housekeeping = Field(
        Housekeeping(),
        description=(
            "Object: enabled (true); novaArchiveDeletedRows, cinderDbPurge, glanceDbPurge -> schedule "
            "(UTC), ageInDays (30): CronJobs that remove soft-deleted rows."
        ),
    )
    upgrade: Annotated[upgrade_settings.Upgrade | None, BeforeValidator(_unset_when_empty)] = Field(
        None,
        description=(
            "Object (unset: no upgrade): from, the release the cloud runs now (2025.2, or 2025.1 for "
            "the skip-level upgrade to 2026.1): the preflight checks, the backup before the first "
            "migration, expand, the control plane service by service, contract, online migrations, "
            "compute nodes last. Set for the pulumi up that changes release; remove it afterwards."
        ),
    )
    policy_enforcement: dict[Text, Text] = Field(
        default_factory=dict,
        description=(
            "Object: policy of the pack (policies/README.md) -> advisory, mandatory, remediate or "
            "disabled, written into the stack's generated policies/config/<stack>.json (every policy "
            "mandatory by default, third-party-chart-hygiene advisory)."
        ),
    )

    def problems(self, more_checks: Sequence[SettingsCheck] = ()) -> Iterator[Problem]:
        """What no single setting shows: settings that contradict each other, or the program;
        `more_checks` are the caller's (they run where the names check always ran, so the
        problems keep their order)."""
        mapped = set(self.neutron.bridge_mappings.values())
        yield from self.neutron.problems()
        for index, group in enumerate(self.compute.node_groups):
            unmapped = sorted(set(group.bridge_interfaces or {}) - mapped)
            if unmapped:
                yield problem(
                    ("compute", "nodeGroups", index, "bridgeInterfaces"),
                    group.bridge_interfaces,
                    f"compute.nodeGroups {group.name!r}: bridgeInterfaces names bridges that "
                    f"neutron.bridgeMappings does not map: {', '.join(unmapped)}",
                )
            for message in uplink_problems(group.bridge_interfaces or {}, self.neutron.bridges):
                if "not a NIC" in message and group.bridge_interfaces is not None:
                    where = ("compute", "nodeGroups", index, "bridgeInterfaces")
                    yield problem(where, group.bridge_interfaces, message)
        agent_pods = [p for p in compute_node_pods(self.hypervisor_isolation) if p.agent]
        if self.compute.agents_max_unavailable != 1 and not agent_pods:
            yield problem(
                ("compute", "agentsMaxUnavailable"),
                self.compute.agents_max_unavailable,
                f"hypervisorIsolation {self.hypervisor_isolation.value} runs nova-compute in the pod that holds the "
                "VMs: its compute nodes roll one at a time; leave compute.agentsMaxUnavailable at 1",
            )
        yield from self._node_selector_problems()
        yield from self._operator_namespaces()
        yield from gateway_settings.problems(self)
        yield from self._ceph_problems()
        if self.services.on("glance") and self.glance.backend == "cinder" and not self.services.on("cinder"):
            yield problem(("glance", "backend"), "cinder", "backend 'cinder' needs services.cinder to be enabled")
        # Replicas on several nodes mount one claim, ReadWriteMany, which the cluster's default
        # storage class (usually block storage) does not provide: the claim would never bind.
        replicas = self.replicas_of("glance-api")
        if (
            self.services.on("glance")
            and self.glance.backend == "file"
            and replicas > 1
            and not self.storage.class_for("images")
        ):
            yield problem(
                ("storage", "classes", "images"),
                None,
                f"glance-api runs {replicas} replicas on the file backend, which share one ReadWriteMany volume: "
                "name a storage class that provides ReadWriteMany (e.g. CephFS or NFS) for images, "
                "or use glance.backend 'cinder' or one glance-api replica",
            )
        if self.ha and self.network_node_count() < 2:
            yield problem(
                ("neutron", "networkNodeCount"),
                self.neutron.network_node_count,
                "under ha at least 2 network nodes are needed: a router or a network's DHCP on one node goes "
                "down with it, and HA routers and DHCP agents need a second node to fail over to",
            )
        yield from self._admission_policies()
        yield from self._requests_within_limits()
        yield from self._overlapping_node_groups()
        for check in more_checks:
            yield from check(self)
        yield from self.backup.problems()
        yield from self.cinder.problems()
        yield from upgrade_settings.problems(self)
        yield from releases.problems(self)
        for workload, share in MEMORY_SHARES.items():
            limit = self.resources_of(workload).limits_memory
            if share.mib(limit) < share.minimum_mib:
                yield problem(
                    ("resources", *self._resources_key(workload, "limits_memory")),
                    limit,
                    f"{workload} needs a memory limit of at least {share.smallest_limit_mib()}Mi: "
                    f"its {share.setting} is {share.percent}% of the limit and at least {share.minimum_mib}MiB; "
                    f"the rest is for {share.rest}",
                )

    def ceph_users(self) -> dict[tuple[str, ...], str]:
        """The settings that put data in Ceph, by their key, with the value that does."""
        users: dict[tuple[str, ...], str] = {}
        if self.services.on("glance") and self.glance.backend == "rbd":
            users[("glance", "backend")] = "rbd"
        if self.services.on("cinder") and "rbd" in self.cinder.backends:
            users[("cinder", "backends")] = "rbd"
        if self.services.on("cinder") and self.cinder.backup == "ceph":
            users[("cinder", "backup")] = "ceph"
        if self.services.on("nova"):
            if self.compute.ephemeral_storage == "rbd":
                users[("compute", "ephemeralStorage")] = "rbd"
            for index, group in enumerate(self.compute.node_groups):
                if group.ephemeral_storage == "rbd":
                    users[("compute", "nodeGroups", str(index), "ephemeralStorage")] = "rbd"
        return users

    def _ceph_problems(self) -> Iterator[Problem]:
        for path, value in self.ceph_users().items():
            if self.ceph is None:
                yield problem(
                    path,
                    value,
                    f"{value!r} keeps data in Ceph, and no cluster is given: set ceph.external (the cluster's "
                    "monitors and fsid) and create the keyring Secrets ceph.clients names, or ceph.rook (the "
                    'CephCluster that Rook runs here) (README, "Ceph")',
                )
        if self.ceph is not None and self.ceph.rook is not None:
            yield from self._rook_problems()
        backup = self.cinder.backup
        if self.services.on("cinder") and backup != "none" and "rbd" not in self.cinder.backends:
            # The S3 driver reads a volume through os-brick's RBD connector, librbd without a kernel mapping.
            yield problem(
                ("cinder", "backup"),
                backup,
                f"backs up rbd volumes only (read through librbd); backends {list(self.cinder.backends)} volumes "
                "would have to be attached to the backup pod, which this program does not set up: add 'rbd' to "
                "cinder.backends or use backup 'none'",
            )
        libvirt_clients = self._libvirt_ceph_clients()
        if self.ceph is not None and libvirt_clients and self.hypervisor_isolation.host_runs_hypervisor:
            # The host runs libvirt: the program defines no secret there, the operator does, by this UUID.
            for name in libvirt_clients:
                if (
                    getattr(self.ceph.clients, name) is not None
                    and not getattr(self.ceph.clients, name).libvirt_secret_uuid
                ):
                    yield problem(
                        ("ceph", "clients", name, "libvirtSecretUuid"),
                        None,
                        f"hypervisorIsolation {self.hypervisor_isolation.value} runs libvirt on the host, where the "
                        "program defines no secret: define one holding this client's key on every compute node "
                        "(virsh secret-define, secret-set-value) and give its UUID here",
                    )

    def _rook_problems(self) -> Iterator[Problem]:
        """What Rook's objects cannot be: a pool is a CephBlockPool of its name (a DNS subdomain), and
        the ceph-rook-keys Job writes each client's Secret, so no two clients may share one."""
        assert self.ceph is not None
        for field_name, pool in self.ceph.pools.model_dump().items():
            if not re.fullmatch(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*", pool):
                yield problem(
                    ("ceph", "pools", to_camel(field_name)),
                    pool,
                    "with ceph.rook a pool is the CephBlockPool of its name, a DNS subdomain: lower case a-z, 0-9, "
                    "'-' and '.'",
                )
        secrets: dict[str, str] = {}
        for field_name in ("glance", "cinder", "cinder_backup", "nova"):
            client = getattr(self.ceph.clients, field_name)
            if client is None:
                continue
            if ROOK_RESERVED_CLIENTS.match(client.user):
                yield problem(
                    ("ceph", "clients", to_camel(field_name), "user"),
                    client.user,
                    "is a name Rook keeps for its own daemons (admin, rgw*, rbd-mirror, rbd-mirror-peer, osd.N, "
                    "bootstrap-*): its operator refuses such a CephClient, which then never becomes Ready; choose "
                    "another",
                )
            first = secrets.setdefault(client.keyring_secret, client.user)
            if first != client.user:
                yield problem(
                    ("ceph", "clients", to_camel(field_name), "keyringSecret"),
                    client.keyring_secret,
                    f"is client.{first}'s Secret too; with ceph.rook the ceph-rook-keys Job writes each client's key "
                    "into its own Secret",
                )

    def _libvirt_ceph_clients(self) -> tuple[str, ...]:
        """The clients (ceph.clients keys) whose keys the compute nodes' libvirt uses to open disks."""
        if not self.services.on("nova"):
            return ()
        names: list[str] = []
        if self.services.on("cinder") and "rbd" in self.cinder.backends:
            names.append("cinder")
        if any(self.compute.ephemeral_of(g) == "rbd" for g in self.compute.node_groups):
            names.append("nova" if self.ceph is not None and self.ceph.clients.nova is not None else "cinder")
        return tuple(dict.fromkeys(names))

    def _admission_policies(self) -> Iterator[Problem]:
        # nova-compute-maintenance's right to patch nodes is narrowed by a ValidatingAdmissionPolicy
        # (components/nodes/maintenance.py), admissionregistration.k8s.io/v1 from Kubernetes 1.30 on.
        if self.maintenance.enabled and self.services.on("nova"):
            yield from admission_policy_problems(
                self.kubernetes_version,
                "nova-compute-maintenance",
                "a ValidatingAdmissionPolicy (admissionregistration.k8s.io/v1) narrows its right to patch nodes to "
                "its own annotations",
                "maintenance.enabled: false",
            )

    def _node_selector_problems(self) -> Iterator[Problem]:
        """What the pack's agents-on-their-nodes would refuse in the plan, said of the setting:
        every kind of node pod the stack runs is pinned, and a group keeps the compute selector."""
        runs = {"compute": self.services.on("nova"), "network": self.services.on("neutron"),
                "storage": self.services.on("cinder")}  # fmt: skip
        for kind, used in runs.items():
            if used and not getattr(self.node_selectors, kind):
                yield problem(
                    ("nodeSelectors", kind),
                    {},
                    f"empty, so nothing would keep {kind} agents (privileged, in the host's namespaces) on "
                    f"{kind} nodes: give a label, e.g. openstack-{kind}-node: enabled",
                )
        compute = self.node_selectors.compute
        for index, group in enumerate(self.compute.node_groups):
            changed = sorted(key for key in group.node_selector.keys() & compute.keys()
                             if group.node_selector[key] != compute[key])  # fmt: skip
            if changed:
                yield problem(
                    ("compute", "nodeGroups", index, "nodeSelector"),
                    group.node_selector,
                    f"gives {', '.join(changed)} another value than nodeSelectors.compute ({compute}): a group's "
                    "selector adds to the compute nodes' one, so its agents would leave the compute nodes; "
                    f"use a key of its own, e.g. {NODE_GROUP_LABEL}: {group.name}",
                )

    def _overlapping_node_groups(self) -> Iterator[Problem]:
        # Two groups whose selectors can match one node would both start nova-compute, libvirt
        # and OVS there: two compute services claim one hypervisor. Equality selectors exclude
        # each other only where they give one key different values.
        groups = self.compute.node_groups
        for later in range(1, len(groups)):
            for earlier in range(later):
                a, b = groups[earlier].node_selector, groups[later].node_selector
                if not any(a[key] != b[key] for key in a.keys() & b.keys()):
                    # One problem per group, at its first overlap: fixing it usually fixes the rest.
                    yield problem(
                        ("compute", "nodeGroups", later, "nodeSelector"),
                        b,
                        f"node group {groups[later].name!r} can select the same nodes as {groups[earlier].name!r} "
                        f"({a or 'no selector'}): give every group one label key with a value of its own, "
                        f"e.g. nodeSelector {{{NODE_GROUP_LABEL}: {groups[later].name}}}",
                    )
                    break

    def _requests_within_limits(self) -> Iterator[Problem]:
        # The API server refuses a container whose request is above its limit.
        for workload in self.resources:
            merged = self.resources_of(workload)
            for kind in ("cpu", "memory"):
                request, limit = getattr(merged, f"requests_{kind}"), getattr(merged, f"limits_{kind}")
                if value_of(request) > value_of(limit):
                    entry, field = self._resources_key(workload, f"requests_{kind}", f"limits_{kind}")
                    yield problem(
                        ("resources", entry, field),
                        getattr(merged, to_snake(field)),
                        f"{workload}'s {kind} request ({request}) must be at most its limit ({limit}); "
                        "a workload's entry takes what it does not set from resources.default",
                    )

    @field_validator("namespace")
    @classmethod
    def _own_namespace(cls, value: str) -> str:
        # The cloud's privileged pods live here (the program patches its Pod Security labels to
        # privileged): not one of the cluster's own. Operators' namespaces: _operator_namespaces.
        if value == "default" or value.startswith("kube-"):
            raise ValueError(f"{value} is the cluster's own namespace; name one for the cloud, e.g. openstack")
        return value

    def operator_namespaces(self) -> dict[str, str]:
        """The namespaces where an operator that serves this stack runs apart from it, and which one.

        The mariadb-operator the stack installs runs in the stack's own namespace; a cluster's own
        runs in operators.mariadb.namespace. The RabbitMQ Cluster Operator always runs in
        operators.rabbitmq.namespace: its release manifest's, or where the cluster's own runs.
        """
        found: dict[str, str] = {}
        mariadb = self.operators.mariadb
        if not mariadb.install:
            found[mariadb.namespace_in(self.namespace)] = "cluster's mariadb-operator (operators.mariadb.namespace)"
        rabbitmq = self.operators.rabbitmq
        found[rabbitmq.namespace] = (
            "RabbitMQ Cluster Operator (its release manifest installs it there)"
            if rabbitmq.install
            else "cluster's RabbitMQ Cluster Operator (operators.rabbitmq.namespace)"
        )
        return found

    def _operator_namespaces(self) -> Iterator[Problem]:
        # A second owner of one namespace breaks the isolation's per-namespace policies, and the
        # Rook keys Job would copy Rook's Secrets onto themselves.
        others = {**self.operator_namespaces(), **self._rook_namespaces()}
        operator = others.get(self.namespace)
        if operator is not None:
            yield problem(
                ("namespace",),
                self.namespace,
                f"{self.namespace} is the namespace of the {operator}; name another for the cloud",
            )
        # A namespace the program creates as its own (a Namespace object) is deleted with the stack,
        # and its create fails where it exists: never the cluster's, the cloud's or another's in use.
        created = self._created_namespaces()
        for path, namespace in created.items():
            taken = {**others, self.namespace: "cloud's own (namespace)"}
            taken |= {ns: f"one {'.'.join(other)} creates" for other, ns in created.items() if other != path}
            if namespace == "default" or namespace.startswith("kube-"):
                why = "is the cluster's own"
            elif namespace in taken:
                why = f"is the {taken[namespace]}"
            else:
                continue
            yield problem(
                path,
                namespace,
                f"the program creates this namespace and `pulumi destroy` deletes it, but {namespace} {why}; "
                "name a namespace of its own",
            )

    def _rook_namespaces(self) -> dict[str, str]:
        rook = self.ceph.rook if self.ceph is not None else None
        if rook is None:
            return {}
        found = {self.operators.rook.namespace: "Rook operator (operators.rook.namespace)"}
        if rook.cluster is not None:
            found[rook.cluster.namespace] = "CephCluster Rook runs (ceph.rook.cluster.namespace)"
        return found

    def _created_namespaces(self) -> dict[tuple[str, ...], str]:
        """Setting path → the namespace the program creates as a Namespace of its own there: Envoy
        Gateway's (components/infrastructure/envoy_gateway.py). Rook's it patches (rook.py): it holds data."""
        created: dict[tuple[str, ...], str] = {}
        gateway = self.gateway
        installs = gateway is not None and gateway.envoy_gateway.install and gateway.class_name is not None
        # In the stack's own namespace the proxies need no Namespace of their own (envoy_gateway.py).
        if gateway is not None and installs and gateway.proxies.namespace != self.namespace:
            created[("gateway", "proxies", "namespace")] = gateway.proxies.namespace
        return created

    @field_validator("kubernetes_version", mode="before")
    @classmethod
    def _k8s_version(cls, value: Any) -> str:
        text = str(value)
        if text not in KUBERNETES_VERSIONS:
            raise ValueError(f"allowed: {', '.join(KUBERNETES_VERSIONS)}")
        return text

    @field_validator("release")
    @classmethod
    def _release(cls, value: str) -> str:
        if value not in RELEASES:
            raise ValueError(f"allowed: {', '.join(RELEASES)}")
        return value

    @property
    def image_tag(self) -> str:
        return self.images.tag or RELEASES[self.release].kolla_tag

    def image(self, kolla_name: str, release: str | None = None) -> str:
        """The Kolla image of the stack's release, or of another one (an upgrade's previous release:
        its Kolla tag, from the same registry; `images.tag` and `overrides` pin the stack's own)."""
        if release is not None and release != self.release:
            return f"{self.images.registry}/{kolla_name}:{upgrade_settings.kolla_tag(release)}"
        return self.images.overrides.get(kolla_name) or f"{self.images.registry}/{kolla_name}:{self.image_tag}"

    def replicas_of(self, workload: str) -> int:
        """HA raises every replicated workload to at least three, so one node can fail."""
        wanted = self.replicas.get(workload, 1)
        return max(wanted, 3) if self.ha else wanted

    def network_node_count(self) -> int:
        """How many nodes run neutron's L3 and DHCP agents (DaemonSets on nodeSelectors.network).

        The cluster decides that by its labels, and the program reads no cluster (plans are made
        offline, and a preview must not depend on the nodes of the day), so the stack says it;
        under ha three, as for the replicas.
        """
        return self.neutron.network_node_count or (3 if self.ha else 1)

    def resources_of(self, workload: str) -> Resources:
        """What `resources.<workload>` sets, then what `resources.default` sets, then the built-in defaults."""
        layers = [self.resources[w] for w in ("default", workload) if w in self.resources]
        return Resources(**{name: getattr(layer, name) for layer in layers for name in layer.model_fields_set})

    def _resources_key(self, workload: str, *fields: str) -> tuple[str, str]:
        """Where `resources_of(workload)` takes the first of `fields` it has from: the entry and field to name."""
        for entry in (workload, "default"):
            given = self.resources[entry].model_fields_set if entry in self.resources else set()
            for field in fields:
                if field in given:
                    return entry, to_camel(field)
        return "default", to_camel(fields[0])

    def public_host(self, service: str) -> str:
        return self.endpoints.hosts.get(service, f"{service}.{self.endpoints.domain}")

    def service_host(self, k8s_service: str) -> str:
        return f"{k8s_service}.{self.namespace}.svc.{self.endpoints.cluster_domain}"

    @classmethod
    def parse(
        cls, raw: Mapping[str, Any], secret: Collection[str] = (), more_checks: Sequence[SettingsCheck] = ()
    ) -> Settings:
        """Validate the stack's `openstack:` keys; raise SettingsError listing every problem.

        pydantic stops at a model whose fields are invalid, so what depends on them (its own
        checks, `problems()`) would go unreported until the next run. So each round sets the
        invalid values aside (their defaults take their place) and validates again, keeping
        what it finds about everything else. `secret` names settings shown as [secret];
        `more_checks` are checks the model cannot make itself (stack_config.parse_settings).
        """
        found: list[Problem] = []
        set_aside: list[tuple[str, ...]] = []
        data: Any = raw
        settings = None
        for _ in range(MAX_ROUNDS):
            try:
                # By alias only: a snake_case key is unknown, not a second spelling (Model).
                settings = cls.model_validate(data, by_alias=True, by_name=False)
            except ValidationError as error:
                items = error.errors(include_url=False)
                found += [p for p in map(_problem_of, items) if not _related(p.path, set_aside)]
                invalid = [p.path for p in map(_problem_of, items) if p.path]
                if not invalid or not isinstance(data, Mapping):
                    break
                for path in invalid:
                    data = _without(data, path)
                set_aside += invalid
                continue
            found += [p for p in settings.problems(more_checks) if not _related(p.path, set_aside)]
            break
        if found or settings is None:
            raise SettingsError([p.hidden() if p.path[:1] and p.path[0] in secret else p for p in found])
        return settings


# A check of the whole settings that needs more than the model (components/cloud/setting_names.py).
SettingsCheck = Callable[[Settings], Iterable[Problem]]
# Each round sets aside at least one more invalid value; a stack file has far fewer levels.
MAX_ROUNDS = 10


def _problem_of(item: Any) -> Problem:
    # A key that is itself invalid is named by its path; pydantic adds '[key]' after it.
    loc = tuple(str(part) for part in item["loc"] if part != "[key]")
    message = item["msg"].removeprefix("Value error, ")
    if item["type"] == "extra_forbidden":
        message = "unknown setting (check the spelling; keys are camelCase)"
    key = f"{PROJECT}:" + ".".join(loc) if loc else PROJECT
    return Problem(key, item.get("input"), message, loc, shown=item["type"] != "missing")


def _related(path: tuple[str, ...], set_aside: list[tuple[str, ...]]) -> bool:
    """Whether a problem is about a value set aside, or what holds it (found with its default instead)."""
    return any(path[: len(other)] == other or other[: len(path)] == path for other in set_aside)


def _without(data: Any, path: tuple[str, ...]) -> Any:
    """`data` without the value at `path`, so its default takes its place.

    A list loses the whole list (removing an item would renumber the others), and a path
    that goes where the data does not (a union's branch) stops there.
    """
    if not path or not isinstance(data, Mapping) or path[0] not in data:
        return data
    head, rest = path[0], path[1:]
    value = data[head]
    if rest and isinstance(value, Mapping) and rest[0] in value:
        return {**data, head: _without(value, rest)}
    if rest and isinstance(value, list | tuple) and rest[0].isdigit() and int(rest[0]) < len(value):
        item = value[int(rest[0])]
        if rest[1:] and isinstance(item, Mapping) and rest[1] in item:
            items = list(value)
            items[int(rest[0])] = _without(item, rest[1:])
            return {**data, head: items}
    return {key: v for key, v in data.items() if key != head}
