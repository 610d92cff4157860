"""Compute nodes: the five topologies of seed 000, node groups and the VM-safe life cycle."""

from __future__ import annotations

import json
import os
import socket
import subprocess
from pathlib import Path

import pytest

from components.inifile import parse_ini
from policies.report import check_resources, load_config
from tests.conftest import plan_of
from tests.helpers import containers, objects, pod_template, waits_for
from tools.plan import Plan, resource_record, validate
from tools.runtime import REPO

SCRIPTS = REPO / "components" / "scripts"
RO, RW = True, False
MODULES = ("/lib/modules", RO)
HYPERVISOR_HOST = {MODULES, ("/run/libvirt", RW), ("/var/lib/nova", RW), ("/var/lib/libvirt", RW), ("/dev", RW)}
# libvirt plugs guest taps into OVS itself, and keeps persistent domains on the host.
LIBVIRT_HOST = HYPERVISOR_HOST | {("/run/openvswitch", RW), ("/etc/libvirt/qemu", RW)}
ESCAPE = {("/sys/fs/cgroup", RW), ("/run/systemd", RW), ("/run/dbus", RW)}
# Per container: (privileged, added capabilities, host paths with read-only flags).
CONTAINER: dict[str, tuple[bool, set[str], set[tuple[str, bool]]]] = {
    "libvirt": (True, set(), LIBVIRT_HOST),
    "openvswitch-db": (False, set(), {("/run/openvswitch", RW), ("/var/lib/openvswitch", RW)}),
    # The userspace datapath needs /dev/net/tun; kolla-ansible and openstack-helm run it privileged.
    "openvswitch-vswitchd": (True, set(), {MODULES, ("/run/openvswitch", RW)}),
    # nova-compute reads the node's iSCSI initiator name, which iscsid keeps in /etc/iscsi.
    "nova-compute": (True, set(), HYPERVISOR_HOST | {("/etc/iscsi", RW)}),
    # neutron's privsep daemon needs SYS_ADMIN and more; kolla-ansible and openstack-helm run it privileged.
    "neutron-ovs-agent": (True, set(), {MODULES, ("/run/openvswitch", RW)}),
    "iscsid": (True, set(), {MODULES, ("/dev", RW), ("/etc/iscsi", RW)}),
}
POD_PER_SERVICE = {
    "libvirt": ["libvirt"],
    "openvswitch-db": ["openvswitch-db"],
    "openvswitch-vswitchd": ["openvswitch-vswitchd"],
    "nova-compute": ["nova-compute"],
    "neutron-ovs-agent": ["neutron-ovs-agent"],
}
# Topology → compute DaemonSets → their containers, in order (seed 000, options 1-5).
TOPOLOGIES = {
    "all-in-one": {
        "compute-node": ["libvirt", "openvswitch-db", "openvswitch-vswitchd", "nova-compute", "neutron-ovs-agent"]
    },
    "baremetal-hypervisor-shared-pod": {"compute-node": ["nova-compute", "neutron-ovs-agent"]},
    "baremetal-hypervisor": {"nova-compute": ["nova-compute"], "neutron-ovs-agent": ["neutron-ovs-agent"]},
    "pod-per-service": POD_PER_SERVICE,
    "pod-per-service-host-pid": POD_PER_SERVICE,
}
NETWORK_AGENTS = {"neutron-l3-agent", "neutron-dhcp-agent", "neutron-metadata-agent"}
NETWORK_OVS = {"network-openvswitch-db", "network-openvswitch-vswitchd", "network-neutron-ovs-agent"}


def _topology_plan(topology: str) -> Plan:
    return plan_of("staging", hypervisorIsolation=topology)


def _host_paths(workload_inputs: dict, container: dict) -> set[tuple[str, bool]]:
    volumes = {v["name"]: v for v in workload_inputs["spec"]["template"]["spec"].get("volumes", [])}
    found = set()
    for mount in container.get("volumeMounts", []):
        volume = volumes[mount["name"]]
        if "hostPath" in volume:
            assert volume["hostPath"]["path"] == mount["mountPath"]
            found.add((mount["mountPath"], mount.get("readOnly", False)))
    return found


@pytest.mark.parametrize("topology", list(TOPOLOGIES))
def test_exact_pods_containers_namespaces_privileges_and_mounts(topology: str) -> None:
    plan = _topology_plan(topology)
    daemonsets = objects(plan, "DaemonSet")
    expected_network = NETWORK_AGENTS | (
        {"network-neutron-ovs-agent"} if topology.startswith("baremetal") else NETWORK_OVS
    )
    # staging's cinder backend is lvm: compute nodes attach its volumes over iSCSI, through an
    # iscsid pod unless the host runs the hypervisor (and iscsid) itself.
    iscsid = {} if topology.startswith("baremetal") else {"iscsid": ["iscsid"]}
    expected = {**TOPOLOGIES[topology], **iscsid}
    assert set(daemonsets) == set(expected) | expected_network | {"cinder-volume"}
    for name, expected_containers in expected.items():
        inputs = daemonsets[name].inputs
        pod = inputs["spec"]["template"]["spec"]
        assert [c["name"] for c in pod["containers"]] == expected_containers
        assert "initContainers" not in pod
        assert pod["hostNetwork"] is True
        host_pid = topology == "pod-per-service-host-pid" and name == "libvirt"
        assert pod.get("hostPID", False) is host_pid, name
        assert pod.get("hostIPC", False) is (name == "iscsid")
        assert pod["nodeSelector"] == plan.settings.node_selectors.compute
        for container in pod["containers"]:
            privileged, capabilities, paths = CONTAINER[container["name"]]
            if host_pid and container["name"] == "libvirt":
                paths = paths | ESCAPE
            security = container["securityContext"]
            assert security.get("privileged", False) is privileged, container["name"]
            assert set(security.get("capabilities", {}).get("add", [])) == capabilities, container["name"]
            assert _host_paths(inputs, container) == paths, container["name"]


def test_control_plane_pods_get_no_host_access(stack_plan: Plan) -> None:
    for r in stack_plan.custom:
        if r.kind not in ("Deployment", "Job", "CronJob", "StatefulSet"):
            continue
        pod = pod_template(r)["spec"]
        assert not any(pod.get(k) for k in ("hostNetwork", "hostPID", "hostIPC")), r.k8s_name
        assert not any("hostPath" in v for v in pod.get("volumes", [])), r.k8s_name
        for container in containers(r):
            security = container["securityContext"]
            assert not security.get("privileged") and not security.get("capabilities", {}).get("add"), r.k8s_name


def _template(plan: Plan, name: str) -> str:
    return json.dumps(plan.by_name(name, "DaemonSet").inputs["spec"]["template"], sort_keys=True)


@pytest.mark.parametrize("topology", ["pod-per-service", "pod-per-service-host-pid"])
def test_nova_and_neutron_changes_leave_libvirt_and_ovs_untouched(topology: str) -> None:
    before = _topology_plan(topology)
    nova_change = plan_of(
        "staging",
        hypervisorIsolation=topology,
        compute={"nodeGroups": [{"name": "default", "cpuMode": "host-passthrough", "reservedHostMemoryMb": 8192}]},
    )
    neutron_change = plan_of(
        "staging",
        hypervisorIsolation=topology,
        neutron={
            "bridgeInterfaces": {"br-ex": "eth1"},
            "tenantNetworkType": "vlan",
            "vlanRanges": ["physnet1:100:199"],
        },
    )
    for changed, touched in ((nova_change, "nova-compute"), (neutron_change, "neutron-ovs-agent")):
        assert _template(before, touched) != _template(changed, touched)  # the change is real
        for untouched in ("libvirt", "openvswitch-db", "openvswitch-vswitchd"):
            assert _template(before, untouched) == _template(changed, untouched), untouched


def test_all_in_one_restarts_everything_for_any_change() -> None:
    """Seed 000's first con of option 1, shown rather than hidden."""
    before = _topology_plan("all-in-one")
    after = plan_of(
        "staging",
        hypervisorIsolation="all-in-one",
        neutron={"tenantNetworkType": "vlan", "vlanRanges": ["physnet1:1:9"]},
    )
    assert _template(before, "compute-node") != _template(after, "compute-node")


def _container(plan: Plan, daemonset: str, name: str) -> dict:
    return next(c for c in containers(plan.by_name(daemonset, "DaemonSet")) if c["name"] == name)


def test_option_five_libvirt_escapes_the_pod_cgroup() -> None:
    five, four = _topology_plan("pod-per-service-host-pid"), _topology_plan("pod-per-service")
    env = lambda plan: {e["name"]: e.get("value") for e in _container(plan, "libvirt", "libvirt")["env"]}  # noqa: E731
    assert env(five)["ESCAPE_POD_CGROUP"] == "true" and env(four)["ESCAPE_POD_CGROUP"] == "false"
    assert _container(five, "libvirt", "libvirt")["command"] == ["bash", "/scripts/libvirt_start.sh"]
    script = five.by_name("compute-bin", "ConfigMap").inputs["data"]["libvirt_start.sh"]
    assert "systemd-run --scope" in script  # host systemd puts libvirtd in a scope of its own
    assert "cgroup.procs" in script and "/tasks" in script  # cgroup v2 and v1 without systemd


def test_libvirt_start_script_moves_itself_out_of_its_cgroup(tmp_path: Path) -> None:
    """Run the real script against a fake cgroup v2 tree: it must join a group of its own.

    (The cloud test runs it for real on this machine's cgroup v1 tree: tests/cloud.)
    """
    cgroup = tmp_path / "sys/fs/cgroup"
    cgroup.mkdir(parents=True)
    (cgroup / "cgroup.controllers").write_text("cpu memory\n")
    etc = tmp_path / "etc/libvirt"
    etc.mkdir(parents=True)
    (etc / "libvirtd.conf").write_text("listen_tcp = 1\n")
    fake_bin = tmp_path / "bin"
    fake_bin.mkdir()
    (fake_bin / "libvirtd").write_text('#!/bin/sh\necho libvirtd started "$@"\n')
    (fake_bin / "saslpasswd2").write_text('#!/bin/sh\necho "saslpasswd2 $* password=$(cat)"\n')
    for tool in ("libvirtd", "saslpasswd2"):
        (fake_bin / tool).chmod(0o755)
    script = (
        (SCRIPTS / "libvirt_start.sh")
        .read_text()
        .replace("/sys/fs/cgroup", str(cgroup))
        .replace("/etc/libvirt", str(etc))
        .replace("/tmp/libvirtd.conf", str(tmp_path / "libvirtd.conf"))
    )
    env = {"ESCAPE_POD_CGROUP": "true", "NODE_IP": "192.0.2.7", "LIBVIRT_SASL_USER": "nova"}
    result = subprocess.run(
        ["bash", "-c", script],
        env={**os.environ, "PATH": f"{fake_bin}:/usr/bin:/bin", **env, "LIBVIRT_SASL_PASSWORD": "s3cret"},
        capture_output=True,
        text=True,
        check=True,
    )
    assert f"saslpasswd2 -c -p -a libvirt -f {etc}/passwd.db nova password=s3cret" in result.stdout
    assert f"libvirtd started --listen --config {tmp_path}/libvirtd.conf" in result.stdout
    assert (tmp_path / "libvirtd.conf").read_text() == 'listen_tcp = 1\nlisten_addr = "192.0.2.7"\n'
    procs = (cgroup / "machine.slice/libvirtd-pod/cgroup.procs").read_text().split()
    assert len(procs) == 1 and procs[0].isdigit()


@pytest.mark.parametrize(("topology", "timeout"), [("pod-per-service", "600"), ("baremetal-hypervisor", "20")])
def test_node_containers_wait_for_their_sockets(topology: str, timeout: str) -> None:
    plan = _topology_plan(topology)
    nova = _container(plan, "nova-compute", "nova-compute")
    agent = _container(plan, "neutron-ovs-agent", "neutron-ovs-agent")
    scripts = plan.by_name("compute-bin", "ConfigMap").inputs["data"]
    assert "/run/libvirt/libvirt-sock" in scripts["nova_compute_start.sh"]
    assert "/run/openvswitch/db.sock" in scripts["ovs_agent_start.sh"]
    for container in (nova, agent):
        env = {e["name"]: e.get("value") for e in container["env"]}
        assert env["SOCKET_TIMEOUT"] == timeout
        if topology.startswith("baremetal"):
            assert "installed and running on the host" in env["SOCKET_HINT"]


def test_wait_for_sockets_fails_clearly_and_runs_the_command_once_there(tmp_path: Path) -> None:
    script = str(SCRIPTS / "wait_for_sockets.sh")
    path = tmp_path / "libvirt-sock"
    missing = subprocess.run(
        ["bash", script, "0", str(path), "--", "echo", "started"],
        env={**os.environ, "SOCKET_HINT": "libvirt must run on the host"},
        capture_output=True,
        text=True,
    )
    assert missing.returncode == 1
    assert f"{path} is not there after 0s. libvirt must run on the host" in missing.stderr
    with socket.socket(socket.AF_UNIX) as server:
        server.bind(str(path))
        ready = subprocess.run(
            ["bash", script, "0", str(path), "--", "echo", "started"], capture_output=True, text=True
        )
    assert ready.returncode == 0 and ready.stdout.strip() == "started"


@pytest.mark.parametrize(("stack", "vm_safe"), [("staging", False), ("prod", True)])
def test_hypervisor_and_datapath_update_only_on_delete_when_vm_safe(stack: str, vm_safe: bool) -> None:
    plan = plan_of(stack)
    for name, r in objects(plan, "DaemonSet").items():
        strategy = r.inputs["spec"]["updateStrategy"]
        datapath = name.startswith(("libvirt", "openvswitch", "network-openvswitch"))
        if vm_safe and datapath:
            assert strategy == {"type": "OnDelete"}, name
        else:
            assert strategy == {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1}}, name


def test_nova_compute_disables_itself_before_it_stops() -> None:
    plan = plan_of("prod")
    daemonset = plan.by_name("nova-compute-kvm-general", "DaemonSet")
    pod = daemonset.inputs["spec"]["template"]["spec"]
    [nova] = pod["containers"]
    assert pod["terminationGracePeriodSeconds"] >= 300
    assert nova["lifecycle"]["preStop"]["exec"]["command"] == ["python3", "/scripts/compute_service.py", "disable"]
    start = plan.by_name("compute-bin", "ConfigMap").inputs["data"]["nova_compute_start.sh"]
    assert "compute_service.py enable" in start


def test_node_groups_get_their_own_daemonsets_and_configs() -> None:
    groups = [
        {"name": "default", "virtType": "kvm", "nodeSelector": {"cpu": "new"}},
        {"name": "emulated", "virtType": "qemu", "cpuMode": "none", "nodeSelector": {"cpu": "old"}},
    ]
    plan = plan_of("staging", compute={"nodeGroups": groups})
    daemonsets = objects(plan, "DaemonSet")
    assert {"libvirt", "libvirt-emulated", "nova-compute", "nova-compute-emulated"} <= set(daemonsets)
    emulated = daemonsets["nova-compute-emulated"].inputs["spec"]
    assert emulated["template"]["spec"]["nodeSelector"] == {**plan.settings.node_selectors.compute, "cpu": "old"}
    assert emulated["selector"]["matchLabels"]["openstack.org/node-group"] == "emulated"
    files = plan.by_name("compute-etc", "Secret").revealed["stringData"]
    assert parse_ini(files["nova-emulated.conf"])["libvirt"]["virt_type"] == "qemu"
    assert parse_ini(files["nova-default.conf"])["libvirt"]["virt_type"] == "kvm"
    mount = next(
        m for m in _container(plan, "nova-compute-emulated", "nova-compute")["volumeMounts"] if m["name"] == "etc"
    )
    assert mount == {
        "name": "etc",
        "mountPath": "/etc/nova/nova.conf",
        "subPath": "nova-emulated.conf",
        "readOnly": True,
    }


def test_dev_uses_one_qemu_group_and_the_stacks_use_options_one_four_five() -> None:
    assert [plan_of(s).settings.hypervisor_isolation.option for s in ("dev", "staging", "prod")] == [1, 4, 5]
    [group] = plan_of("dev").settings.compute.node_groups
    assert group.virt_type == "qemu"


def test_compute_nodes_hold_no_database_credentials(stack_plan: Plan) -> None:
    files = stack_plan.by_name("compute-etc", "Secret").revealed["stringData"]
    for name, text in files.items():
        if name.startswith("nova-") or name == "neutron.conf":
            conf = parse_ini(text)
            assert "database" not in conf and "api_database" not in conf, name


def test_wiring_into_the_control_plane(stack_plan: Plan) -> None:
    compute = {
        n
        for n, r in objects(stack_plan, "DaemonSet").items()
        if r.inputs["metadata"]["labels"].get("app.kubernetes.io/name") in ("nova", "openvswitch", "neutron")
        and not n.startswith(("network-", "neutron-l3", "neutron-dhcp", "neutron-metadata"))
    }
    nova_compute = next(
        n for n in compute if "nova-compute" in {c["name"] for c in containers(objects(stack_plan, "DaemonSet")[n])}
    )
    assert {
        "nova-db-sync",
        "nova-rabbit-init",
        "nova-api",
        "nova-metadata",
        "glance-api",
        "neutron-server",
    } <= waits_for(stack_plan, nova_compute)
    agent = next(
        n
        for n in compute
        if "neutron-ovs-agent" in {c["name"] for c in containers(objects(stack_plan, "DaemonSet")[n])}
    )
    assert {"neutron-server", "neutron-rabbit-init"} <= waits_for(stack_plan, agent)
    assert compute <= waits_for(stack_plan, "nova-cell-setup")


@pytest.mark.parametrize("topology", list(TOPOLOGIES))
def test_every_topology_validates_and_passes_the_pack(topology: str) -> None:
    plan = _topology_plan(topology)
    errors, _ = validate(plan)
    assert errors == []
    # staging's pack config names staging's topology; judge this plan by its own.
    config = {
        name: {**entry, "hypervisorIsolation": topology} if "hypervisorIsolation" in entry else entry
        for name, entry in load_config("staging").items()
    }
    violations = check_resources([resource_record(r, plan) for r in plan.registrations], config)
    assert [v.message for v in violations if v.enforcement == "mandatory"] == []
