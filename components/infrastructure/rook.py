"""Ceph that Rook runs (`ceph.rook`): the pools and clients declared in its namespace, and their
keys copied into the stack's.

The program declares, in the CephCluster's namespace, a CephBlockPool per pool the stack uses
and a CephClient per client, with the capabilities the README's external section asks an
administrator for (kolla-ansible's roles/cephadm/defaults/main.yml). Rook creates the client
and writes its key into the Secret `rook-ceph-client-<CephClient name>` there, key `userKey`
(pkg/operator/ceph/client/controller.go, createOrUpdateClient), and the monitors into the
ConfigMap `rook-ceph-mon-endpoints`, key `data`, as `a=10.0.0.1:6789,b=...`
(pkg/operator/ceph/controller/cluster_info.go). A pod mounts Secrets of its own namespace only,
so the Job ceph-rook-keys copies them into the shape an external cluster has (components/infrastructure/ceph.py):
each client's keyring file under the key `keyring` of the Secret ceph.clients names, and
ceph.conf (fsid, mon_host) in the Secret `ceph-conf`. The consumers mount the same Secrets as
with an external cluster, and wait for the Job.

openstack-helm's ceph-adapter-rook does this job with two Jobs, and differently:
- it copies client.admin's key, read by `ceph auth ls` in a pod it may exec into (pods/exec in
  Rook's namespace), and writes it for every service; here each service gets its own client,
  and the Job reads exactly those clients' Secrets, the monitor ConfigMap and the CephCluster
  (for its fsid), by name, and nothing else of Rook's namespace: no exec, no admin key;
- its Roles grant get/create/update/patch on every Secret and ConfigMap of the namespace; here
  the program creates the Secrets the Job fills (empty, their data then the cluster's, as
  keystone's rotated keys are), so the Job needs `get` and `update` on those names only, and
  no `create`, which RBAC cannot narrow to names;
- it keeps ceph.conf in a ConfigMap (ceph-etc); here ceph.conf is a Secret, so the Job's rights
  are one rule on Secrets. ceph.conf holds no key either way.
Like openstack-helm's, the Job copies what is there when it runs: a monitor Rook moves later
reaches the pods when the Job runs again (a changed setting or image re-creates it, or delete it
and `pulumi up`), and clients connect to any monitor they know.
"""

from __future__ import annotations

import re

import pulumi
import pulumi_kubernetes as k8s

from components.infrastructure import ceph as ceph_files
from components.infrastructure.operator_chart import operator_chart
from components.mechanism import kube
from components.mechanism.bootstrap import TOOLBOX
from components.mechanism.created import DeployGraph
from components.mechanism.meta import metadata
from components.mechanism.spec import KUBE_API, ROOK_SPEC, ApiAccess, ServiceSpec, Step
from components.mechanism.workload import env
from components.settings.ceph import Ceph, CephClient, Rook
from components.settings.model import Settings

SERVICE = ROOK_SPEC
# The deploy graph's names: the pools and clients (infrastructure), and the Job that copies the keys.
CLIENTS_NODE = "ceph-rook"
KEYS_JOB = ceph_files.ROOK_KEYS_JOB
CONF_SECRET = ceph_files.ROOK_CONF_SECRET
CONF_KEY = ceph_files.CONF_FILE
MON_ENDPOINTS = "rook-ceph-mon-endpoints"
ROOK_API = "ceph.rook.io/v1"
CHART = "rook-ceph"
CHART_REPOSITORY = "https://charts.rook.io/release"
# Pulumi waits until Rook reports each pool and client Ready (the client's Secret then exists).
WAIT_READY = {"pulumi.com/waitFor": "jsonpath={.status.phase}=Ready", "pulumi.com/timeoutSeconds": "1200"}


def rook_of(settings: Settings) -> Rook | None:
    return settings.ceph.rook if settings.ceph is not None else None


def pools_in_use(settings: Settings) -> tuple[str, ...]:
    """The pools of the settings that put data in Ceph (Settings.ceph_users)."""
    assert settings.ceph is not None
    pools, used = settings.ceph.pools, settings.ceph_users()
    names = []
    if ("glance", "backend") in used:
        names.append(pools.images)
    if ("cinder", "backends") in used:
        names.append(pools.volumes)
    if any(key[0] == "compute" for key in used):
        names.append(pools.vms)
    if ("cinder", "backup") in used:
        names.append(pools.backups)
    return tuple(dict.fromkeys(names))


def _caps(ceph: Ceph, role: str) -> dict[str, str]:
    """The README's `ceph auth get-or-create` capabilities (kolla-ansible's cephadm defaults)."""
    pools = ceph.pools
    if role == "glance":
        return {
            "mon": "profile rbd",
            "osd": f"profile rbd pool={pools.images}",
            "mgr": f"profile rbd pool={pools.images}",
        }
    if role == "cinder_backup":
        return {
            "mon": "profile rbd",
            "osd": f"profile rbd pool={pools.backups}",
            "mgr": f"profile rbd pool={pools.backups}",
        }
    # cinder, and nova when it has a client of its own: volumes and VM disks, reading images to clone.
    return {
        "mon": "profile rbd",
        "osd": f"profile rbd pool={pools.volumes}, profile rbd pool={pools.vms}, "
        f"profile rbd-read-only pool={pools.images}",
        "mgr": f"profile rbd pool={pools.volumes}, profile rbd pool={pools.vms}",
    }


def clients_in_use(settings: Settings) -> tuple[tuple[CephClient, dict[str, str]], ...]:
    """Each client the stack's pods use, once, with its capabilities."""
    assert settings.ceph is not None
    ceph, used = settings.ceph, settings.ceph_users()
    roles = []
    if ("glance", "backend") in used:
        roles.append("glance")
    if ("cinder", "backends") in used or ("cinder", "backup") in used:
        roles.append("cinder")  # cinder-backup reads the volumes as cinder
    if ("cinder", "backup") in used:
        roles.append("cinder_backup")
    if any(key[0] == "compute" for key in used):
        roles.append("nova" if ceph.clients.nova is not None else "cinder")
    by_user: dict[str, tuple[CephClient, dict[str, str]]] = {}
    for role in roles:
        client = getattr(ceph.clients, role)
        by_user.setdefault(client.user, (client, _caps(ceph, role)))
    return tuple(by_user.values())


def object_name(client: CephClient) -> str:
    """The CephClient's name: the user as a DNS subdomain (Rook takes the Ceph name from spec.name)."""
    return re.sub(r"[^a-z0-9.-]", "-", client.user.lower()).strip("-.")


def rook_secret(client: CephClient) -> str:
    """The Secret Rook writes the client's key into (generateCephUserSecretName)."""
    return f"rook-ceph-client-{object_name(client)}"


def keys_step(settings: Settings) -> Step:
    rook = rook_of(settings)
    assert rook is not None and rook.cluster is not None
    clients = clients_in_use(settings)
    targets = (*(c.keyring_secret for c, _ in clients), CONF_SECRET)
    return Step(
        name=KEYS_JOB,
        image=TOOLBOX,
        command=("python3", "/scripts/ceph_rook_keys.py"),
        needs=(CLIENTS_NODE,),
        scripts=("ceph_rook_keys.py", KUBE_API),
        env=(
            env("ROOK_NAMESPACE", rook.cluster.namespace),
            env("ROOK_CLUSTER", rook.cluster.name),
            # 'Rook's Secret=the stack's Secret=user', one per client.
            env("CEPH_CLIENTS", " ".join(f"{rook_secret(c)}={c.keyring_secret}={c.user}" for c, _ in clients)),
            env("CEPH_CONF_TARGET", CONF_SECRET),
        ),
        # GET then PUT (with the resourceVersion read) of the Secrets the program created; the
        # rights in Rook's namespace are the RookCeph component's (another namespace's Role).
        api_access=(ApiAccess("secrets", targets, ("get", "update")),),
    )


def ceph(settings: Settings) -> ServiceSpec:
    """The spec of the keys Job (built like a service's Jobs), for stacks on `ceph.rook` only."""
    return ServiceSpec(name=SERVICE, config_dir="/etc/ceph", render=lambda ctx: {}, steps=(keys_step(settings),))


def reader_rules(settings: Settings) -> list[dict[str, object]]:
    """What the keys Job reads in Rook's namespace, by name: the clients' Secrets, the monitors and the CephCluster."""
    rook = rook_of(settings)
    assert rook is not None and rook.cluster is not None
    return [
        {
            "apiGroups": [""],
            "resources": ["secrets"],
            "resourceNames": [rook_secret(c) for c, _ in clients_in_use(settings)],
            "verbs": ["get"],
        },
        {"apiGroups": [""], "resources": ["configmaps"], "resourceNames": [MON_ENDPOINTS], "verbs": ["get"]},
        {
            "apiGroups": ["ceph.rook.io"],
            "resources": ["cephclusters"],
            "resourceNames": [rook.cluster.name],
            "verbs": ["get"],
        },
    ]


class RookCeph(pulumi.ComponentResource):
    """Rook's operator (if installed here), the pools and clients in the CephCluster's namespace, the
    keys Job's rights there, and the empty Secrets of the stack's namespace that the Job fills."""

    def __init__(self, settings: Settings, graph: DeployGraph, opts: pulumi.ResourceOptions | None = None):
        super().__init__("openstack:infra:RookCeph", CLIENTS_NODE, None, opts)
        rook, ns = rook_of(settings), settings.namespace
        assert rook is not None and rook.cluster is not None and settings.ceph is not None
        where = rook.cluster.namespace
        operator = settings.operators.rook
        chart = None
        if operator.install:
            # A patch: Rook's namespace holds the CephCluster beside the operator by Rook's own
            # convention (rook-ceph), so `pulumi destroy` must not delete it, and it may exist already.
            namespace = k8s.core.v1.NamespacePatch(
                "rook-operator-namespace",
                metadata={"name": operator.namespace},
                opts=pulumi.ResourceOptions(parent=self),
            )
            chart = operator_chart(
                CHART, CHART, operator, operator.namespace, self, repository=CHART_REPOSITORY, depends_on=[namespace]
            )
        after = pulumi.ResourceOptions(parent=self, depends_on=[chart] if chart else [])
        objects: list[pulumi.Resource] = []
        for pool in pools_in_use(settings):
            objects.append(
                k8s.apiextensions.CustomResource(
                    f"pool-{pool}",
                    api_version=ROOK_API,
                    kind="CephBlockPool",
                    metadata=metadata(pool, where, SERVICE, "pool", **WAIT_READY),
                    spec={"failureDomain": rook.failure_domain, "replicated": {"size": rook.replicas}},
                    opts=after,
                )
            )
        for client, caps in clients_in_use(settings):
            objects.append(
                k8s.apiextensions.CustomResource(
                    f"client-{object_name(client)}",
                    api_version=ROOK_API,
                    kind="CephClient",
                    metadata=metadata(object_name(client), where, SERVICE, "client", **WAIT_READY),
                    spec={"name": client.user, "caps": caps},
                    opts=after,
                )
            )
            # Empty until the Job writes the keyring; its data is the cluster's from then on.
            objects.append(
                kube.secret(client.keyring_secret, ns, SERVICE, {"keyring": ""}, self, initial_data_only=True)
            )
        objects.append(kube.secret(CONF_SECRET, ns, SERVICE, {CONF_KEY: ""}, self, initial_data_only=True))
        # The Job's ServiceAccount (of its own name, in the stack's namespace) reads in Rook's.
        reader = metadata(f"{KEYS_JOB}-{ns}", where, SERVICE, "rook-keys")
        role = k8s.rbac.v1.Role(f"{KEYS_JOB}-reader", metadata=reader, rules=reader_rules(settings), opts=after)
        binding = k8s.rbac.v1.RoleBinding(
            f"{KEYS_JOB}-reader",
            metadata=reader,
            role_ref={"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": reader["name"]},
            subjects=[{"kind": "ServiceAccount", "name": KEYS_JOB, "namespace": ns}],
            opts=pulumi.ResourceOptions(parent=self, depends_on=[role]),
        )
        # What waits for the node waits for all of it: Pulumi's depends_on on a component covers its children.
        graph.add(CLIENTS_NODE, self)
        self.objects = [*objects, role, binding]
        self.register_outputs({})
