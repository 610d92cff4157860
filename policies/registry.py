"""Every rule of the pack: its name, what it checks, its default enforcement and scope.

The PolicyPack (pack.py) and the offline report (report.py) are both built from these
tuples, so the engine and tools/plan run exactly the same rules.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from policies.admission import admission_control, admission_policies_bound
from policies.baseline import pod_security_baseline
from policies.ca_keys import ca_keys
from policies.certificates import ca_certificates
from policies.controller_made import controller_made_objects
from policies.gateways import gateway_listeners_tls, public_routes_only
from policies.host_storage import host_storage
from policies.host_volumes import host_path_volumes
from policies.hygiene import image_pinned, readiness_probes, resource_requests_limits
from policies.k8s import K8sObject
from policies.network_policies import data_store_ingress
from policies.passwords import no_plaintext_passwords
from policies.podspec import pod_templates
from policies.privileges import added_capabilities, host_namespaces, host_ports, privileged_containers
from policies.rbac import rbac_advice, rbac_grants
from policies.reference_grants import reference_grants
from policies.restricted import control_plane_restricted, restricted_findings
from policies.rook import rook_ceph
from policies.settings import PackSettings
from policies.stack_rules import agents_on_their_nodes, api_waits_for_db_sync, vm_safe_updates
from policies.unknown_kinds import unknown_pod_kinds

ResourceCheck = Callable[[K8sObject, PackSettings], list[str]]
StackCheck = Callable[[Sequence[K8sObject], PackSettings], list[tuple[str, str]]]
# What a rule needs to match node roles (node_roles.py).
ROLE_CONTEXT = ("namespace", "hypervisorIsolation", "imageRegistry", "imageOverrides")
RESOURCES = ("requiredRequests", "requiredLimits")


@dataclass(frozen=True)
class ResourceRule:
    name: str
    description: str
    enforcement: str  # without config; a stack's config (tools/policy_config.py) sets every level
    check: ResourceCheck
    uses: tuple[str, ...] = ROLE_CONTEXT  # config properties (policies/settings.py)
    # "all" objects; "own": the program's own, not a third-party chart's; "chart": only those.
    scope: str = "all"
    # Workload hygiene: the one kind of rule a stack file may move (policyEnforcement). Every
    # other rule guards the host or the cloud, and its level is the one here: changing it is a
    # change to policies/.
    hygiene: bool = False

    def applies(self, obj: K8sObject) -> bool:
        return self.scope == "all" or (self.scope == "chart") == obj.from_chart


@dataclass(frozen=True)
class StackRule:
    name: str
    description: str
    enforcement: str
    check: StackCheck
    uses: tuple[str, ...] = ROLE_CONTEXT
    hygiene: bool = False  # as ResourceRule.hygiene


def chart_hygiene(obj: K8sObject, settings: PackSettings) -> list[str]:
    """Third-party charts are held to the restricted profile and hygiene only as advice:
    their templates are not ours to fix, but an operator should know what they run."""
    # An operator's pod holds only what the chart overrides; the operator writes the rest.
    found = [f.message for pod in pod_templates(obj) if not pod.operator for f in restricted_findings(pod)]
    for check in (resource_requests_limits, readiness_probes, image_pinned, no_plaintext_passwords):
        found += check(obj, settings)
    found += rbac_advice(obj, settings)
    return [f"third-party chart: {message}" for message in found]


RESOURCE_RULES: tuple[ResourceRule, ...] = (
    ResourceRule(
        "privileged-containers",
        "Privileged containers only where a node role of the stack's topology needs them.",
        "mandatory",
        privileged_containers,
    ),
    ResourceRule(
        "host-namespaces",
        "hostNetwork, hostPID and hostIPC only for node pods whose roles need them.",
        "mandatory",
        host_namespaces,
    ),
    ResourceRule(
        "host-ports",
        "No hostPort, except a host-network node pod's own container ports.",
        "mandatory",
        host_ports,
    ),
    ResourceRule(
        "host-path-volumes",
        "hostPath volumes only under a node role's host paths (by path segment), read-only where it only reads.",
        "mandatory",
        host_path_volumes,
    ),
    ResourceRule(
        "host-storage",
        "No storage that reaches the host around hostPath: PersistentVolumes on node paths, claims bound by name, "
        "volumeDevices, inline CSI and flexVolume.",
        "mandatory",
        host_storage,
        uses=(),
    ),
    ResourceRule(
        "added-capabilities",
        "Capabilities beyond the Pod Security baseline set only for node roles that need them.",
        "mandatory",
        added_capabilities,
    ),
    ResourceRule(
        "pod-security-baseline",
        "The other Pod Security Standards baseline controls: HostProcess, AppArmor, SELinux, /proc mount, "
        "seccomp, sysctls, host probes and hooks.",
        "mandatory",
        pod_security_baseline,
        uses=(),
    ),
    ResourceRule(
        "unknown-pod-kinds",
        "Objects of kinds the pack cannot judge (other operators' workloads, workload kinds of other API groups) "
        "carry no pod: its privileges would pass unjudged.",
        "mandatory",
        unknown_pod_kinds,
        uses=(),
    ),
    ResourceRule(
        "rbac-grants",
        "No RBAC that hands over the cluster, its nodes or its Secrets: cluster-admin, bindings to everyone, "
        "wildcards, escalate, bind, impersonate, nodes/proxy, pods/exec, every Secret, a private key's Secret.",
        "mandatory",
        rbac_grants,
        uses=("caIssuers",),
    ),
    ResourceRule(
        "data-store-ingress",
        "No NetworkPolicy opens MariaDB, RabbitMQ or memcached to everyone beyond MariaDB's and RabbitMQ's client "
        "ports; no other network policy kind.",
        "mandatory",
        data_store_ingress,
        uses=("namespace",),
    ),
    ResourceRule(
        "gateway-listeners-tls",
        "Where the stack's public URLs are https, every Gateway listener is HTTPS (with a certificate) or TLS.",
        "mandatory",
        gateway_listeners_tls,
        uses=("tlsRequired",),
    ),
    ResourceRule(
        "public-routes-only",
        "HTTPRoutes send (and mirror) requests only to a public API's Service and port; no TCP, TLS or UDP routes; "
        "listeners admit routes of their own namespace only.",
        "mandatory",
        public_routes_only,
        uses=("namespace", "publicBackends"),
    ),
    ResourceRule(
        "reference-grants",
        "ReferenceGrants let only the cluster's Gateway (gatewayNamespace) read the public certificate, by name.",
        "mandatory",
        reference_grants,
        uses=("namespace", "gatewayNamespace"),
    ),
    ResourceRule(
        "ca-certificates",
        "Certificates from the stack's CAs name only what their Secret serves (a Service's names in its "
        "<service>-internal-tls...), are no CA, and roots come from their own self-signed Issuer.",
        "mandatory",
        ca_certificates,
        uses=("namespace", "caIssuers"),
    ),
    ResourceRule(
        "ca-keys",
        "Only a CA's own Issuer signs with its Secret; no other Issuer names a key's Secret; no ClusterIssuer; "
        "no Secret or ConfigMap of the program replaces one cert-manager writes or the clients trust.",
        "mandatory",
        ca_keys,
        uses=("namespace", "caIssuers"),
    ),
    ResourceRule(
        "admission-control",
        "No webhooks or MutatingAdmissionPolicies; the program's ValidatingAdmissionPolicy bindings deny, "
        "wherever their policy matches, and its policies fail closed.",
        "mandatory",
        admission_control,
        uses=(),
    ),
    ResourceRule(
        "controller-made-objects",
        "No ControllerRevision or CertificateRequest: their controllers make them.",
        "mandatory",
        controller_made_objects,
        uses=(),
    ),
    ResourceRule(
        "rook-ceph",
        "No CephCluster or other Rook kind but CephBlockPool and CephClient; CephClient caps are rbd profiles on "
        "the stack's pools.",
        "mandatory",
        rook_ceph,
        uses=("cephPools",),
    ),
    ResourceRule(
        "control-plane-restricted",
        "The program's control-plane pods meet the Pod Security Standards restricted profile.",
        "mandatory",
        control_plane_restricted,
        scope="own",
    ),
    ResourceRule(
        "resource-requests-limits",
        "Every container sets resource requests and limits (no limits where its role holds the node's guests).",
        "advisory",
        resource_requests_limits,
        uses=ROLE_CONTEXT + RESOURCES,
        scope="own",
        hygiene=True,
    ),
    ResourceRule(
        "readiness-probes",
        "Long-running containers have a readiness probe.",
        "advisory",
        readiness_probes,
        uses=(),
        scope="own",
        hygiene=True,
    ),
    ResourceRule(
        "image-pinned",
        "Images are pinned by a tag other than latest, or by digest.",
        "advisory",
        image_pinned,
        uses=(),
        scope="own",
        hygiene=True,
    ),
    ResourceRule(
        "no-plaintext-passwords",
        "No passwords in ConfigMaps, literal environment values or command lines; they belong in Secrets.",
        "mandatory",
        no_plaintext_passwords,
        uses=(),
        scope="own",
    ),
    ResourceRule(
        "third-party-chart-hygiene",
        "Objects of third-party Helm charts and manifests: restricted profile and hygiene, as advice.",
        "advisory",
        chart_hygiene,
        uses=RESOURCES,
        scope="chart",
        hygiene=True,
    ),
)

STACK_RULES: tuple[StackRule, ...] = (
    StackRule(
        "api-waits-for-db-sync",
        "Every OpenStack API workload depends, directly or transitively, on its service's db-sync Job.",
        "mandatory",
        api_waits_for_db_sync,
        uses=("apiComponents", "databaseServices"),
    ),
    StackRule(
        "agents-on-their-nodes",
        "Compute and network node pods carry their node kind's node selector.",
        "mandatory",
        agents_on_their_nodes,
        uses=(*ROLE_CONTEXT, "nodeSelectors"),
    ),
    StackRule(
        "vm-safe-updates",
        "In a VM-safe stack, DaemonSets holding VMs or the OVS datapath update only OnDelete.",
        "mandatory",
        vm_safe_updates,
        uses=(*ROLE_CONTEXT, "vmSafe"),
    ),
    StackRule(
        "admission-policies-bound",
        "Every ValidatingAdmissionPolicy of the program has a binding of the program that names it.",
        "mandatory",
        admission_policies_bound,
        uses=(),
    ),
)
RULES: tuple[ResourceRule | StackRule, ...] = RESOURCE_RULES + STACK_RULES
# What a stack's policyEnforcement may set; the others keep their level above.
HYGIENE_RULES = tuple(rule.name for rule in RULES if rule.hygiene)
