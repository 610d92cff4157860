"""Neutron with ML2/Open vSwitch: the API and RPC server, and the network-node agents.

The Open vSwitch agent of compute and network nodes is deployed with the node pods
(components/services/compute.py); its openvswitch_agent.ini is rendered here with the rest.
"""

from __future__ import annotations

from components.mechanism import oslo
from components.mechanism.api import registered_api_needs, rpc_daemon, uwsgi_file, wsgi_api
from components.mechanism.bootstrap import db_sync
from components.mechanism.inifile import render_ini
from components.mechanism.spec import CatalogEntry, Process, RenderContext, ServiceSpec
from components.settings import releases
from components.settings.model import Settings
from components.tables.roles import NETWORK_NODE_PODS

CONFIG_DIR = "/etc/neutron"
PORT = 9696
# Where neutron looks for the ML2 plugin's file: under uWSGI the API reads exactly
# /etc/neutron/neutron.conf and /etc/neutron/plugins/ml2/ml2_conf.ini (neutron/server/__init__.py);
# kolla-ansible and openstack-helm keep it there too.
PLUGIN_DIR = f"{CONFIG_DIR}/plugins/ml2"
ML2_CONF = f"{PLUGIN_DIR}/ml2_conf.ini"
SERVER_FILES = ("neutron.conf", f"ml2_conf.ini={ML2_CONF}")
AGENT_NEEDS = ("neutron-server", "neutron-rabbit-init")
AGENT_CONF = "neutron-agent.conf"  # mounted as the agents' /etc/neutron/neutron.conf
# The agents and os-vif talk to OVSDB over TCP on the node's loopback (their default), which the
# openvswitch-db container serves as kolla-ansible does (components/scripts/ovsdb_start.sh).
OVSDB_CONNECTION = f"tcp:127.0.0.1:{oslo.OVSDB_PORT}"


def _conf_args(*paths: str) -> tuple[str, ...]:
    """--config-file arguments; a bare name is a file of /etc/neutron."""
    return tuple(arg for p in paths for arg in ("--config-file", p if p.startswith("/") else f"{CONFIG_DIR}/{p}"))


# kolla-ansible's figures with enable_neutron_agent_ha: a router active on one L3 agent with two
# standbys (keepalived, VRRP over a per-project HA network), a network's DHCP on two agents.
L3_AGENTS_PER_ROUTER = 3
DHCP_AGENTS_PER_NETWORK = 2


def agent_ha(settings: Settings) -> dict[str, object]:
    """Routers and DHCP that survive the loss of a network node, under ha with two or more of them.

    Without it neutron puts each router and each network's DHCP on one agent, and losing that
    node takes them down. Neutron schedules onto the agents alive, at most these many.
    """
    nodes = settings.network_node_count()
    if not settings.ha or nodes < 2:
        return {}
    return {
        "l3_ha": True,
        "max_l3_agents_per_router": min(L3_AGENTS_PER_ROUTER, nodes),
        "dhcp_agents_per_network": min(DHCP_AGENTS_PER_NETWORK, nodes),
    }


def neutron_sections(ctx: RenderContext) -> dict[str, dict]:
    """neutron.conf of neutron-server: the database, and Keystone credentials to validate tokens and call Nova."""
    settings, secrets = ctx.settings, ctx.secrets
    return oslo.merge(
        agent_sections(ctx),
        {
            "DEFAULT": {
                "core_plugin": "ml2",
                "service_plugins": "router",
                "auth_strategy": "keystone",
                "notify_nova_on_port_status_changes": True,
                "notify_nova_on_port_data_changes": True,
                **agent_ha(settings),
            },
            "database": oslo.database(settings, "neutron", secrets["database"], "neutron"),
            "keystone_authtoken": oslo.keystone_authtoken(settings, "neutron", secrets),
            "nova": {**oslo.service_credentials(settings, "neutron", secrets["keystone"]), "endpoint_type": "internal"},
            "oslo_middleware": {"enable_proxy_headers_parsing": True},
        },
    )


def agent_sections(ctx: RenderContext) -> dict[str, dict]:
    """neutron.conf of the agents on compute and network nodes: RPC only.

    They talk to neutron-server over the message queue, so they get neither the database nor
    neutron's Keystone password: a node that is broken into must not learn either.
    """
    return oslo.merge(
        {
            "DEFAULT": {**oslo.logging(), "state_path": "/var/lib/neutron"},
            "oslo_concurrency": oslo.lock_path("/var/lib/neutron/tmp"),
        },
        oslo.messaging(ctx.settings, "neutron", ctx.secrets["rabbitmq"]),
    )


def ovs_agent_sections(ctx: RenderContext) -> dict[str, dict]:
    net = ctx.settings.neutron
    tunnelled = net.tenant_network_type == "vxlan"
    return {
        # local_ip differs per node: the agent's start script adds it from the node's address.
        # The agent creates br-int with this datapath, and Nova's os-vif follows the port binding.
        "ovs": {
            "bridge_mappings": ",".join(f"{k}:{v}" for k, v in net.bridge_mappings.items()),
            "datapath_type": net.datapath_type,
            "ovsdb_connection": OVSDB_CONNECTION,
        },
        # The tunnels' port is the stack's (neutron.vxlanUdpPort), not VXLAN's 4789: the agents share
        # the nodes' network namespace with the cluster's network plugin, which may tunnel on it.
        "agent": {
            "tunnel_types": "vxlan" if tunnelled else None,
            "vxlan_udp_port": net.vxlan_udp_port if tunnelled else None,
            "l2_population": tunnelled,
        },
        "securitygroup": {"firewall_driver": "openvswitch", "enable_security_group": True},
    }


def render(ctx: RenderContext) -> dict[str, str]:
    settings, secrets = ctx.settings, ctx.secrets
    net = settings.neutron
    ml2 = {
        "ml2": {
            "type_drivers": "flat,vlan,vxlan",
            # tenant_network_types before 2026.1 (components/settings/releases.py).
            releases.ml2_network_types_option(settings): net.tenant_network_type,
            "mechanism_drivers": "openvswitch,l2population",
            "extension_drivers": "port_security",
        },
        "ml2_type_flat": {"flat_networks": ",".join(net.bridge_mappings)},
        "ml2_type_vlan": {"network_vlan_ranges": ",".join(net.vlan_ranges) or ",".join(net.bridge_mappings)},
        "ml2_type_vxlan": {"vni_ranges": "1:65535"},
    }
    agent_default = {**oslo.logging(), "interface_driver": "openvswitch"}
    agent_ovs = {"ovs": {"ovsdb_connection": OVSDB_CONNECTION}}
    return {
        "neutron.conf": render_ini(neutron_sections(ctx)),
        AGENT_CONF: render_ini(agent_sections(ctx)),
        "ml2_conf.ini": render_ini(ml2),
        "openvswitch_agent.ini": render_ini(ovs_agent_sections(ctx)),
        "l3_agent.ini": render_ini({"DEFAULT": agent_default, **agent_ovs}),
        "dhcp_agent.ini": render_ini(
            {"DEFAULT": {**agent_default, "enable_isolated_metadata": True, "force_metadata": False}, **agent_ovs}
        ),
        "metadata_agent.ini": render_ini(
            {
                "DEFAULT": {
                    **oslo.logging(),
                    "nova_metadata_host": settings.service_host("nova-metadata"),
                    "nova_metadata_port": 8775,
                    **(
                        {"nova_metadata_protocol": "https", **oslo.ca_file(settings, "auth_ca_cert")}
                        if settings.tls.internal_enabled
                        else {}
                    ),
                    "metadata_proxy_shared_secret": secrets["metadata-proxy-shared-secret"],
                }
            }
        ),
        **uwsgi_file(settings, "neutron-server", "neutron.wsgi.api:application", PORT),
    }


def _agent(pod_name: str, agent_ini: str) -> Process:
    pod = next(p for p in NETWORK_NODE_PODS if p.name == pod_name)
    binary = pod_name  # the agents' pods are named after their programs
    return rpc_daemon(
        pod_name,
        pod.roles[0].image,
        (binary, *_conf_args("neutron.conf", agent_ini)),
        # Agents report to neutron-server over RPC and fetch their work from it.
        AGENT_NEEDS,
        (f"{AGENT_CONF}={CONFIG_DIR}/neutron.conf", agent_ini),
        node_pod=pod,
    )


def neutron(settings: Settings) -> ServiceSpec:
    server_args = _conf_args("neutron.conf", ML2_CONF)
    return ServiceSpec(
        name="neutron",
        config_dir=CONFIG_DIR,
        render=render,
        messaging=True,
        shared_secrets=("metadata-proxy-shared-secret",),
        catalog=(CatalogEntry("network", "neutron", "neutron-server", PORT),),
        steps=(
            db_sync("neutron", "neutron-server", ("neutron-db-manage", *server_args, "upgrade", "heads"), SERVER_FILES),
        ),
        processes=(
            wsgi_api(
                "neutron-server",
                "neutron-server",
                CONFIG_DIR,
                PORT,
                # Under uWSGI the API serves HTTP only; agents' RPC and periodic tasks run
                # beside it in the same pod. Nova is called per port event, at run time.
                needs=(*registered_api_needs("neutron"), "neutron-rabbit-init"),
                config_files=SERVER_FILES,
                sidecars=(
                    rpc_daemon(
                        "neutron-rpc-server", "neutron-server", ("neutron-rpc-server", *server_args), (), SERVER_FILES
                    ),
                    rpc_daemon(
                        "neutron-periodic-workers",
                        "neutron-server",
                        ("neutron-periodic-workers", *server_args),
                        (),
                        SERVER_FILES,
                    ),
                ),
            ),
            _agent("neutron-l3-agent", "l3_agent.ini"),
            _agent("neutron-dhcp-agent", "dhcp_agent.ini"),
            _agent("neutron-metadata-agent", "metadata_agent.ini"),
        ),
    )
