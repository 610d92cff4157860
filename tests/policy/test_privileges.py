"""Hand-made violations of the privilege and host-access rules, each caught with a precise
message, called through the engine's ResourceValidationArgs (proxied inputs, policy config)."""

from __future__ import annotations

import pytest

from components.tables.roles import NodePod, Topology, node_pods

from .builders import (
    container,
    control_plane,
    image,
    node_daemonset,
    pod_spec,
    run_policy,
    stack_config,
)

STAGING = stack_config(Topology.POD_PER_SERVICE)
PRIVILEGE_RULES = ("privileged-containers", "host-namespaces", "host-ports", "host-path-volumes", "added-capabilities")


def node_pod(topology: Topology, name: str) -> NodePod:
    return next(p for p in node_pods(topology) if p.name == name)


def test_privileged_control_plane_pod() -> None:
    deployment = control_plane()
    container(deployment)["securityContext"]["privileged"] = True
    assert run_policy("privileged-containers", deployment, STAGING) == [
        "Deployment openstack/keystone-api: container 'keystone-api': "
        "spec.template.spec.containers[0].securityContext.privileged=true is not allowed; allowed: false or unset "
        "(no node role: pod labels app.kubernetes.io/name='keystone', app.kubernetes.io/component='api' "
        "name no node pod of topology pod-per-service)"
    ]


def test_host_path_to_etc_in_a_node_pod() -> None:
    libvirt = node_daemonset(node_pod(Topology.POD_PER_SERVICE, "libvirt"))
    pod_spec(libvirt)["volumes"].append({"name": "etc", "hostPath": {"path": "/etc"}})
    container(libvirt)["volumeMounts"].append({"name": "etc", "mountPath": "/host/etc", "readOnly": True})
    allowed = (
        "/lib/modules (read-only), /run/libvirt (read-write), /var/lib/nova (read-write), "
        "/var/lib/libvirt (read-write), /dev (read-write), /run/openvswitch (read-write), "
        "/etc/libvirt/qemu (read-write)"
    )
    assert run_policy("host-path-volumes", libvirt, STAGING) == [
        f"DaemonSet openstack/libvirt: volume 'etc': spec.template.spec.volumes[7].hostPath.path=\"/etc\" is not "
        f"allowed; allowed: {allowed} (the host paths of the roles held in node pod libvirt)",
        f"DaemonSet openstack/libvirt: container 'libvirt': spec.template.spec.containers[0].volumeMounts[7].name="
        f"\"etc\" is not allowed; allowed: mounts under {allowed} (volume 'etc' is hostPath /etc; role libvirt may "
        f"use only these host paths)",
    ]


def test_a_copied_compute_label_without_the_image_unlocks_nothing() -> None:
    copy = node_daemonset(node_pod(Topology.POD_PER_SERVICE, "nova-compute"))
    container(copy)["image"] = image("keystone")
    reason = (
        "no node role: image repository 'quay.io/openstack.kolla/keystone' is none of node pod nova-compute's "
        "role images (quay.io/openstack.kolla/nova-compute)"
    )
    assert run_policy("privileged-containers", copy, STAGING) == [
        "DaemonSet openstack/nova-compute: container 'nova-compute': spec.template.spec.containers[0]"
        f".securityContext.privileged=true is not allowed; allowed: false or unset ({reason})"
    ]
    assert run_policy("host-namespaces", copy, STAGING) == [
        "DaemonSet openstack/nova-compute: pod: spec.template.spec.hostNetwork=true is not allowed; allowed: false "
        "or unset (no node role: no container runs one of node pod nova-compute's role images "
        "(quay.io/openstack.kolla/nova-compute))"
    ]
    volumes = run_policy("host-path-volumes", copy, STAGING)
    assert len(volumes) == len(pod_spec(copy)["volumes"]) == 6
    assert all("allowed: no hostPath volume (no node role: no container runs one" in m for m in volumes)


def test_the_right_labels_and_image_in_another_namespace_unlock_nothing() -> None:
    elsewhere = node_daemonset(node_pod(Topology.POD_PER_SERVICE, "nova-compute"))
    elsewhere["metadata"]["namespace"] = "default"
    assert run_policy("privileged-containers", elsewhere, STAGING) == [
        "DaemonSet default/nova-compute: container 'nova-compute': spec.template.spec.containers[0]"
        ".securityContext.privileged=true is not allowed; allowed: false or unset (no node role: namespace "
        "'default' is not the stack's namespace 'openstack')"
    ]


@pytest.mark.parametrize(
    ("topology", "pod", "reason"),
    [
        (Topology.ALL_IN_ONE, "compute-node",
         "no role held in node pod compute-node needs hostPID under topology all-in-one"),
        (Topology.BAREMETAL_HYPERVISOR_SHARED_POD, "libvirt", "no node role: pod labels app.kubernetes.io/name='nova', "
         "app.kubernetes.io/component='libvirt' name no node pod of topology baremetal-hypervisor-shared-pod"),
        (Topology.BAREMETAL_HYPERVISOR, "libvirt", "no node role: pod labels app.kubernetes.io/name='nova', "
         "app.kubernetes.io/component='libvirt' name no node pod of topology baremetal-hypervisor"),
        (Topology.POD_PER_SERVICE, "libvirt",
         "no role held in node pod libvirt needs hostPID under topology pod-per-service"),
    ],
)  # fmt: skip
def test_host_pid_on_a_libvirt_pod_under_any_topology_but_5(topology: Topology, pod: str, reason: str) -> None:
    # The libvirt pod of the topology itself where one exists, else option 5's libvirt pod.
    source = topology if any(p.name == pod for p in node_pods(topology)) else Topology.POD_PER_SERVICE_HOST_PID
    libvirt = node_daemonset(node_pod(source, pod))
    pod_spec(libvirt)["hostPID"] = True
    found = run_policy("host-namespaces", libvirt, stack_config(topology))
    # Under options 2 and 3 there is no libvirt pod at all, so its hostNetwork goes too.
    assert [m for m in found if ".hostPID=" in m] == [
        f"DaemonSet openstack/{pod}: pod: spec.template.spec.hostPID=true is not allowed; allowed: false or unset "
        f"({reason})"
    ]
    assert len(found) == (2 if source != topology else 1)


def test_host_pid_on_the_libvirt_pod_of_topology_5_passes() -> None:
    libvirt = node_daemonset(node_pod(Topology.POD_PER_SERVICE_HOST_PID, "libvirt"))
    assert pod_spec(libvirt)["hostPID"] is True
    assert run_policy("host-namespaces", libvirt, stack_config(Topology.POD_PER_SERVICE_HOST_PID)) == []


def test_privileged_init_container() -> None:
    deployment = control_plane()
    pod_spec(deployment)["initContainers"] = [
        {"name": "wait", "image": image("kolla-toolbox"), "securityContext": {"privileged": True}}
    ]
    assert run_policy("privileged-containers", deployment, STAGING) == [
        "Deployment openstack/keystone-api: init container 'wait': spec.template.spec.initContainers[0]"
        ".securityContext.privileged=true is not allowed; allowed: false or unset (no node role: pod labels "
        "app.kubernetes.io/name='keystone', app.kubernetes.io/component='api' name no node pod of topology "
        "pod-per-service)"
    ]


def test_an_init_container_of_a_node_pod_holds_a_role_only_with_the_role_image() -> None:
    compute = node_daemonset(node_pod(Topology.POD_PER_SERVICE, "nova-compute"))
    waits = {"name": "wait-for-libvirt", "image": image("nova-compute"), "securityContext": {"privileged": True}}
    pod_spec(compute)["initContainers"] = [waits]
    assert run_policy("privileged-containers", compute, STAGING) == []
    waits["image"] = "docker.io/library/busybox:1.37"
    assert run_policy("privileged-containers", compute, STAGING) == [
        "DaemonSet openstack/nova-compute: init container 'wait-for-libvirt': spec.template.spec.initContainers[0]"
        ".securityContext.privileged=true is not allowed; allowed: false or unset (no node role: image repository "
        "'docker.io/library/busybox' is none of node pod nova-compute's role images "
        "(quay.io/openstack.kolla/nova-compute))"
    ]


def test_an_ephemeral_container_never_holds_a_role() -> None:
    # The API adds ephemeral containers to running Pods only, and node pods are DaemonSets; the
    # rules read every container list wherever it is, so a template's counts too.
    compute = node_daemonset(node_pod(Topology.POD_PER_SERVICE, "nova-compute"))
    assert all(run_policy(rule, compute, STAGING) == [] for rule in PRIVILEGE_RULES)
    pod_spec(compute)["ephemeralContainers"] = [
        {"name": "debug", "image": image("nova-compute"), "securityContext": {"privileged": True}}
    ]
    assert run_policy("privileged-containers", compute, STAGING) == [
        "DaemonSet openstack/nova-compute: ephemeral container 'debug': spec.template.spec.ephemeralContainers[0]"
        ".securityContext.privileged=true is not allowed; allowed: false or unset (no node role: ephemeral "
        "containers never hold a node role)"
    ]
    # It would also share the host's network namespace that the pod holds for nova-compute.
    assert run_policy("host-namespaces", compute, STAGING) == [
        "DaemonSet openstack/nova-compute: pod: spec.template.spec.hostNetwork=true is not allowed; allowed: false "
        "or unset (ephemeral container 'debug' would share it without needing it (no node role: ephemeral "
        "containers never hold a node role))"
    ]


def test_a_foreign_sidecar_in_a_node_pod_forbids_its_host_network() -> None:
    agent = node_daemonset(node_pod(Topology.POD_PER_SERVICE, "neutron-ovs-agent"))
    pod_spec(agent)["containers"].append({"name": "exporter", "image": "quay.io/prometheus/node-exporter:v1.9.1"})
    assert run_policy("host-namespaces", agent, STAGING) == [
        "DaemonSet openstack/neutron-ovs-agent: pod: spec.template.spec.hostNetwork=true is not allowed; allowed: "
        "false or unset (container 'exporter' would share it without needing it (no node role: image repository "
        "'quay.io/prometheus/node-exporter' is none of node pod neutron-ovs-agent's role images "
        "(quay.io/openstack.kolla/neutron-openvswitch-agent)))"
    ]


def _ovs_agent_with(path: str) -> dict:
    agent = node_daemonset(node_pod(Topology.POD_PER_SERVICE, "neutron-ovs-agent"))
    run = next(v for v in pod_spec(agent)["volumes"] if v["hostPath"]["path"] == "/run/openvswitch")
    run["hostPath"]["path"] = path
    return agent


@pytest.mark.parametrize(
    "path", ["/run/openvswitch", "/run/openvswitch/", "/run/openvswitch/db.sock", "//run/openvswitch"]
)
def test_host_paths_inside_an_allowed_prefix_pass(path: str) -> None:
    assert run_policy("host-path-volumes", _ovs_agent_with(path), STAGING) == []


@pytest.mark.parametrize(
    ("path", "reason"),
    [
        ("/run/openvswitch-evil", "/run/openvswitch-evil"),  # a string prefix, not a path prefix
        ("/run/openvswitch/../../etc", "/etc"),  # normalised before matching
        ("/run", "/run"),  # the parent of an allowed path is not allowed
    ],
)
def test_host_path_prefixes_match_by_path_segment(path: str, reason: str) -> None:
    found = run_policy("host-path-volumes", _ovs_agent_with(path), STAGING)
    assert found == [
        f"DaemonSet openstack/neutron-ovs-agent: volume 'host-run-openvswitch': spec.template.spec.volumes[1]"
        f'.hostPath.path="{path}" is not allowed; allowed: /lib/modules (read-only), /run/openvswitch '
        f"(read-write) (the host paths of the roles held in node pod neutron-ovs-agent)",
        f"DaemonSet openstack/neutron-ovs-agent: container 'neutron-ovs-agent': spec.template.spec.containers[0]"
        f'.volumeMounts[1].name="host-run-openvswitch" is not allowed; allowed: mounts under /lib/modules '
        f"(read-only), /run/openvswitch (read-write) (volume 'host-run-openvswitch' is hostPath {reason}; role "
        f"neutron-ovs-agent may use only these host paths)",
    ]


def test_a_relative_host_path_is_refused() -> None:
    found = run_policy("host-path-volumes", _ovs_agent_with("run/openvswitch"), STAGING)
    assert found == [
        "DaemonSet openstack/neutron-ovs-agent: volume 'host-run-openvswitch': spec.template.spec.volumes[1]"
        '.hostPath.path="run/openvswitch" is not allowed; allowed: an absolute path (a relative host path has '
        "no meaning)"
    ]


@pytest.mark.parametrize("read_only", [False, None])
def test_read_only_host_paths_must_be_mounted_read_only(read_only: bool | None) -> None:
    agent = node_daemonset(node_pod(Topology.POD_PER_SERVICE, "neutron-ovs-agent"))
    modules = container(agent)["volumeMounts"][0]
    assert modules["mountPath"] == "/lib/modules"
    if read_only is None:
        del modules["readOnly"]
    else:
        modules["readOnly"] = read_only
    assert run_policy("host-path-volumes", agent, STAGING) == [
        "DaemonSet openstack/neutron-ovs-agent: container 'neutron-ovs-agent': spec.template.spec.containers[0]"
        ".volumeMounts[0].readOnly=false is not allowed; allowed: true (role neutron-ovs-agent only reads "
        "/lib/modules: load openvswitch/kvm/iscsi kernel modules)"
    ]


def test_bidirectional_propagation_only_where_the_role_needs_it() -> None:
    agent = node_daemonset(node_pod(Topology.POD_PER_SERVICE, "neutron-ovs-agent"))
    container(agent)["volumeMounts"][1]["mountPropagation"] = "Bidirectional"
    assert run_policy("host-path-volumes", agent, STAGING) == [
        "DaemonSet openstack/neutron-ovs-agent: container 'neutron-ovs-agent': spec.template.spec.containers[0]"
        '.volumeMounts[1].mountPropagation="Bidirectional" is not allowed; allowed: None or HostToContainer '
        "(role neutron-ovs-agent does not need mounts on /run/openvswitch to reach the host)"
    ]
    compute = node_daemonset(node_pod(Topology.POD_PER_SERVICE, "nova-compute"))
    assert any(m.get("mountPropagation") == "Bidirectional" for m in container(compute)["volumeMounts"])
    assert run_policy("host-path-volumes", compute, STAGING) == []


def test_a_role_mounting_another_roles_host_path() -> None:
    """The pod may hold /run/libvirt for one role; another container may not mount it."""
    all_in_one = node_daemonset(node_pod(Topology.ALL_IN_ONE, "compute-node"))
    ovs_agent = next(c for c in pod_spec(all_in_one)["containers"] if c["name"] == "neutron-ovs-agent")
    ovs_agent["volumeMounts"].append({"name": "host-run-libvirt", "mountPath": "/run/libvirt"})
    index = pod_spec(all_in_one)["containers"].index(ovs_agent)
    assert run_policy("host-path-volumes", all_in_one, stack_config(Topology.ALL_IN_ONE)) == [
        f"DaemonSet openstack/compute-node: container 'neutron-ovs-agent': spec.template.spec.containers[{index}]"
        f'.volumeMounts[2].name="host-run-libvirt" is not allowed; allowed: mounts under /lib/modules '
        f"(read-only), /run/openvswitch (read-write) (volume 'host-run-libvirt' is hostPath /run/libvirt; role "
        f"neutron-ovs-agent may use only these host paths)"
    ]


def test_added_capabilities_beyond_the_role() -> None:
    ovsdb = node_daemonset(node_pod(Topology.POD_PER_SERVICE, "openvswitch-db"))
    container(ovsdb)["securityContext"]["capabilities"] = {"add": ["CHOWN", "NET_ADMIN"]}
    baseline = (
        "AUDIT_WRITE, CHOWN, DAC_OVERRIDE, FOWNER, FSETID, KILL, MKNOD, NET_BIND_SERVICE, SETFCAP, SETGID, SETPCAP, "
        "SETUID, SYS_CHROOT"
    )
    assert run_policy("added-capabilities", ovsdb, STAGING) == [
        "DaemonSet openstack/openvswitch-db: container 'openvswitch-db': spec.template.spec.containers[0]"
        f'.securityContext.capabilities.add[1]="NET_ADMIN" is not allowed; allowed: {baseline} '
        "(role openvswitch-db needs only the baseline set)"
    ]
    deployment = control_plane()
    container(deployment)["securityContext"]["capabilities"]["add"] = ["NET_RAW", "CHOWN"]
    found = run_policy("added-capabilities", deployment, STAGING)
    assert len(found) == 1
    assert found[0].startswith(
        "Deployment openstack/keystone-api: container 'keystone-api': spec.template.spec.containers[0]"
        f'.securityContext.capabilities.add[0]="NET_RAW" is not allowed; allowed: {baseline} (no node role:'
    )


def test_host_ports() -> None:
    deployment = control_plane()
    container(deployment)["ports"] = [{"containerPort": 5000.0, "hostPort": 5000.0}]
    found = run_policy("host-ports", deployment, STAGING)
    assert len(found) == 1
    assert found[0].startswith(
        "Deployment openstack/keystone-api: container 'keystone-api': spec.template.spec.containers[0].ports[0]"
        ".hostPort=5000 is not allowed; allowed: 0 or unset (no node role:"
    )
    compute = node_daemonset(node_pod(Topology.POD_PER_SERVICE, "nova-compute"))
    container(compute)["ports"] = [{"containerPort": 16509.0, "hostPort": 16509.0}]
    assert run_policy("host-ports", compute, STAGING) == []  # what the kubelet sets on host-network pods
    container(compute)["ports"] = [{"containerPort": 16509.0, "hostPort": 2222.0}]
    assert run_policy("host-ports", compute, STAGING) == [
        "DaemonSet openstack/nova-compute: container 'nova-compute': spec.template.spec.containers[0].ports[0]"
        ".hostPort=2222 is not allowed; allowed: 0, unset, or equal to containerPort (a host-network pod's ports "
        "are its container ports)"
    ]


def test_objects_of_a_third_party_chart_hold_no_role() -> None:
    compute = node_daemonset(node_pod(Topology.POD_PER_SERVICE, "nova-compute"))
    urn = "urn:pulumi:test::openstack::openstack:infra:X$kubernetes:helm.sh/v4:Chart$kubernetes:apps/v1:DaemonSet::x"
    assert run_policy("privileged-containers", compute, STAGING, urn=urn) == [
        "DaemonSet openstack/nova-compute: container 'nova-compute': spec.template.spec.containers[0]"
        ".securityContext.privileged=true is not allowed; allowed: false or unset (no node role: rendered by a "
        "third-party Helm chart or manifest, and roles are only for the program's own objects)"
    ]


def test_an_image_override_moves_the_role_to_the_overriding_repository() -> None:
    config = stack_config(Topology.POD_PER_SERVICE)
    config["privileged-containers"]["imageOverrides"] = {"nova-compute": "registry.example.com/cloud/nova-compute:7"}
    compute = node_daemonset(node_pod(Topology.POD_PER_SERVICE, "nova-compute"))
    assert len(run_policy("privileged-containers", compute, config)) == 1  # the default registry no longer counts
    container(compute)["image"] = "registry.example.com/cloud/nova-compute:8"
    assert run_policy("privileged-containers", compute, config) == []
