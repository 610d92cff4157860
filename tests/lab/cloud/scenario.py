"""What a user does with the new cloud, with its generated admin credentials, from inside the cluster.

    python -m tests.lab.cloud.scenario KERNEL INITRAMFS DISK [STEPS] > facts.json

Run by tests/lab/cloud/run.py with the OpenStack virtualenv's interpreter, from a pod's network
namespace that resolves names with the cluster's DNS (tests/lab/cloud/userpod.py), with OS_*
variables as the keystone-admin Secret and the catalog's internal interface give them, and the
Kubernetes API as an administrator's kubectl reaches it (KUBE_* variables). Uploads the guest,
builds a network with a router to the provider network, boots a server on each compute node
(COMPUTE_HOSTS) and reads what the guests say on their consoles (DHCP, metadata, the provider
network through the router's SNAT, the first VM from the second across the tunnel); asks Cinder
for a volume; for a stack that keeps data in Ceph, proves it against the cluster
(tests/lab/cloud/ceph_check.py); then moves the VMs off a node, by nova-compute-maintenance and by the
README's procedure (tests/lab/cloud/migration_check.py). Horizon is logged in to from outside, through
the gateway (tests/lab/cloud/public_scenario.py): its NetworkPolicy admits nothing else. Prints one
JSON object with what it found; each step's failure is recorded, not raised.
"""

from __future__ import annotations

import base64
import json
import os
import re
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

import openstack

from tests.lab.cloud import ceph_check, migration_check
from tests.lab.cloud.guest import parse_console
from tests.lab.cloud.kubectl import Kubectl

PROVIDER_CIDR, PROVIDER_GATEWAY = "172.24.4.0/24", "172.24.4.1"
TENANT_CIDR = "10.10.0.0/24"
SERVER_TIMEOUT, CONSOLE_TIMEOUT, PORT_TIMEOUT = 600, 420, 180


def _wait(what: str, check: Callable[[], Any], timeout: float, interval: float = 3) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        found = check()
        if found:
            return found
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what}: not after {timeout:.0f}s")
        time.sleep(interval)


def upload_guest(conn: openstack.connection.Connection, disk: Path) -> Any:
    """The guest as users upload an image: a raw boot disk (tests/lab/cloud/guest.py)."""
    return conn.image.create_image(
        name="guest", filename=str(disk), disk_format="raw", container_format="bare", visibility="public"
    )


def build_network(conn: openstack.connection.Connection) -> tuple[Any, Any]:
    """A tenant network behind a router whose gateway is on the flat provider network."""
    public = conn.network.create_network(
        name="public", is_router_external=True, provider_network_type="flat", provider_physical_network="physnet1"
    )
    conn.network.create_subnet(
        network_id=public.id,
        name="public-subnet",
        ip_version=4,
        cidr=PROVIDER_CIDR,
        gateway_ip=PROVIDER_GATEWAY,
        enable_dhcp=False,
        allocation_pools=[{"start": "172.24.4.100", "end": "172.24.4.200"}],
    )
    private = conn.network.create_network(name="private")
    subnet = conn.network.create_subnet(network_id=private.id, name="private-subnet", ip_version=4, cidr=TENANT_CIDR)
    router = conn.network.create_router(name="router", external_gateway_info={"network_id": public.id})
    conn.network.add_interface_to_router(router, subnet_id=subnet.id)
    return private, router


def boot_server(
    conn: openstack.connection.Connection, name: str, image: Any, flavor: Any, network: Any, host: str, pings: list[str]
) -> dict[str, Any]:
    """A server on `host` (the admin's `nova:<host>` zone), and what its guest said on its console."""
    user_data = base64.b64encode("".join(f"ping {ip}\n" for ip in pings).encode()).decode()
    server = conn.compute.create_server(
        name=name, image_id=image.id, flavor_id=flavor.id, networks=[{"uuid": network.id}],
        availability_zone=f"nova:{host}", user_data=user_data,
    )  # fmt: skip
    facts: dict[str, Any] = {"id": server.id, "status": "BUILD", "asked_host": host}
    started = time.monotonic()
    server = conn.compute.wait_for_server(server, status="ACTIVE", failures=["ERROR"], wait=SERVER_TIMEOUT)
    facts.update(status=server.status, active_after=round(time.monotonic() - started, 1))
    facts["host"] = server.compute_host
    facts["instance_name"] = server.instance_name
    port = _wait(
        f"{name}'s port ACTIVE",
        lambda: next((p for p in conn.network.ports(device_id=server.id) if p.status == "ACTIVE"), None),
        PORT_TIMEOUT,
    )
    facts["port_status"] = port.status
    facts["ip"] = port.fixed_ips[0]["ip_address"]
    console = _wait(
        f"{name}'s DHCP lease, metadata and pings on its console",
        lambda: _console_done(conn.compute.get_server_console_output(server)["output"], len(pings)),
        CONSOLE_TIMEOUT,
        interval=5,
    )
    seen = parse_console(console)
    facts["console_tail"] = console[-1500:]
    facts.update(
        dhcp_lease=seen.lease_ip == facts["ip"],
        lease_from=seen.lease_server,
        # Nova's EC2 instance id is the instance's database id, as its instance name shows it.
        metadata=seen.uuid == server.id and _ec2_id(server.instance_name) == seen.instance_id,
        metadata_instance_id=seen.instance_id,
        gateway_reachable=seen.gateway_reachable,
        pings=seen.pings,
    )
    return facts


def _console_done(text: str, pings: int) -> str | None:
    seen = parse_console(text)
    metadata_answered = seen.uuid is not None or seen.metadata_unreachable
    pinged = len(seen.pings) >= pings or seen.metadata_unreachable
    return text if (seen.lease_ip or seen.lease_failed) and metadata_answered and seen.gateway and pinged else None


def _ec2_id(instance_name: str | None) -> str | None:
    match = re.search(r"([0-9a-f]+)$", instance_name or "")
    return f"i-{int(match[1], 16):08x}" if match else None


def volume(conn: openstack.connection.Connection, facts: dict[str, Any]) -> None:
    """The default volume type exists; a volume is only created where a backend runs."""
    default = os.environ["VOLUME_TYPE"]
    facts["volume_type"] = conn.block_storage.find_type(default) is not None
    if os.environ.get("VOLUME_BACKEND_RUNS") != "true":
        facts["volume"] = {"not_run": os.environ.get("VOLUME_NOT_RUN", "no volume backend runs")}
        return
    created = conn.block_storage.create_volume(size=1, name="vol1")
    created = conn.block_storage.wait_for_status(created, status="available", failures=["error"], wait=300)
    facts["volume"] = {"status": created.status}


def kubectl() -> Kubectl:
    return Kubectl(
        os.environ["KUBE_SERVER"], os.environ["KUBE_TOKEN"], os.environ["KUBE_CA_FILE"], os.environ["KUBE_NAMESPACE"]
    )


def prepare(conn: openstack.connection.Connection, disk: Path, made: dict[str, Any]) -> None:
    """What a user makes before a server: the guest image, the networks and router, the flavor (once)."""
    if "image" in made:
        return
    made["image"] = upload_guest(conn, disk)
    made["network"], _ = build_network(conn)
    made["flavor"] = conn.compute.create_flavor(name="tiny", ram=128, vcpus=1, disk=1)


def servers(
    conn: openstack.connection.Connection, kernel: Path, initramfs: Path, disk: Path, facts: dict, made: dict
) -> None:
    """vm1 on the first compute node pings the provider network; vm2 on the second pings vm1 and the provider.
    `made` keeps the image, network, flavor and vm1 for later steps (the Ceph proof)."""
    hosts = os.environ["COMPUTE_HOSTS"].split(",")
    prepare(conn, disk, made)
    image, network, flavor = made["image"], made["network"], made["flavor"]
    facts["server"] = boot_server(conn, "vm1", image, flavor, network, hosts[0], [PROVIDER_GATEWAY])
    made["vm1"] = facts["server"]["id"]
    if len(hosts) > 1:
        peer = facts["server"]["ip"]
        facts["peer_server"] = boot_server(conn, "vm2", image, flavor, network, hosts[1], [peer, PROVIDER_GATEWAY])


def migrations(conn: openstack.connection.Connection, facts: dict[str, Any]) -> None:
    hosts = os.environ["COMPUTE_HOSTS"].split(",")
    server = facts.get("server") or {}
    if len(hosts) < 2 or server.get("status") != "ACTIVE":
        facts["maintenance"] = {"not_run": "one compute node, or no ACTIVE server to move"}
        return
    kube = kubectl()
    found = migration_check.by_controller(conn, kube, hosts[0], hosts[1], server["id"])
    facts["maintenance"] = {"live_migration": found}
    # Back, by the README's procedure on the node the VMs are on now.
    facts["maintenance"]["by_hand"] = migration_check.by_hand(conn, kube, hosts[1], hosts[0])
    facts["server"]["host"] = conn.compute.get_server(server["id"]).compute_host


def found_again(conn: openstack.connection.Connection, facts: dict[str, Any], made: dict[str, Any]) -> None:
    """What the `server` step made, found by name by a later run (the steps after a release upgrade)."""
    made.update(image=conn.image.find_image("guest", ignore_missing=False),
                network=conn.network.find_network("private", ignore_missing=False),
                flavor=conn.compute.find_flavor("tiny", ignore_missing=False))  # fmt: skip
    vm1 = conn.compute.find_server("vm1", ignore_missing=False)
    made["vm1"] = vm1.id
    facts["server"] = {"id": vm1.id, "status": vm1.status, "host": vm1.compute_host}


def main() -> None:
    """KERNEL INITRAMFS DISK [STEPS]: STEPS (comma-separated, default all) runs some of them, in their order;
    without `prepare` or `server`, what they made is found by name (tests/lab/cloud/run.py runs the rest after an
    upgrade)."""
    kernel, initramfs, disk = map(Path, sys.argv[1:4])
    facts: dict[str, Any] = {"errors": {}}
    conn = openstack.connect()
    made: dict[str, Any] = {}
    steps: list[tuple[str, Callable[[], None]]] = [
        # Alone, what Tempest's configuration names (make test-tempest); else the first part of `server`.
        ("prepare", lambda: prepare(conn, disk, made)),
        ("server", lambda: servers(conn, kernel, initramfs, disk, facts, made)),
        ("volume", lambda: volume(conn, facts)),
        # Before the maintenance: its servers boot on the first compute node and are gone after.
        ("ceph", lambda: ceph_check.run(conn, made, facts)),
        # Last: it moves the servers between the compute nodes, and restarts their pods.
        ("maintenance", lambda: migrations(conn, facts)),
    ]
    wanted = sys.argv[4].split(",") if len(sys.argv) > 4 else [name for name, _ in steps]
    if unknown := set(wanted) - {name for name, _ in steps}:
        raise SystemExit(f"unknown steps {sorted(unknown)}")
    steps = [(name, step) for name, step in steps if name in wanted]
    if not {"prepare", "server"} & set(wanted):
        steps.insert(0, ("found_again", lambda: found_again(conn, facts, made)))
    for name, step in steps:
        started = time.monotonic()
        try:
            step()
        except Exception as error:  # each step's failure is a finding of the report
            facts["errors"][name] = f"{type(error).__name__}: {error}\n{traceback.format_exc()[-1500:]}"
        facts.setdefault("seconds", {})[name] = round(time.monotonic() - started, 1)
    print(json.dumps(facts))


if __name__ == "__main__":
    main()
