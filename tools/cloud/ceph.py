"""The lab's external Ceph cluster: a real one (Debian 12's Ceph 16), standing in for the operator's.

Written from the recipe proven in /work/proto/ceph (start.sh): one monitor, one manager and one
OSD whose BlueStore lives on a sparse file outside its data directory (no LVM, device-mapper or
kernel module: QEMU and the services use librbd), every path under the run's state directory,
the pools and clients of kolla-ansible's cephadm role (roles/cephadm/defaults/main.yml).

Where it runs: a host of its own on the lab's fabric, the network namespace `cloud-ceph` cabled to
the node network's bridge at CEPH_ADDRESS, as an external cluster sits on a network the nodes
reach. Host-network pods (cinder-volume, nova-compute, libvirt) reach it from their node's address;
other pods (glance-api, cinder-backup) leave their node with their own address (the lab routes pod
ranges without NAT, tools/cloud/cluster.py), so the Ceph host routes each node's pod range back
through that node, as the nodes do among themselves.

What the stack gets: its monitors replaced by CEPH_ADDRESS (a machine difference, like the virt
type), its fsid kept (the cluster is created with it), and the keyring Secrets its
`ceph.clients` name, made from the keyrings the cluster wrote.

NOT RUN, AND NOT COMPLETE: this module builds the daemons' ceph.conf, the Ceph host's network,
the pools' and clients' commands, the keyring Secrets and the stack's monitors; it does not yet
start the daemons (start.sh's monitor mkfs, manager and `ceph osd new` + OSD mkfs steps, which
need the id `osd new` prints) nor stop them, and tools/cloud/run.py does not use it (without_ceph
keeps the lab's prod off Ceph). To wire it: start the daemons in CEPH_NETNS after Cluster.create(),
monitors_override() into machine_overrides instead of without_ceph, keyring_secrets() into the
lab API server and Cloud.objects before the deploy, stop in the teardown; the packages are
Debian's ceph-mon ceph-mgr ceph-osd ceph-common (and python3-rados python3-rbd for checks from
the OpenStack venv).
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from pathlib import Path

from components.ceph_settings import KEYRING_KEY, Ceph, CephClient
from tools.cloud.node import NODE_NETWORK, Node

CEPH_NETNS = "cloud-ceph"
CEPH_ADDRESS = str(NODE_NETWORK.network_address + 5)  # below the nodes (.11 on), above the fabric's .1
MON, MGR = "a", "x"
# kolla-ansible's cephadm_ceph_users; Nova's own client, when the stack names one, gets cinder's.
CAPS = {
    "glance": {"osd": "profile rbd pool={images}", "mgr": "profile rbd pool={images}"},
    "cinder": {
        "osd": "profile rbd pool={volumes}, profile rbd pool={vms}, profile rbd-read-only pool={images}",
        "mgr": "profile rbd pool={volumes}, profile rbd pool={vms}",
    },
    "cinder_backup": {"osd": "profile rbd pool={backups}", "mgr": "profile rbd pool={backups}"},
}
OSD_SIZE = "10G"  # a sparse file: what the lab's images and volumes use of it


@dataclass(frozen=True)
class CephStandIn:
    ceph: Ceph  # the stack's settings: its fsid, pools and clients
    state: Path  # everything of the cluster lives here

    @property
    def conf_path(self) -> Path:
        return self.state / "ceph.conf"

    def clients(self) -> dict[str, CephClient]:
        """Each client the stack names, once, by the caps it gets."""
        clients = self.ceph.clients
        found = {"glance": clients.glance, "cinder": clients.cinder, "cinder_backup": clients.cinder_backup}
        if clients.nova is not None:
            found["nova"] = clients.nova
        return found

    def caps(self, name: str) -> list[str]:
        """`ceph auth get-or-create` capability arguments of a client (its kind's: nova takes cinder's)."""
        pools = self.ceph.pools.model_dump()
        kind = CAPS["cinder" if name == "nova" else name]
        return ["mon", "profile rbd", "osd", kind["osd"].format(**pools), "mgr", kind["mgr"].format(**pools)]

    def conf(self) -> str:
        """The daemons' ceph.conf: proto/ceph/start.sh's, with the stack's fsid and one copy of everything."""
        d = self.state
        return f"""[global]
fsid = {self.ceph.fsid}
mon_initial_members = {MON}
mon_host = [v2:{CEPH_ADDRESS}:3300,v1:{CEPH_ADDRESS}:6789]
public_addr = {CEPH_ADDRESS}
cluster_addr = {CEPH_ADDRESS}
auth_cluster_required = cephx
auth_service_required = cephx
auth_client_required = cephx
auth_allow_insecure_global_id_reclaim = false
run_dir = {d}/run
log_file = {d}/log/$cluster-$name.log
mon_data = {d}/data/mon.$id
mgr_data = {d}/data/mgr.$id
osd_data = {d}/data/osd.$id
osd_pool_default_size = 1
osd_pool_default_min_size = 1
mon_allow_pool_size_one = true
osd_crush_chooseleaf_type = 0
mon_warn_on_pool_no_redundancy = false
osd_pool_default_pg_num = 8
osd_pool_default_pgp_num = 8
osd_pool_default_pg_autoscale_mode = off
mon_data_avail_warn = 5
mon_data_avail_crit = 2

[mon]
keyring = $mon_data/keyring

[mgr]
keyring = $mgr_data/keyring

[osd]
keyring = $osd_data/keyring
osd_objectstore = bluestore
bluestore_block_path = {d}/blk/osd.$id.block
bluestore_block_create = true
bluestore_block_size = {OSD_SIZE}
bluestore_block_db_create = false
bluestore_block_wal_create = false
osd_memory_target = 939524096

[client.admin]
keyring = {d}/ceph.client.admin.keyring
"""

    def network_commands(self, nodes: list[Node], fabric_netns: str) -> list[list[str]]:
        """The Ceph host on the fabric: its namespace, a NIC on the node bridge, routes to the pod ranges."""
        inside = ["ip", "netns", "exec", CEPH_NETNS]
        prefix = ipaddress.ip_network(NODE_NETWORK).prefixlen
        commands = [
            ["ip", "netns", "add", CEPH_NETNS],
            [*inside, "ip", "link", "set", "lo", "up"],
            ["ip", "link", "add", "eth0", "netns", CEPH_NETNS, "type", "veth", "peer", "name", "n-ceph",
             "netns", fabric_netns],
            ["ip", "netns", "exec", fabric_netns, "ip", "link", "set", "n-ceph", "master", "nodes", "up"],
            [*inside, "ip", "addr", "add", f"{CEPH_ADDRESS}/{prefix}", "dev", "eth0"],
            [*inside, "ip", "link", "set", "eth0", "up"],
        ]  # fmt: skip
        commands += [[*inside, "ip", "route", "add", str(node.pod_cidr), "via", node.ip] for node in nodes]
        return commands

    def client_commands(self) -> list[list[str]]:
        """The pools (rbd pool init enables the rbd application) and each client's key, written to a keyring."""
        ceph = ["ceph", "-c", str(self.conf_path), "--connect-timeout", "30"]
        pools = list(dict.fromkeys(self.ceph.pools.model_dump().values()))
        commands = [[*ceph, "osd", "pool", "create", pool, "8", "8", "replicated"] for pool in pools]
        commands += [["rbd", "-c", str(self.conf_path), "pool", "init", pool] for pool in pools]
        for name, client in self.clients().items():
            keyring = self.state / "client" / f"ceph.client.{client.user}.keyring"
            entity = f"client.{client.user}"
            commands.append([*ceph, "auth", "get-or-create", entity, *self.caps(name), "-o", str(keyring)])
        return commands

    def keyring_secrets(self) -> dict[str, dict[str, str]]:
        """The Secrets the stack's clients name (keyringSecret → {keyring: the keyring file}), as a user makes them."""
        client_dir = self.state / "client"
        return {
            client.keyring_secret: {KEYRING_KEY: (client_dir / f"ceph.client.{client.user}.keyring").read_text()}
            for client in self.clients().values()
        }


def monitors_override(ceph_setting: dict) -> dict:
    """The stack's `ceph` with the lab's Ceph host as its one monitor (fsid, pools and clients kept)."""
    external = {**ceph_setting.get("external", {}), "monitors": [CEPH_ADDRESS]}
    return {**ceph_setting, "external": external}
