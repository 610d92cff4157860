"""Manifests and stack configs for the pack's tests, built from the shared role table.

Node pods come from components/tables/roles.py the way the compute components build them:
one container per role, exactly its privileges, its host paths as hostPath volumes.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from pulumi_policy import PolicyCustomTimeouts, PolicyResourceOptions, ResourceValidationArgs, ResourceValidationPolicy
from pulumi_policy.proxy import unknown_checking_proxy

from components.tables.roles import NodePod, Role, Topology
from policies.k8s import K8sObject, type_token
from policies.pack import build_policies
from policies.registry import RULES
from policies.report import Violation, check_objects, check_stack
from policies.settings import PROPERTIES

NAMESPACE = "openstack"
REGISTRY = "quay.io/openstack.kolla"
TAG = "2026.1-ubuntu-noble"
SELECTORS = PROPERTIES["nodeSelectors"]["default"]
RESOURCES = {"requests": {"cpu": "100m", "memory": "256Mi"}, "limits": {"cpu": "1", "memory": "1Gi"}}
Manifest = dict[str, Any]


def image(kolla: str) -> str:
    return f"{REGISTRY}/{kolla}:{TAG}"


def labels(service: str, component: str) -> dict[str, str]:
    return {
        "app.kubernetes.io/name": service,
        "app.kubernetes.io/component": component,
        "app.kubernetes.io/part-of": "openstack",
        "app.kubernetes.io/managed-by": "pulumi",
    }


def volume_name(path: str) -> str:
    return "host" + path.replace("/", "-")


def role_container(role: Role) -> Manifest:
    security: Manifest = {"privileged": True} if role.privileged else {}
    if role.capabilities:
        security["capabilities"] = {"add": list(role.capabilities)}
    mounts = []
    for grant in role.host_paths:
        mount: Manifest = {"name": volume_name(grant.path), "mountPath": grant.path, "readOnly": grant.read_only}
        if grant.propagation:
            mount["mountPropagation"] = grant.propagation
        mounts.append(mount)
    return {
        "name": role.name,
        "image": image(role.image),
        "securityContext": security,
        "volumeMounts": mounts,
        "resources": copy.deepcopy(RESOURCES),
        "readinessProbe": {"exec": {"command": ["true"]}, "periodSeconds": 15.0},
    }


def node_daemonset(node_pod: NodePod, *, vm_safe: bool = False, group: str = "default") -> Manifest:
    """The DaemonSet of a node pod, as the compute components build it from the table."""
    paths = dict.fromkeys(grant.path for role in node_pod.roles for grant in role.host_paths)
    spec: Manifest = {
        "containers": [role_container(role) for role in node_pod.roles],
        "volumes": [{"name": volume_name(path), "hostPath": {"path": path}} for path in paths],
        "nodeSelector": dict(SELECTORS.get(node_pod.node.value, {})),
    }
    needs = (("hostNetwork", node_pod.host_network), ("hostPID", node_pod.host_pid), ("hostIPC", node_pod.host_ipc))
    for field, needed in needs:
        if needed:
            spec[field] = True
    pod_labels = {**labels(node_pod.service, node_pod.name), "openstack.org/node-group": group}
    strategy = "OnDelete" if vm_safe and node_pod.holds_vms_or_datapath else "RollingUpdate"
    return {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": node_pod.name, "namespace": NAMESPACE, "labels": labels(node_pod.service, node_pod.name)},
        "spec": {
            "selector": {"matchLabels": {"app.kubernetes.io/component": node_pod.name}},
            "updateStrategy": {"type": strategy},
            "template": {"metadata": {"labels": pod_labels}, "spec": spec},
        },
    }


def control_plane(
    name: str = "keystone-api", service: str = "keystone", component: str = "api", kolla: str = "keystone"
) -> Manifest:
    """A Deployment built to the restricted profile, as components/mechanism/workload.py builds them."""
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": NAMESPACE, "labels": labels(service, component)},
        "spec": {
            "replicas": 1.0,
            "template": {
                "metadata": {"labels": labels(service, component)},
                "spec": {
                    "securityContext": {
                        "runAsNonRoot": True,
                        "runAsUser": 42425.0,
                        "seccompProfile": {"type": "RuntimeDefault"},
                    },
                    "containers": [
                        {
                            "name": name,
                            "image": image(kolla),
                            "securityContext": {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}},
                            "resources": copy.deepcopy(RESOURCES),
                            "readinessProbe": {"tcpSocket": {"port": 5000.0}},
                        }
                    ],
                    "volumes": [{"name": "etc", "secret": {"secretName": f"{service}-etc"}}],
                },
            },
        },
    }


def pod_spec(manifest: Manifest) -> Manifest:
    return manifest["spec"]["template"]["spec"]


def container(manifest: Manifest, index: int = 0) -> Manifest:
    return pod_spec(manifest)["containers"][index]


def stack_config(topology: Topology, *, vm_safe: bool = False, level: str = "mandatory") -> dict[str, Any]:
    """A policy config like policies/config/<stack>.json, every rule at `level`."""
    values = {key: spec["default"] for key, spec in PROPERTIES.items()}
    values.update(hypervisorIsolation=topology.value, vmSafe=vm_safe)
    return {rule.name: {"enforcementLevel": level, **{key: values[key] for key in rule.uses}} for rule in RULES}


def k8s_object(
    manifest: Manifest, parent_types: str = "", dependencies: tuple[str, ...] = (), resource_type: str = ""
) -> K8sObject:
    """`parent_types`: the type chain of its parents in the URN, e.g. "pkg:m:Comp$kubernetes:helm.sh/v4:Chart";
    `resource_type`: the Pulumi type when it is not the manifest's own, e.g. kubernetes:apps/v1:DaemonSetPatch."""
    token = resource_type or type_token(manifest["apiVersion"], manifest["kind"])
    qualified = f"{parent_types}${token}" if parent_types else token
    return K8sObject(
        f"urn:pulumi:test::openstack::{qualified}::{manifest['metadata']['name']}", token, manifest, dependencies
    )


def everything(manifest: Manifest, config: Mapping[str, Any]) -> list[Violation]:
    """Every rule, resource and stack, over one object."""
    obj = k8s_object(manifest)
    return check_objects([obj], config) + check_stack([obj], config)


def messages(violations: list[Violation], policy: str | None = None) -> list[str]:
    return [v.message for v in violations if policy is None or v.policy == policy]


POLICIES = {policy.name: policy for policy in build_policies()}


def _options() -> PolicyResourceOptions:
    return PolicyResourceOptions(False, [], None, [], PolicyCustomTimeouts(0, 0, 0), [], None)


def patch_type(manifest: Manifest) -> str:
    """The pulumi-kubernetes patch type of a manifest's kind, e.g. kubernetes:apps/v1:DaemonSetPatch."""
    return type_token(manifest["apiVersion"], manifest["kind"]) + "Patch"


def run_policy(
    policy: str, manifest: Manifest, config: Mapping[str, Any] | None = None, urn: str = "", resource_type: str = ""
) -> list[str]:
    """Call a policy's validate function the way the engine does: proxied inputs, its config."""
    obj = k8s_object(manifest, resource_type=resource_type)
    properties = {k: v for k, v in dict((config or {}).get(policy, {})).items() if k != "enforcementLevel"}
    args = ResourceValidationArgs(
        obj.type,
        unknown_checking_proxy(copy.deepcopy(manifest)),
        urn or obj.urn,
        obj.name,
        _options(),
        None,
        properties,
    )
    reported: list[str] = []

    def report(message: str, _urn: str | None = None) -> None:
        reported.append(message)

    validating = POLICIES[policy]
    if not isinstance(validating, ResourceValidationPolicy):
        raise TypeError(f"{policy} is a stack policy; test it with test_stack_rules.run_stack_policy")
    validating.validate(args, report)
    return reported
