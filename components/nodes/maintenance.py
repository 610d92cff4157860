"""nova-compute-maintenance: what Kubernetes says of a compute node, carried into Nova.

One pod (a Deployment of one replica, Recreate) in the kolla-toolbox image runs
components/scripts/nova_compute_maintenance.py: a cordoned node gets its nova-compute service
disabled (reason `cordoned`), and `openstack.org/maintenance=requested` moves the node's VMs
away by live migration and restarts its libvirt, Open vSwitch and agent pods, so a `vmSafe`
stack rolls its OnDelete DaemonSets node by node without killing a VM (README, "Maintenance
of compute nodes").

It authenticates to Nova as the nova service user (`compute-credentials`, as nova-compute's
preStop hook does) and to the Kubernetes API with its own ServiceAccount, allowed only:

- nodes get, list, watch, patch (ClusterRole `<namespace>-nova-compute-maintenance`). RBAC cannot
  narrow a patch to some fields, and with patch alone a compromised controller could relabel a
  control-plane node so that the privileged compute DaemonSets land on it. A
  ValidatingAdmissionPolicy of the same name (admissionregistration.k8s.io/v1, Kubernetes 1.30)
  denies the account any change to a Node but its own annotations (`openstack.org/maintenance`,
  `-progress`, `-state`: what maintenance_plan.py writes); the ClusterRoleBinding is created
  after the policy and its binding;
- pods list, delete in the stack's namespace (Role `nova-compute-maintenance`), to restart a node's pods;
- events create in `default` (Role `<namespace>-nova-compute-maintenance-events`): Events about a
  Node, a cluster-scoped object, must live there (kubernetes pkg/apis/core/validation/events.go).
"""

from __future__ import annotations

from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from components.mechanism import kube
from components.mechanism.bootstrap import TOOLBOX
from components.mechanism.created import DeployGraph
from components.mechanism.meta import labels, metadata
from components.mechanism.spec import KUBE_API, Process
from components.mechanism.workload import Manifest, Probe, env
from components.settings.model import Settings
from components.tables.roles import OVS_AGENT, Topology, compute_node_pods

NAME = "nova-compute-maintenance"
SERVICE, COMPONENT = "nova", "compute-maintenance"
SCRIPTS = ("nova_compute_maintenance.py", "maintenance_plan.py", "maintenance_kube.py", "maintenance_nova.py", KUBE_API)
HEALTH_PORT = 8080
POLL_SECONDS = 10  # a cordon reaches Nova within this (the issue asks for a minute)
EVENTS_NAMESPACE = "default"
CORE = [""]
NODE_RULES = [{"apiGroups": CORE, "resources": ["nodes"], "verbs": ["get", "list", "watch", "patch"]}]
POD_RULES = [{"apiGroups": CORE, "resources": ["pods"], "verbs": ["list", "delete"]}]
EVENT_RULES = [{"apiGroups": CORE, "resources": ["events"], "verbs": ["create"]}]
# The annotations the controller writes (components/scripts/maintenance_plan.py PHASE, PROGRESS, STATE).
OWN_ANNOTATIONS = ("openstack.org/maintenance", "openstack.org/maintenance-progress", "openstack.org/maintenance-state")


def _either(field: str, empty: str) -> str:
    """CEL: a field of the Node, or `empty` where it is unset (an absent map is no map)."""
    return f"has(object.metadata.{field}) ? object.metadata.{field} : {empty}"


def _before(field: str, empty: str) -> str:
    return f"has(oldObject.metadata.{field}) ? oldObject.metadata.{field} : {empty}"


def node_policy_spec(settings: Settings) -> dict[str, Any]:
    """What the controller's account may change of a Node: its own annotations, nothing else. The
    status is the kubelet's (a patch of the main resource leaves it as it is), metadata the API
    server keeps (resourceVersion, managedFields) changes on every write and is not compared."""
    account = f"system:serviceaccount:{settings.namespace}:{NAME}"
    own = "[" + ", ".join(f"'{key}'" for key in OWN_ANNOTATIONS) + "]"
    unchanged = "may change only its own annotations of a Node"
    return {
        "failurePolicy": "Fail",
        # A PATCH is an UPDATE to admission; RBAC gives the account no other write on nodes.
        "matchConstraints": {
            "resourceRules": [
                {"apiGroups": [""], "apiVersions": ["v1"], "operations": ["UPDATE"], "resources": ["nodes"]}
            ]
        },
        "matchConditions": [
            {"name": "maintenance-controller", "expression": f"request.userInfo.username == '{account}'"}
        ],
        "variables": [
            {"name": "own", "expression": own},
            {"name": "annotations", "expression": _either("annotations", "{}")},
            {"name": "oldAnnotations", "expression": _before("annotations", "{}")},
        ],
        "validations": [
            {
                "expression": "variables.annotations.all(k, k in variables.own || (k in variables.oldAnnotations && "
                "variables.oldAnnotations[k] == variables.annotations[k])) && "
                "variables.oldAnnotations.all(k, k in variables.own || k in variables.annotations)",
                "message": f"{NAME} {unchanged}: {', '.join(OWN_ANNOTATIONS)}",
            },
            {"expression": "object.spec == oldObject.spec", "message": f"{NAME} {unchanged}, not its spec"},
            *(
                {
                    "expression": f"({_either(field, empty)}) == ({_before(field, empty)})",
                    "message": f"{NAME} {unchanged}, not its {field}",
                }
                for field, empty in (("labels", "{}"), ("finalizers", "[]"), ("ownerReferences", "[]"))
            ),
        ],
    }


def enabled(settings: Settings) -> bool:
    return settings.maintenance.enabled and settings.services.on("nova")


def cluster_name(settings: Settings) -> str:
    """Cluster-scoped names carry the namespace: two stacks may share a cluster."""
    return f"{settings.namespace}-{NAME}"


def restart_components(topology: Topology) -> tuple[str, ...]:
    """The compute node pods a maintenance restarts: those that hold the VMs or the datapath (the
    OnDelete ones under vmSafe) and the OVS agent's, which reprograms the restarted switch."""
    return tuple(pod.name for pod in compute_node_pods(topology) if pod.holds_vms_or_datapath or OVS_AGENT in pod.roles)


def maintenance_process(settings: Settings, nova_credentials: tuple[Manifest, ...]) -> Process:
    selector = ",".join(f"{key}={value}" for key, value in sorted(settings.node_selectors.compute.items()))
    return Process(
        name=NAME,
        image=TOOLBOX,
        command=("python3", f"/scripts/{SCRIPTS[0]}"),
        # It calls Nova and Placement from its first pass, with rights it must have been given.
        needs=("nova-api", "placement-api", cluster_name(settings)),
        scripts=SCRIPTS,
        env=(
            *nova_credentials,
            env("NAMESPACE", settings.namespace),
            env("COMPUTE_NODE_SELECTOR", selector),
            env("RESTART_COMPONENTS", ",".join(restart_components(settings.hypervisor_isolation))),
            env("POLL_SECONDS", str(POLL_SECONDS)),
            env("HEALTH_PORT", str(HEALTH_PORT)),
            {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
        ),
        # Ready, and alive, while its passes keep coming (a hung call would stop them): liveness asks too.
        probe=Probe(port=HEALTH_PORT, http_path="/healthz", liveness_asks_health=True),
        service=SERVICE,
        service_account=NAME,
        singleton=True,
    )


def _cluster_metadata(name: str) -> dict[str, Any]:
    return {"name": name, "labels": labels(SERVICE, COMPONENT)}


class MaintenanceAccess(pulumi.ComponentResource):
    """The controller's ServiceAccount and what it may do; registered in the deploy graph under
    the ClusterRoleBinding's name, which the controller's Deployment waits for."""

    def __init__(self, settings: Settings, graph: DeployGraph, opts: pulumi.ResourceOptions | None = None):
        super().__init__("openstack:compute:MaintenanceAccess", NAME, None, opts)
        ns, child = settings.namespace, pulumi.ResourceOptions(parent=self)
        subject = [{"kind": "ServiceAccount", "name": NAME, "namespace": ns}]
        k8s.core.v1.ServiceAccount(
            NAME,
            metadata=metadata(NAME, ns, SERVICE, COMPONENT),
            # Only the pod that asks for its token (automountServiceAccountToken) gets one.
            automount_service_account_token=False,
            opts=child,
        )
        cluster = cluster_name(settings)
        narrowing = kube.admission_policy(cluster, SERVICE, COMPONENT, node_policy_spec(settings), self)
        k8s.rbac.v1.ClusterRole(cluster, metadata=_cluster_metadata(cluster), rules=NODE_RULES, opts=child)
        # The right to patch nodes exists only once the policy narrows it.
        k8s.rbac.v1.ClusterRoleBinding(
            cluster,
            metadata=_cluster_metadata(cluster),
            role_ref={"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": cluster},
            subjects=subject,
            opts=pulumi.ResourceOptions(parent=self, depends_on=narrowing),
        )
        for name, namespace, rules in ((NAME, ns, POD_RULES), (f"{cluster}-events", EVENTS_NAMESPACE, EVENT_RULES)):
            k8s.rbac.v1.Role(name, metadata=metadata(name, namespace, SERVICE, COMPONENT), rules=rules, opts=child)
            k8s.rbac.v1.RoleBinding(
                name,
                metadata=metadata(name, namespace, SERVICE, COMPONENT),
                role_ref={"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
                subjects=subject,
                opts=child,
            )
        graph.add(cluster, self)
        self.register_outputs({})
