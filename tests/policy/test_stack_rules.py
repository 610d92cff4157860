"""Stack rules: APIs wait for their schema, agents run on their nodes, datapaths update only
OnDelete in a VM-safe stack. Run through StackValidationArgs as the engine builds it, and
through report.check_resources as the offline plan calls it."""

from __future__ import annotations

import copy
from typing import Any

from pulumi_policy import (
    PolicyCustomTimeouts,
    PolicyResource,
    PolicyResourceOptions,
    StackValidationArgs,
    StackValidationPolicy,
)

from components.tables.roles import Topology, node_pods
from policies.pack import build_policies
from policies.report import check_resources

from .builders import control_plane, k8s_object, node_daemonset, pod_spec, stack_config

STAGING = stack_config(Topology.POD_PER_SERVICE)
STACK_POLICIES = {p.name: p for p in build_policies()}


def job(name: str, service: str, component: str) -> dict[str, Any]:
    manifest = control_plane(name, service, component)
    manifest.update(apiVersion="batch/v1", kind="Job")
    return manifest


def run_stack_policy(policy: str, objects: list[tuple[dict, tuple[str, ...]]], config: dict) -> list[tuple[str, str]]:
    """(manifest, dependency URNs) pairs → what the stack policy reports, via the engine's types."""
    options = PolicyResourceOptions(False, [], None, [], PolicyCustomTimeouts(0, 0, 0), [], None)
    built = [(k8s_object(m, dependencies=deps), m) for m, deps in objects]
    resources = {
        obj.urn: PolicyResource(obj.type, copy.deepcopy(m), obj.urn, obj.name, options, None, None, [], {})
        for obj, m in built
    }
    for obj, _manifest in built:
        resources[obj.urn].dependencies.extend(resources[d] for d in obj.dependencies if d in resources)
    properties = {k: v for k, v in config[policy].items() if k != "enforcementLevel"}
    reported: list[tuple[str, str]] = []

    def report(message: str, resource: str | None = None) -> None:
        if resource is None:
            raise AssertionError(f"stack policy {policy} reported without naming a resource: {message}")
        reported.append((resource, message))

    validating = STACK_POLICIES[policy]
    if not isinstance(validating, StackValidationPolicy):
        raise TypeError(f"{policy} is a resource policy; test it with builders.run_policy")
    validating.validate(StackValidationArgs(list(resources.values()), properties), report)
    return reported


def urn(manifest: dict) -> str:
    return k8s_object(manifest).urn


DB_SYNC = job("keystone-db-sync", "keystone", "db-sync")
BOOTSTRAP = job("keystone-bootstrap", "keystone", "bootstrap")
API = control_plane()


def test_an_api_that_waits_for_its_db_sync_through_other_resources_passes() -> None:
    stack = [(DB_SYNC, ()), (BOOTSTRAP, (urn(DB_SYNC),)), (API, (urn(BOOTSTRAP),))]
    assert run_stack_policy("api-waits-for-db-sync", stack, STAGING) == []


def test_an_api_that_does_not_wait_for_its_db_sync() -> None:
    other = job("glance-db-sync", "glance", "db-sync")
    stack = [(DB_SYNC, ()), (other, ()), (API, (urn(other),))]
    assert run_stack_policy("api-waits-for-db-sync", stack, STAGING) == [
        (
            urn(API),
            "Deployment openstack/keystone-api: dependencies do not reach Job openstack/keystone-db-sync, directly "
            "or through other resources; required: depends_on it, so the API never serves before its schema is "
            "migrated",
        )
    ]


def test_an_api_without_a_db_sync_job() -> None:
    assert run_stack_policy("api-waits-for-db-sync", [(API, ())], STAGING) == [
        (
            urn(API),
            "Deployment openstack/keystone-api: the stack has no Job keystone-db-sync; required: the schema Job, "
            "which its API must wait for",
        )
    ]


def test_servers_that_are_no_openstack_service_need_no_schema() -> None:
    memcached = control_plane("memcached", "memcached", "server", "memcached")
    neutron = control_plane("neutron-server", "neutron", "server", "neutron-server")
    found = run_stack_policy("api-waits-for-db-sync", [(memcached, ()), (neutron, ())], STAGING)
    assert [u for u, _m in found] == [urn(neutron)]


def node_pod_manifest(topology: Topology, name: str) -> dict:
    return node_daemonset(next(p for p in node_pods(topology) if p.name == name))


def test_compute_and_network_pods_on_their_node_selectors() -> None:
    compute = node_pod_manifest(Topology.POD_PER_SERVICE, "nova-compute")
    l3 = node_pod_manifest(Topology.POD_PER_SERVICE, "neutron-l3-agent")
    assert run_stack_policy("agents-on-their-nodes", [(compute, ()), (l3, ())], STAGING) == []
    del pod_spec(compute)["nodeSelector"]
    pod_spec(l3)["nodeSelector"] = {"openstack-compute-node": "enabled"}
    assert run_stack_policy("agents-on-their-nodes", [(compute, ()), (l3, ())], STAGING) == [
        (
            urn(compute),
            "DaemonSet openstack/nova-compute: pod: spec.template.spec.nodeSelector={} is not allowed; allowed: a "
            'selector including {"openstack-compute-node": "enabled"} (the stack\'s nodeSelectors.compute) '
            "(nova-compute is a compute-node pod)",
        ),
        (
            urn(l3),
            'DaemonSet openstack/neutron-l3-agent: pod: spec.template.spec.nodeSelector={"openstack-compute-node": '
            '"enabled"} is not allowed; allowed: a selector including {"openstack-network-node": "enabled"} (the '
            "stack's nodeSelectors.network) (neutron-l3-agent is a network-node pod)",
        ),
    ]


def test_an_empty_node_selector_in_the_config_pins_nothing_and_says_so() -> None:
    config = stack_config(Topology.POD_PER_SERVICE)
    config["agents-on-their-nodes"]["nodeSelectors"] = {"compute": {}}
    compute = node_pod_manifest(Topology.POD_PER_SERVICE, "nova-compute")
    found = run_stack_policy("agents-on-their-nodes", [(compute, ())], config)
    assert [m for _u, m in found] == [
        "DaemonSet openstack/nova-compute: policy config nodeSelectors.compute is empty, so nothing pins compute "
        "agents; required: the stack's nodeSelectors.compute (nova-compute is a compute-node pod)"
    ]


def test_vm_safe_stacks_update_vm_and_datapath_daemonsets_only_on_delete() -> None:
    prod = stack_config(Topology.POD_PER_SERVICE_HOST_PID, vm_safe=True)
    pods = {p.name: node_daemonset(p) for p in node_pods(Topology.POD_PER_SERVICE_HOST_PID)}  # RollingUpdate
    found = run_stack_policy("vm-safe-updates", [(m, ()) for m in pods.values()], prod)
    holding = sorted(p.name for p in node_pods(Topology.POD_PER_SERVICE_HOST_PID) if p.holds_vms_or_datapath)
    assert {"libvirt", "openvswitch-db", "openvswitch-vswitchd"} <= set(holding)
    assert sorted(u.rsplit("::", 1)[1] for u, _m in found) == holding
    assert (
        urn(pods["libvirt"]),
        'DaemonSet openstack/libvirt: DaemonSet: spec.updateStrategy.type="RollingUpdate" is not allowed; allowed: '
        "OnDelete (libvirt holds running VMs or the OVS datapath: only an operator may restart it)",
    ) in found
    staging = stack_config(Topology.POD_PER_SERVICE_HOST_PID, vm_safe=False)
    assert run_stack_policy("vm-safe-updates", [(m, ()) for m in pods.values()], staging) == []


def test_check_resources_runs_resource_and_stack_rules_over_a_planned_stack() -> None:
    """The offline plan's call: resource dicts with inputs and dependencies, components included."""
    component = "urn:pulumi:test::openstack::openstack:service:Keystone::keystone"
    privileged_api = copy.deepcopy(API)
    privileged_api["spec"]["template"]["spec"]["containers"][0]["securityContext"]["privileged"] = True
    resources = [
        {"urn": component, "type": "openstack:service:Keystone", "custom": False, "dependencies": [urn(DB_SYNC)]},
        {"urn": urn(DB_SYNC), "type": "kubernetes:batch/v1:Job", "custom": True, "dependencies": [], "inputs": DB_SYNC},
        {
            "urn": urn(API),
            "type": "kubernetes:apps/v1:Deployment",
            "custom": True,
            "dependencies": [component],  # waits through the component
            "inputs": privileged_api,
        },
    ]
    violations = check_resources(resources, STAGING)
    assert [(v.policy, v.enforcement, v.urn) for v in violations] == [("privileged-containers", "mandatory", urn(API))]
    assert violations[0].to_dict() == {
        "policy": "privileged-containers",
        "enforcement": "mandatory",
        "urn": urn(API),
        "message": violations[0].message,
    }
    resources[2]["dependencies"] = []
    assert [v.policy for v in check_resources(resources, STAGING)][-1] == "api-waits-for-db-sync"
