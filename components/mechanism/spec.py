"""What an OpenStack service declares: its databases, catalog entries, Jobs and processes.

A service module fills these in; `components.cloud.openstack_service` turns them into
Kubernetes objects. Every `needs` entry names another object of the deploy graph by
its Kubernetes name, so each edge is written once, next to the thing that waits.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from components.mechanism.workload import Manifest, Mount, Probe
from components.settings.model import Settings, StorageUse
from components.tables import catalog
from components.tables.roles import NodeKind, NodePod

# How long the gateway waits for a public host's answer unless its service says otherwise:
# kolla-ansible's haproxy_server_timeout (1 min), not Envoy's 15 s (components/infrastructure/front_door.py).
API_REQUEST_TIMEOUT = "60s"


@dataclass(frozen=True)
class CatalogEntry:
    """A Keystone catalog service and its endpoints, served by one API process."""

    service_type: str  # e.g. "image"
    catalog_name: str  # e.g. "glance"
    process: str  # the Kubernetes Service in front of the API, e.g. "glance-api"
    port: int
    path: str = ""  # appended to every endpoint URL, e.g. "/v2.1"
    admin: bool = False  # also register an admin endpoint (only where the service still uses it)
    # How long the gateway waits for the API's answer (HTTPRoute timeouts.request, a GEP-2257 duration).
    request_timeout: str = API_REQUEST_TIMEOUT


# The scripts' Kubernetes API client (components/scripts/kube_api.py): a script that imports it
# lists it among its scripts, which mounts it beside the script under /scripts.
KUBE_API = "kube_api.py"


@dataclass(frozen=True)
class PublicHost:
    """A public host beyond the catalog's entries (Keystone's own, a dashboard, a console proxy),
    served by one process's Service."""

    name: str  # its endpoints.hosts key, e.g. "horizon"
    process: str  # the Kubernetes Service in front of it, e.g. "horizon"
    port: int
    # Reached by users only, through the gateway (a dashboard, a console): nothing in the cloud
    # calls it, so its NetworkPolicy admits the gateway's pods alone (components/infrastructure/isolation.py).
    gateway_only: bool = False
    # How long the gateway waits for its answer (for a websocket, for the upgrade's answer only).
    request_timeout: str = API_REQUEST_TIMEOUT


@dataclass(frozen=True)
class ApiAccess:
    """What a step's pod may do in the Kubernetes API: verbs on named objects of one core resource.

    A step with access runs as a ServiceAccount of its own name, bound to a Role of exactly
    these rules (resourceNames), and gets its token mounted; every other pod gets none. No
    names is for `create` alone, which RBAC cannot limit to a name.
    """

    resource: str  # a resource of the core API group, e.g. "secrets"
    names: tuple[str, ...]
    verbs: tuple[str, ...]

    def rule(self) -> Manifest:
        names, verbs = list(self.names), list(self.verbs)
        assert names or verbs == ["create"], "name the objects of every verb but create"
        return {"apiGroups": [""], "resources": [self.resource], **({"resourceNames": names} if names else {}),
                "verbs": verbs}  # fmt: skip


@dataclass(frozen=True)
class Step:
    """A bootstrap Job: runs once per change of its script, image or config."""

    name: str
    image: str
    command: tuple[str, ...]
    needs: tuple[str, ...]
    env: tuple[Manifest, ...] = ()
    # Rendered files mounted under the service's config dir; 'name=/path' mounts one elsewhere.
    config_files: tuple[str, ...] = ()
    scripts: tuple[str, ...] = ()  # files of components/scripts mounted under /scripts
    extra_volumes: tuple[Manifest, ...] = ()
    extra_mounts: tuple[Mount, ...] = ()
    schedule: str | None = None  # a cron schedule makes this a CronJob that repeats the step
    service: str | None = None  # its app.kubernetes.io/name, when declared outside its service
    api_access: tuple[ApiAccess, ...] = ()
    # A ValidatingAdmissionPolicy's spec narrowing api_access where RBAC cannot (a create's name: RBAC
    # checks no resourceNames on create); its binding exists before the RoleBinding (kube.admission_policy).
    admission: Manifest | None = None
    # The service spec that declared it before it moved here: its Pulumi parent then, kept as
    # an alias so an upgrade neither recreates the Job nor collides with its own name.
    moved_from: str | None = None
    # The release whose image it runs, when not the stack's: an upgrade's checks of the previous one.
    release: str | None = None
    # Why what names it in `needs` waits for it, where its name does not say (components/cloud/graph.py).
    purpose: str | None = None
    # Under internal TLS its pod mounts the CA bundle, and waits for the Job that writes it (all but that Job).
    trusts_internal_ca: bool = True


@dataclass(frozen=True)
class Claim:
    """A PersistentVolumeClaim a process keeps its data on."""

    name: str
    mount_path: str
    size: str
    use: StorageUse  # whose storage class it takes (storage.classes)
    shared: bool = False  # ReadWriteMany, for replicas on several nodes


@dataclass(frozen=True)
class Process:
    """A long-running workload: a Deployment, or with `node_pod` a DaemonSet on that kind of node.

    In a node pod every container (the process and its sidecars) is named after a role of
    the pod, and gets that role's privileges and host paths, and nothing else.
    """

    name: str
    image: str
    command: tuple[str, ...]
    needs: tuple[str, ...]
    config_files: tuple[str, ...] = ()
    port: int | None = None  # exposed through a Service of the same name
    port_name: str = "api"  # the Service's name for that port
    probe: Probe | None = None
    node_pod: NodePod | None = None
    node_selector: Mapping[str, str] = field(default_factory=dict)  # added to the node kind's selector
    avoid_nodes: Mapping[str, str] = field(default_factory=dict)  # stay off nodes with these labels
    tolerations: tuple[Manifest, ...] = ()  # added to the node kind's (a compute node group's own)
    data_store: bool = False  # runs in priorityClasses.dataStores
    extra_labels: Mapping[str, str] = field(default_factory=dict)  # pod labels, also in the selector
    # On its pod template beside the config checksum: a change rolls its pods (components/cloud/upgrade.py).
    pod_annotations: Mapping[str, str] = field(default_factory=dict)
    env: tuple[Manifest, ...] = ()
    scripts: tuple[str, ...] = ()
    claims: tuple[Claim, ...] = ()
    extra_volumes: tuple[Manifest, ...] = ()
    extra_mounts: tuple[Mount, ...] = ()
    sidecars: tuple[Process, ...] = ()  # further containers in the same pod
    init_containers: tuple[Process, ...] = ()
    lifecycle: Manifest | None = None
    termination_grace: int | None = None
    on_delete: bool = False  # DaemonSet updates only when an operator deletes a pod
    max_unavailable: int | str = 1  # a DaemonSet's rolling update: nodes at once (compute.agentsMaxUnavailable)
    workload_name: str | None = None  # the Kubernetes object's name when it differs from the container's
    service: str | None = None  # its app.kubernetes.io/name, when declared outside its service
    # The ServiceAccount whose token the pod gets (talks to the Kubernetes API); None: no token.
    service_account: str | None = None
    # One replica whatever `ha` says, and never two at once (Recreate): a controller without leader election.
    singleton: bool = False
    # A StatefulSet behind a headless Service: clients address each replica by name.
    stateful: bool = False
    # Its app.kubernetes.io/component, where not its name without the service's prefix.
    component: str | None = None

    @property
    def object_name(self) -> str:
        return self.workload_name or self.name

    def component_in(self, service: str) -> str:
        """Its app.kubernetes.io/component, as a process of `service`: its own, else its name without the service's."""
        return self.component or self.name.removeprefix(f"{self.service or service}-") or self.name

    @property
    def node_kind(self) -> NodeKind | None:
        return self.node_pod.node if self.node_pod else None


@dataclass(frozen=True)
class RenderContext:
    """What config rendering may use: settings and this service's resolved secrets."""

    settings: Settings
    secrets: Mapping[str, str]


# The specs of no catalog service: the Job that copies Rook's keys (components/infrastructure/rook.py), and the one
# that writes the internal CA bundle (components/infrastructure/ca_rotation.py).
ROOK_SPEC = "ceph"
CA_BUNDLE_SPEC = "internal-tls"


@dataclass(frozen=True)
class ServiceSpec:
    name: str
    config_dir: str  # e.g. /etc/glance
    render: Callable[[RenderContext], dict[str, str]]
    messaging: bool = False
    catalog: tuple[CatalogEntry, ...] = ()
    # Public hosts (endpoints.hosts keys) beyond the catalog's: Keystone's own, consoles, dashboards.
    public_hosts: tuple[PublicHost, ...] = ()
    keystone_roles: tuple[str, ...] = ("admin", "service")
    steps: tuple[Step, ...] = ()
    processes: tuple[Process, ...] = ()
    # Cloud-wide secrets (names for Credentials.shared) the service's configs need.
    shared_secrets: tuple[str, ...] = ()
    # Further Secrets this service owns: Secret name → {key: a name for Credentials.shared}.
    extra_secrets: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    # Of those, the Secrets whose data the cluster changes after Pulumi created them (rotated
    # keys): a later `pulumi up` leaves their data alone.
    cluster_owned_data: tuple[str, ...] = ()
    # The component's Pulumi type before it moved to this mechanism (an alias keeps its state).
    former_type: str | None = None

    @property
    def databases(self) -> tuple[str, ...]:
        """The schemas its db-init Job creates: the service catalog's (components/tables/catalog.py)."""
        # The Rook keys Job's spec and the CA bundle's are infrastructure, in no catalog entry.
        return () if self.name in (ROOK_SPEC, CA_BUNDLE_SPEC) else catalog.entry(self.name).databases
