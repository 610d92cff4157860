"""Compute nodes: the five topologies of seed 000, node groups and the VM-safe life cycle."""

from __future__ import annotations

import json
import os
import socket
import subprocess
from pathlib import Path

import pytest

from components.cloud.stack_config import parse_settings
from components.mechanism.inifile import parse_ini
from components.settings.model import SettingsError
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
    assert _container(five, "libvirt", "libvirt")["args"] == ["bash", "/scripts/libvirt_start.sh"]
    script = five.by_name("compute-bin", "ConfigMap").inputs["data"]["libvirt_start.sh"]
    assert "systemd-run --scope" in script  # host systemd puts libvirtd in a scope of its own
    assert "cgroup.procs" in script and "/tasks" in script  # cgroup v2 and v1 without systemd


# Stand-ins for what libvirt_start.sh runs on a node: each logs its arguments; `stat` and `getent`
# answer as the node's /dev/kvm and /etc/group would (FAKE_KVM_GID, FAKE_KVM_MODE, FAKE_GROUP).
FAKE_TOOLS = {
    "libvirtd": 'echo libvirtd started "$@"',
    "saslpasswd2": 'echo "saslpasswd2 $* password=$(cat)"',
    # ls -l's mode of the fake device, for the three modes the cases use.
    "stat": 'case "$2" in %g) echo "$FAKE_KVM_GID";; %A) case "$FAKE_KVM_MODE" in 600) echo crw-------;; '
    "660) echo crw-rw----;; 640) echo crw-r-----;; *) exit 9;; esac;; *) exit 9;; esac",
    "getent": '[ -n "${FAKE_GROUP:-}" ] && echo "$FAKE_GROUP" || exit 2',
    **{tool: f'echo "{tool} $*" >> "$TOOL_LOG"' for tool in ("chgrp", "chmod", "groupadd", "usermod")},
}


def _run_libvirt_start(
    tmp_path: Path, env: dict[str, str], kvm: Path | None = None, tools: dict[str, str] | None = None
) -> str:
    """The real script against a fake node: its cgroup v2 tree, /etc/libvirt, the host's systemd socket
    (/run/systemd/private, absent unless a test makes it) and the tools above (and `tools`)."""
    cgroup = tmp_path / "sys/fs/cgroup"
    cgroup.mkdir(parents=True)
    (cgroup / "cgroup.controllers").write_text("cpu memory\n")
    etc = tmp_path / "etc/libvirt"
    etc.mkdir(parents=True)
    (etc / "libvirtd.conf").write_text("listen_tcp = 1\n")
    fake_bin = tmp_path / "bin"
    fake_bin.mkdir()
    for tool, body in {**FAKE_TOOLS, **(tools or {})}.items():
        (fake_bin / tool).write_text(f"#!/bin/sh\n{body}\n")
        (fake_bin / tool).chmod(0o755)
    script = (
        (SCRIPTS / "libvirt_start.sh")
        .read_text()
        .replace("/sys/fs/cgroup", str(cgroup))
        .replace("/etc/libvirt", str(etc))
        .replace("/tmp/libvirtd.conf", str(tmp_path / "libvirtd.conf"))
        .replace("/dev/kvm", str(kvm or tmp_path / "no-kvm"))
        .replace("/run/systemd/private", str(tmp_path / "run/systemd/private"))
    )
    base = {"NODE_IP": "192.0.2.7", "LIBVIRT_SASL_USER": "nova", "LIBVIRT_SASL_PASSWORD": "s3cret"}
    result = subprocess.run(
        ["bash", "-c", script],
        env={**os.environ, "PATH": f"{fake_bin}:/usr/bin:/bin", "TOOL_LOG": str(tmp_path / "tools.log"), **base, **env},
        capture_output=True,
        text=True,
        check=True,
    )
    return result.stdout + result.stderr


def test_libvirt_start_script_moves_itself_out_of_its_cgroup(tmp_path: Path) -> None:
    """Run the real script against a fake cgroup v2 tree: it must join a group of its own.

    (The cloud test runs it for real on this machine's cgroup v1 tree: tests/cloud.)
    """
    out = _run_libvirt_start(tmp_path, {"ESCAPE_POD_CGROUP": "true"})
    etc = tmp_path / "etc/libvirt"
    assert f"saslpasswd2 -c -p -a libvirt -f {etc}/passwd.db nova password=s3cret" in out
    assert f"libvirtd started --listen --config {tmp_path}/libvirtd.conf" in out
    assert (tmp_path / "libvirtd.conf").read_text() == 'listen_tcp = 1\nlisten_addr = "192.0.2.7"\n'
    procs = (tmp_path / "sys/fs/cgroup/machine.slice/libvirtd-pod/cgroup.procs").read_text().split()
    assert len(procs) == 1 and procs[0].isdigit()


QEMU = {"QEMU_USER": "nova", "KOLLA_QEMU_GID": "42427"}


@pytest.mark.parametrize(
    ("node", "expected"),
    [
        # The lab machine's /dev/kvm: no group access. kolla-ansible's udev rule, from the pod.
        ({"VIRT_TYPE": "kvm", "FAKE_KVM_GID": "0", "FAKE_KVM_MODE": "600"}, ["chgrp 42427 KVM", "chmod 0660 KVM"]),
        # root's group is never given to QEMU: the device changes group instead.
        ({"VIRT_TYPE": "kvm", "FAKE_KVM_GID": "0", "FAKE_KVM_MODE": "660"}, ["chgrp 42427 KVM", "chmod 0660 KVM"]),
        # Ubuntu's root:kvm 0660: QEMU's user joins the host's group; the host's device is left alone.
        (
            {"VIRT_TYPE": "kvm", "FAKE_KVM_GID": "993", "FAKE_KVM_MODE": "660", "FAKE_GROUP": "kvm:x:993:"},
            ["usermod -a -G kvm nova"],
        ),
        # A host group the image does not know gets a name here first.
        (
            {"VIRT_TYPE": "kvm", "FAKE_KVM_GID": "108", "FAKE_KVM_MODE": "660"},
            ["groupadd -g 108 kvm-108", "usermod -a -G kvm-108 nova"],
        ),
        # A group without write access does not open the device.
        ({"VIRT_TYPE": "kvm", "FAKE_KVM_GID": "993", "FAKE_KVM_MODE": "640"}, ["chgrp 42427 KVM", "chmod 0660 KVM"]),
        # Emulated guests never open /dev/kvm, but libvirt's capability probe does: QEMU's user gets it
        # all the same, or libvirt probes QEMU again at every lookup (the lab's boots took a minute more).
        ({"VIRT_TYPE": "qemu", "FAKE_KVM_GID": "0", "FAKE_KVM_MODE": "600"}, ["chgrp 42427 KVM", "chmod 0660 KVM"]),
        (
            {"VIRT_TYPE": "qemu", "FAKE_KVM_GID": "993", "FAKE_KVM_MODE": "660", "FAKE_GROUP": "kvm:x:993:"},
            ["usermod -a -G kvm nova"],
        ),
    ],
    ids=[
        "root-0600",
        "root-group-0660",
        "host-kvm-group",
        "host-group-unnamed",
        "group-read-only",
        "emulated",
        "emulated-host-kvm-group",
    ],
)
def test_libvirt_start_gives_qemu_access_to_dev_kvm(tmp_path: Path, node: dict[str, str], expected: list[str]) -> None:
    kvm = tmp_path / "kvm"
    kvm.touch()
    out = _run_libvirt_start(tmp_path, {"ESCAPE_POD_CGROUP": "false", **QEMU, **node}, kvm)
    log = tmp_path / "tools.log"
    ran = log.read_text().splitlines() if log.exists() else []
    assert ran == [line.replace("KVM", str(kvm)) for line in expected]
    assert "libvirtd started" in out


@pytest.mark.parametrize(("virt_type", "warned"), [("kvm", True), ("qemu", False)])
def test_libvirt_start_without_kvm_warns_only_for_kvm_guests(tmp_path: Path, virt_type: str, warned: bool) -> None:
    out = _run_libvirt_start(tmp_path, {"ESCAPE_POD_CGROUP": "false", "VIRT_TYPE": virt_type, **QEMU})
    assert "libvirtd started" in out and not (tmp_path / "tools.log").exists()
    assert ("does not exist" in out) is warned


def _libvirt_files(plan: Plan) -> dict[str, dict[str, str]]:
    """qemu.conf and libvirtd.conf of prod's node group, key by key."""
    files = plan.by_name("compute-etc", "Secret").revealed["stringData"]
    return {
        name: dict(line.split(" = ", 1) for line in files[f"{name}-kvm-general.conf"].splitlines() if " = " in line)
        for name in ("qemu", "libvirtd")
    }


def test_qemu_runs_as_nova() -> None:
    """A guest escape must not give root on the hypervisor (kolla-ansible's qemu.conf)."""
    plan = plan_of("prod")
    qemu = _libvirt_files(plan)["qemu"]
    assert qemu["user"] == qemu["group"] == '"nova"'
    assert qemu["dynamic_ownership"] == "1"  # nova-compute writes as root; libvirt hands the files over
    env = {e["name"]: e.get("value") for e in _container(plan, "libvirt-kvm-general", "libvirt")["env"]}
    assert (env["VIRT_TYPE"], env["QEMU_USER"], env["KOLLA_QEMU_GID"]) == ("kvm", "nova", "42427")


def test_libvirt_and_qemu_limits_are_kolla_ansibles() -> None:
    """libvirt's 5 requests per client starve nova-compute's keepalive under concurrent builds."""
    files = _libvirt_files(plan_of("prod"))
    assert (files["libvirtd"]["max_client_requests"], files["libvirtd"]["max_workers"]) == ("20", "50")
    assert (files["qemu"]["max_files"], files["qemu"]["max_processes"]) == ("32768", "131072")


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
        # libvirt-tls only keeps the node's certificate (no VM, no datapath): it rolls.
        datapath = name.startswith(("libvirt", "openvswitch", "network-openvswitch")) and "libvirt-tls" not in name
        # prod rolls its compute nodes' nova-compute and OVS agent 5 nodes at once (compute.agentsMaxUnavailable).
        agent = name.startswith(("nova-compute", "neutron-ovs-agent"))
        if vm_safe and datapath:
            assert strategy == {"type": "OnDelete"}, name
        else:
            nodes = 5 if agent and stack == "prod" else 1
            assert strategy == {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": nodes}}, name


def test_agents_max_unavailable_takes_nodes_or_a_share_and_never_the_vms_pods() -> None:
    for value in (3, "25%", "100%"):
        plan = plan_of("staging", compute={"agentsMaxUnavailable": value})
        strategies = {n: r.inputs["spec"]["updateStrategy"] for n, r in objects(plan, "DaemonSet").items()}
        agents = {n: s for n, s in strategies.items() if n.startswith(("nova-compute", "neutron-ovs-agent"))}
        assert agents and all(s["rollingUpdate"]["maxUnavailable"] == value for s in agents.values()), strategies
        # staging's libvirt pod holds the VMs (option 4): never more than one node's at once.
        assert all(s["rollingUpdate"]["maxUnavailable"] == 1 for n, s in strategies.items() if n not in agents)
    for wrong in (0, -1, "0%", "101%", "five", True, 2.5):
        with pytest.raises(SettingsError, match=r"compute\.agentsMaxUnavailable.*number of nodes"):
            parse_settings({"compute": {"agentsMaxUnavailable": wrong}})
    with pytest.raises(SettingsError, match=r"compute\.agentsMaxUnavailable.*all-in-one.*leave"):
        parse_settings({"hypervisorIsolation": "all-in-one", "compute": {"agentsMaxUnavailable": 2}})


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


def test_on_a_node_whose_systemd_listens_libvirtd_starts_in_a_scope_of_its_own(tmp_path: Path) -> None:
    """The branch real nodes take (cgroup v2 under systemd, pod-per-service-host-pid): the host's systemd puts
    libvirtd in a scope under machine.slice. The lab's nodes have no systemd, so the lab takes the cgroup
    branch (tests/cloud); here the script meets a listening /run/systemd/private and a systemd-run that
    records its arguments, and the real systemd-run of this machine (Debian's systemd 252) then parses
    those arguments: it gets as far as connecting to the host's systemd, which is not running here."""
    private = tmp_path / "run/systemd/private"
    private.parent.mkdir(parents=True)
    listening = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listening.bind(str(private))
    listening.listen()
    try:
        out = _run_libvirt_start(
            tmp_path, {"ESCAPE_POD_CGROUP": "true"}, tools={"systemd-run": 'echo "systemd-run $*"'}
        )
    finally:
        listening.close()
    [line] = [line for line in out.splitlines() if line.startswith("systemd-run ")]
    args = line.split()[1:]
    assert args[:2] == ["--scope", "--slice=machine.slice"] and args[2].startswith("--unit=libvirtd-pod-")
    assert args[3:] == ["--collect", "libvirtd", "--listen", "--config", f"{tmp_path}/libvirtd.conf"]
    assert not (tmp_path / "sys/fs/cgroup/machine.slice").exists()  # the cgroup branch did not run
    assert "libvirtd started" not in out  # systemd-run, not the script, starts it

    def parsed(argv: list[str]) -> str:
        done = subprocess.run(["/usr/bin/systemd-run", *argv], capture_output=True, text=True, check=False)
        return done.stderr

    assert "Failed to connect to bus" in parsed([*args[:4], "/bin/true"])
    # What the real parser refuses, it says before it connects: the check above can fail.
    assert "Failed to connect to bus" not in parsed([*args[:4], "--remain-after-exit", "/bin/true"])
