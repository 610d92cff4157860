"""What a real cluster needs to get a working cloud, checked on the plan.

Each test pins one thing a review against the sources found missing (the neutron, nova,
os-vif, horizon and libvirt code, kolla-ansible and openstack-helm); the running cloud
(tests/cloud) shows the same things working.
"""

from __future__ import annotations

from typing import Any

import pytest

from components.mechanism.inifile import parse_ini
from tests.conftest import plan_of
from tests.helpers import containers, objects, pod_template, waits_for
from tools.plan import Plan

ML2 = "/etc/neutron/plugins/ml2/ml2_conf.ini"


def _files(plan: Plan, service: str) -> dict[str, str]:
    return plan.by_name(f"{service}-etc", "Secret").revealed["stringData"]


def _container(plan: Plan, kind: str, workload: str, name: str) -> dict:
    return next(c for c in containers(plan.by_name(workload, kind)) if c["name"] == name)


def _env(container: dict) -> dict[str, Any]:
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in container.get("env", [])}


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_neutron_server_reads_ml2_where_neutron_looks(stack: str) -> None:
    """Under uWSGI neutron reads exactly /etc/neutron/plugins/ml2/ml2_conf.ini (neutron/server/__init__.py)."""
    plan = plan_of(stack)
    users = [
        ("Deployment", "neutron-server", name)
        for name in ("neutron-server", "neutron-rpc-server", "neutron-periodic-workers")
    ] + [("Job", "neutron-db-sync", "neutron-db-sync")]
    for kind, workload, name in users:
        container = _container(plan, kind, workload, name)
        mounts = {m["mountPath"]: m.get("subPath") for m in container["volumeMounts"]}
        assert mounts.get(ML2) == "ml2_conf.ini", (workload, name)
        assert "/etc/neutron/ml2_conf.ini" not in mounts
        if name != "neutron-server":  # the others name their files on the command line
            assert ML2 in container["args"], (workload, name)


def test_ovsdb_serves_where_its_clients_connect() -> None:
    """The agents and os-vif default to tcp:127.0.0.1:6640 (os-vif has no fallback): served as kolla-ansible does."""
    plan = plan_of("staging")
    script = plan.by_name("compute-bin", "ConfigMap").inputs["data"]["ovsdb_start.sh"]
    assert '--remote="ptcp:${OVSDB_PORT}:127.0.0.1"' in script
    assert "--remote=db:Open_vSwitch,Open_vSwitch,manager_options" in script
    ovsdb = _container(plan, "DaemonSet", "openvswitch-db", "openvswitch-db")
    assert _env(ovsdb)["OVSDB_PORT"] == "6640"
    assert ovsdb["readinessProbe"]["exec"]["command"][-1] == "tcp:127.0.0.1:6640"
    agents = (("compute", "openvswitch_agent.ini"), ("neutron", "l3_agent.ini"), ("neutron", "dhcp_agent.ini"))
    for service, name in agents:
        assert parse_ini(_files(plan, service)[name])["ovs"]["ovsdb_connection"] == "tcp:127.0.0.1:6640", name


def test_datapath_type_reaches_bridges_and_agent() -> None:
    plan = plan_of("staging", neutron={"datapathType": "netdev", "bridgeInterfaces": {"br-ex": "eth1"}})
    agent = parse_ini(_files(plan, "compute")["openvswitch_agent.ini"])
    assert agent["ovs"]["datapath_type"] == "netdev"
    vswitchd = _env(_container(plan, "DaemonSet", "openvswitch-vswitchd", "openvswitch-vswitchd"))
    assert vswitchd["DATAPATH_TYPE"] == "netdev"
    script = plan.by_name("compute-bin", "ConfigMap").inputs["data"]["vswitchd_start.sh"]
    assert 'datapath_type="${DATAPATH_TYPE}"' in script


def test_provider_bridges_get_their_nic_on_network_and_compute_nodes() -> None:
    """openstack-helm's auto_bridge_add: nothing else attaches a NIC to br-ex."""
    plan = plan_of(
        "staging",
        neutron={"bridgeInterfaces": {"br-ex": "eth1"}},
        compute={
            "nodeGroups": [
                {"name": "default", "nodeSelector": {"openstack-compute-group": "default"}},
                {"name": "gpu", "nodeSelector": {"openstack-compute-group": "gpu"}, "bridgeInterfaces": {}},
            ]
        },
    )
    bridges = {
        name: _env(_container(plan, "DaemonSet", name, "openvswitch-vswitchd"))["BRIDGES"]
        for name in ("network-openvswitch-vswitchd", "openvswitch-vswitchd", "openvswitch-vswitchd-gpu")
    }
    assert bridges == {
        "network-openvswitch-vswitchd": "br-ex=eth1",
        "openvswitch-vswitchd": "br-ex=eth1",
        "openvswitch-vswitchd-gpu": "br-ex=",  # a group without a provider NIC
    }
    script = plan.by_name("compute-bin", "ConfigMap").inputs["data"]["vswitchd_start.sh"]
    assert 'ovs-vsctl --no-wait --may-exist add-port "$bridge" "$nic"' in script


def test_guests_are_not_capped_by_the_libvirt_container() -> None:
    for topology, workload in (("all-in-one", "compute-node"), ("pod-per-service", "libvirt")):
        plan = plan_of("staging", hypervisorIsolation=topology)
        libvirt = _container(plan, "DaemonSet", workload, "libvirt")
        assert "limits" not in libvirt["resources"] and libvirt["resources"]["requests"], topology
        # everything else keeps its limits
        other = [c for r in objects(plan, "DaemonSet").values() for c in containers(r) if c["name"] != "libvirt"]
        assert all(c["resources"].get("limits") for c in other)


def test_failed_horizon_settings_are_not_looked_for_elsewhere() -> None:
    """HORIZON_LOCAL_SETTINGS is read by nothing; the Kolla image links local_settings.py to /etc."""
    plan = plan_of("dev")
    for container in containers(plan.by_name("horizon", "Deployment")):
        assert "HORIZON_LOCAL_SETTINGS" not in _env(container)
        mounts = {m["mountPath"] for m in container["volumeMounts"]}
        assert "/etc/openstack-dashboard/local_settings.py" in mounts


def test_libvirt_listens_for_migrations_with_sasl() -> None:
    # Over TCP without tls.libvirt (staging); prod's TLS listener is tests/test_libvirt_tls.py's.
    plan = plan_of("prod", tls={"public": {"issuer": {"kind": "ClusterIssuer", "name": "letsencrypt"}},
                                "internal": {"plainText": True}})  # fmt: skip
    assert plan.settings.tls.libvirt is None
    files = _files(plan, "compute")
    libvirtd = dict(line.split(" = ", 1) for line in files["libvirtd-kvm-general.conf"].splitlines() if " = " in line)
    assert libvirtd["listen_tcp"] == "1" and libvirtd["auth_tcp"] == '"sasl"' and libvirtd["listen_tls"] == "0"
    assert "mech_list: DIGEST-MD5" in files["libvirt-sasl.conf"]
    assert "authname=nova" in files["libvirt-auth.conf"]
    libvirt = _container(plan, "DaemonSet", "libvirt-kvm-general", "libvirt")
    env = _env(libvirt)
    assert env["NODE_IP"] == {"fieldRef": {"fieldPath": "status.hostIP"}}
    assert env["LIBVIRT_SASL_PASSWORD"] == {"secretKeyRef": {"name": "libvirt-sasl", "key": "password"}}
    mounts = {m["mountPath"] for m in libvirt["volumeMounts"]}
    assert {"/etc/sasl2/libvirt.conf", "/root/.config/libvirt/auth.conf"} <= mounts
    script = plan.by_name("compute-bin", "ConfigMap").inputs["data"]["libvirt_start.sh"]
    assert "libvirtd --listen" in script and 'listen_addr = "%s"' in script
    # the password reaches no config file but the auth file in the Secret
    assert "password" not in files["libvirtd-kvm-general.conf"]


def test_compute_nodes_use_their_own_address_for_consoles_and_migrations() -> None:
    plan = plan_of("prod")
    compute = _container(plan, "DaemonSet", "nova-compute-kvm-general", "nova-compute")
    env = _env(compute)
    for option in (
        "OS_DEFAULT__MY_IP",
        "OS_VNC__SERVER_LISTEN",
        "OS_VNC__SERVER_PROXYCLIENT_ADDRESS",
        "OS_LIBVIRT__LIVE_MIGRATION_INBOUND_ADDR",
    ):
        assert env[option] == "$(NODE_IP)", option
    assert env["NODE_IP"] == {"fieldRef": {"fieldPath": "status.hostIP"}}
    conf = parse_ini(_files(plan, "compute")["nova-kvm-general.conf"])
    assert "server_listen" not in conf["vnc"]  # never 0.0.0.0 of every node


def test_cinder_has_its_volume_type_and_reaches_glance_internally() -> None:
    plan = plan_of("staging")
    conf = parse_ini(_files(plan, "cinder")["cinder.conf"])
    assert conf["DEFAULT"]["default_volume_type"] == "lvm"
    assert conf["DEFAULT"]["glance_api_servers"].startswith("https://glance-api.openstack.svc.")  # internal TLS
    assert "cinder-api" in waits_for(plan, "cinder-volume-type")
    job = _container(plan, "Job", "cinder-volume-type", "cinder-volume-type")
    assert _env(job)["VOLUME_TYPES"] == "lvm=lvm"


def test_iscsi_volumes_attach_through_an_iscsid_pod() -> None:
    plan = plan_of("staging")
    iscsid = pod_template(plan.by_name("iscsid", "DaemonSet"))["spec"]
    assert iscsid["hostNetwork"] is True and iscsid["hostIPC"] is True
    compute = _container(plan, "DaemonSet", "nova-compute", "nova-compute")
    assert "/etc/iscsi" in {m["mountPath"] for m in compute["volumeMounts"]}
    nfs = plan_of("staging", cinder={"backend": "nfs", "nfsShares": ["nfs.example.com:/export"]})
    assert "iscsid" not in objects(nfs, "DaemonSet")
    host_runs_it = plan_of("staging", hypervisorIsolation="baremetal-hypervisor")
    assert "iscsid" not in objects(host_runs_it, "DaemonSet")


def test_glance_replicas_proxy_imports_to_each_other() -> None:
    glance = _container(plan_of("prod"), "Deployment", "glance-api", "glance-api")
    env = _env(glance)
    assert env["POD_IP"] == {"fieldRef": {"fieldPath": "status.podIP"}}
    assert env["OS_DEFAULT__WORKER_SELF_REFERENCE_URL"] == "http://$(POD_IP):9292"


def test_glance_loads_its_metadata_definitions_before_its_api_answers() -> None:
    """An empty `GET /v2/metadefs/*` was Tempest's finding: Kolla and openstack-helm load them after db_sync."""
    plan = plan_of("prod")
    load = _container(plan, "Job", "glance-metadefs-load", "glance-metadefs-load")
    assert load["args"][-4:] == ["db", "load_metadefs", "--path", "/etc/glance/metadefs"]
    assert "--merge" not in load["args"]  # definitions already there (or edited) are kept
    assert "/etc/glance/glance-api.conf" in {m["mountPath"] for m in load["volumeMounts"]}
    assert "glance-db-sync" in waits_for(plan, "glance-metadefs-load")
    assert "glance-metadefs-load" in waits_for(plan, "glance-api")


@pytest.mark.parametrize("backend", ["file", "cinder"])
def test_glance_offers_no_copy_between_stores_it_does_not_have(backend: str) -> None:
    """One store: copy-image has nowhere to copy to (glance answers 202 and does nothing)."""
    conf = parse_ini(_files(plan_of("staging", glance={"backend": backend}), "glance")["glance-api.conf"])
    assert conf["DEFAULT"]["enabled_backends"] == f"{backend}:{backend}"  # one store
    methods = conf["DEFAULT"]["enabled_import_methods"].strip("[]").split(",")
    assert "copy-image" not in methods and {"glance-direct", "web-download"} <= set(methods)


def test_cell_mappings_follow_nova_conf() -> None:
    plan = plan_of("prod")
    script = plan.by_name("nova-bin", "ConfigMap").inputs["data"]["nova_db_sync.sh"]
    assert 'cell_v2 update_cell --cell_uuid "$(cell1)"' in script
    assert "--config-file /etc/nova/nova-cell0.conf" in script and "--transport-url none:///" in script
    cell0 = parse_ini(_files(plan, "nova")["nova-cell0.conf"])
    assert cell0["database"]["connection"].endswith("/nova_cell0?charset=utf8")
    sync = _container(plan, "Job", "nova-db-sync", "nova-db-sync")
    assert "/etc/nova/nova-cell0.conf" in {m["mountPath"] for m in sync["volumeMounts"]}


def test_host_discovery_of_the_deploy_waits_for_a_host_and_the_cronjob_does_not() -> None:
    plan = plan_of("prod")
    job = _container(plan, "Job", "nova-cell-setup", "nova-cell-setup")
    cron = _container(plan, "CronJob", "nova-cell-setup", "nova-cell-setup")
    assert int(_env(job)["WAIT_FOR_A_HOST_SECONDS"]) > 0
    assert _env(cron)["WAIT_FOR_A_HOST_SECONDS"] == "0"


def test_rpc_daemons_are_ready_while_connected_to_rabbitmq_only() -> None:
    """Pooled database connections come and go: kolla-ansible's healthcheck_port checks the queue only."""
    plan = plan_of("staging")
    for workload in ("nova-conductor", "nova-scheduler", "cinder-scheduler"):
        probe = _container(plan, "Deployment", workload, workload)["readinessProbe"]["exec"]["command"]
        assert probe[-1] == "5671" and "3306" not in probe, workload  # staging's amqps (internal TLS)


def test_cinder_volume_takes_its_node_address_from_the_environment_and_one_config_file() -> None:
    """cinder starts privsep-helper with cinder-volume's --config-file arguments, and cinder's filters
    admit one (tests/real/test_cinder_volume.py runs it against them)."""
    plan = plan_of("staging")
    env = _env(_container(plan, "DaemonSet", "cinder-volume", "cinder-volume"))
    assert env["NODE_IP"] == {"fieldRef": {"fieldPath": "status.hostIP"}}
    assert env["OS_DEFAULT__MY_IP"] == env["OS_LVM__TARGET_IP_ADDRESS"] == "$(NODE_IP)"
    script = plan.by_name("cinder-bin", "ConfigMap").inputs["data"]["cinder_volume_start.sh"]
    [start] = [line for line in script.splitlines() if line.startswith("exec ")]
    assert start == "exec cinder-volume --config-file /etc/cinder/cinder.conf"
    nfs = plan_of("staging", cinder={"backend": "nfs", "nfsShares": ["nfs.example.com:/export"]})
    nfs_env = _env(_container(nfs, "DaemonSet", "cinder-volume", "cinder-volume"))
    assert nfs_env["OS_DEFAULT__MY_IP"] == "$(NODE_IP)" and not any(k.startswith("OS_NFS__") for k in nfs_env)


def test_nova_calls_cinder_without_a_user_token_as_nova() -> None:
    """Periodic tasks and nova-compute's clean-up at start use [cinder]'s credentials (tests/real loads
    them with nova); nova's own user, so no node learns cinder's password."""
    plan = plan_of("prod")
    confs = [parse_ini(_files(plan, "nova")["nova.conf"]), parse_ini(_files(plan, "compute")["nova-kvm-general.conf"])]
    for conf in confs:
        cinder, placement = conf["cinder"], conf["placement"]
        assert cinder["auth_type"] == "password" and cinder["username"] == "nova"
        assert cinder["password"] == placement["password"]
        assert "region_name" not in cinder  # [cinder] names its region os_region_name


def test_vxlan_tunnels_use_the_stacks_port_on_every_agent() -> None:
    """The agents share the nodes' network namespace with the network plugin, which may tunnel on 4789."""
    plan = plan_of("prod")
    port = plan.settings.neutron.vxlan_udp_port
    assert port not in (4789, 4790, 6081, 8472)
    # compute-etc's file is every compute and network node agent's; neutron-etc renders the same.
    for service in ("compute", "neutron"):
        agent = parse_ini(_files(plan, service)["openvswitch_agent.ini"])["agent"]
        assert agent["tunnel_types"] == "vxlan" and agent["vxlan_udp_port"] == str(port), service
    chosen = plan_of("prod", neutron={"vxlanUdpPort": 4800})
    assert parse_ini(_files(chosen, "compute")["openvswitch_agent.ini"])["agent"]["vxlan_udp_port"] == "4800"
    vlan = plan_of("prod", neutron={"tenantNetworkType": "vlan", "vlanRanges": ["physnet1:100:199"]})
    assert "vxlan_udp_port" not in parse_ini(_files(vlan, "compute")["openvswitch_agent.ini"])["agent"]


@pytest.mark.parametrize(
    ("stack", "neutron", "expected"),
    [
        # prod: ha and three network nodes: kolla-ansible's enable_neutron_agent_ha figures.
        ("prod", None, ("true", "3", "2")),
        ("prod", {"networkNodeCount": 2}, ("true", "2", "2")),
        # Without ha a router and a network's DHCP live on one agent each (neutron's defaults).
        ("staging", {"networkNodeCount": 3}, (None, None, None)),
    ],
)
def test_routers_and_dhcp_survive_a_network_node_under_ha(
    stack: str, neutron: dict[str, int] | None, expected: tuple[str | None, ...]
) -> None:
    plan = plan_of(stack, neutron=neutron) if neutron else plan_of(stack)
    server = parse_ini(_files(plan, "neutron")["neutron.conf"])["DEFAULT"]
    options = ("l3_ha", "max_l3_agents_per_router", "dhcp_agents_per_network")
    assert tuple(server.get(o) for o in options) == expected
    # Scheduling is neutron-server's: the agents' own neutron.conf (and pods) do not change.
    assert not set(options) & set(parse_ini(_files(plan, "neutron")["neutron-agent.conf"])["DEFAULT"])
