"""What Tempest's configuration takes from the running cloud itself, asked as its admin.

    python -m tests.lab.cloud.tempest_discover > facts.json

Run like the scenario (tests/lab/cloud/scenario.py) and after it, with the OpenStack virtualenv's
interpreter, inside the cluster, with the admin's OS_* variables. Finds the guest image, the
flavor and the provider network the scenario created, and prepares what an operator prepares for
Tempest as devstack does (a second flavor beside the first; the provider network as the default
external network and a shared default subnet pool, which Neutron's auto-allocated topology needs).
The guest image gets `os_shutdown_timeout` 0: the lab's busybox guest does not answer ACPI's power
button, so each stop, shelve, rebuild and rescue would wait Nova's shutdown_timeout (60 s) for it.
A compute node that offers Tempest fewer than GUEST_VCPUS guest vCPUs (this machine: two cores,
one reserved for the host, times Nova's initial allocation ratio of 4) gets its VCPU allocation
ratio raised through Placement, as an operator does where nova.conf sets no cpu_allocation_ratio.
Then reads what each API reports about itself: its microversion range, its extensions, Glance's
stores, the hypervisors Nova knows. Prints one JSON object ("prepared" lists what it changed);
any failure is an exit status other than 0, with its traceback on stderr.
"""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # openstacksdk is the OpenStack venv's: the program's tests call these with a double
    from openstack.connection import Connection

# What tests/lab/cloud/scenario.py creates.
GUEST_IMAGE, FLAVOR, PROVIDER_NETWORK = "guest", "tiny", "public"
ALT_IMAGE = "guest-alt"
MULTIATTACH_TYPE = "multiattach"  # devstack's name for it (lib/cinder)
# Tempest's flavor_ref_alt: another flavor, a little larger (resize tests go from one to the other).
ALT_FLAVOR = {"name": "tiny-alt", "ram": 192, "vcpus": 1, "disk": 1}
# devstack's SUBNETPOOL_*_V4 for auto-allocated networks; apart from the scenario's networks and
# Tempest's project_network_cidr (10.100.0.0/16).
DEFAULT_POOL_PREFIX = "10.200.0.0/16"
DEFAULT_POOL: dict[str, Any] = {"name": "default-v4", "prefixes": [DEFAULT_POOL_PREFIX], "default_prefix_length": 26}
# Tempest's compute classes hold a few servers each, besides those of the scenario and those still
# being deleted: below this many guest vCPUs its builds fail with "No valid host was found".
GUEST_VCPUS = 16
# Keystone names its API extensions in the link relations of its JSON home document.
_IDENTITY_EXTENSION = re.compile(r"/ext/([^/]+)/")


def _version(found: tuple[int, ...] | None) -> str | None:
    return ".".join(map(str, found[:2])) if found else None


def microversions(proxy: Any) -> dict[str, str | None]:
    """The range the service's endpoint announces in its version document (keystoneauth's discovery)."""
    data = proxy.get_endpoint_data()
    return {"min": _version(data.min_microversion), "max": _version(data.max_microversion)}


def identity_extensions(conn: Connection) -> list[str]:
    home = conn.identity.get("/", headers={"Accept": "application/json-home"}).json()
    return sorted({m[1] for rel in home.get("resources", {}) for m in [_IDENTITY_EXTENSION.search(rel)] if m})


def alt_flavor(conn: Connection) -> Any:
    return conn.compute.find_flavor(ALT_FLAVOR["name"]) or conn.compute.create_flavor(**ALT_FLAVOR)


def auto_allocation(conn: Connection, public: Any, prepared: list[str]) -> None:
    """The default external network and default subnet pool Neutron allocates a project's network from."""
    if not public.is_default:
        conn.network.update_network(public, is_default=True)
        prepared.append(f"network {public.name} is the default external network")
    if conn.network.find_subnet_pool(DEFAULT_POOL["name"]) is None:
        conn.network.create_subnet_pool(**DEFAULT_POOL, is_default=True, is_shared=True)
        prepared.append(f"shared default subnet pool {DEFAULT_POOL['name']} {DEFAULT_POOL_PREFIX}")


def guest_vcpus(conn: Connection, prepared: list[str]) -> None:
    """Raise the VCPU allocation ratio of each compute node offering fewer than GUEST_VCPUS.

    Nova keeps a ratio set through Placement unless nova.conf sets cpu_allocation_ratio
    (nova/virt/driver.py _get_allocation_ratios); a generation conflict with nova-compute's own
    update is retried.
    """
    for provider in conn.placement.get("/resource_providers").json()["resource_providers"]:
        url = f"/resource_providers/{provider['uuid']}/inventories"
        for _ in range(10):
            found = conn.placement.get(url).json()
            vcpu = found["inventories"].get("VCPU")
            cores = vcpu["total"] - vcpu["reserved"] if vcpu else 0
            if not vcpu or cores < 1 or cores * vcpu["allocation_ratio"] >= GUEST_VCPUS:
                break
            ratio = float(-(-GUEST_VCPUS // cores))
            generation = found["resource_provider_generation"]
            body = {**vcpu, "allocation_ratio": ratio, "resource_provider_generation": generation}
            if conn.placement.put(f"{url}/VCPU", json=body, raise_exc=False).status_code == 200:
                prepared.append(
                    f"VCPU allocation ratio of {provider['name']} {vcpu['allocation_ratio']} -> {ratio} "
                    f"({cores} core(s) for guests)"
                )
                break


def hard_power_off(conn: Connection, image: Any, prepared: list[str]) -> None:
    """Nova powers a server of this image off at once (its image_os_shutdown_timeout, compute/manager.py)."""
    if (image.properties or {}).get("os_shutdown_timeout") != "0":
        conn.image.update_image(image, os_shutdown_timeout="0")
        prepared.append(f"image {image.name}: os_shutdown_timeout 0 (the guest ignores ACPI shutdown)")


def alt_image(conn: Connection, image: Any, prepared: list[str]) -> Any:
    """Tempest's image_ref_alt: the guest again under another name and id (a server listing filtered
    by image needs two; with one, Tempest skips them: "Need distinct images to run this test")."""
    found = conn.image.find_image(ALT_IMAGE)
    if found is None:
        data = conn.image.download_image(image).content
        found = conn.image.create_image(
            name=ALT_IMAGE, data=data, disk_format=image.disk_format,
            container_format=image.container_format, visibility="public",
        )  # fmt: skip
        prepared.append(f"image {ALT_IMAGE}: {image.name}'s {len(data)} bytes again")
    hard_power_off(conn, found, prepared)
    return found


def multiattach_type(conn: Connection, prepared: list[str]) -> str:
    """Tempest's [volume] volume_type_multiattach: a volume type whose volumes may attach to several
    servers (cinder's extra spec `multiattach="<is> True"`; the flag on the volume itself is gone
    since microversion 3.50), made as devstack makes it. Its volumes go to any backend that reports
    multiattach, which is what the scheduler's capabilities filter matches the spec against."""
    found = conn.block_storage.find_type(MULTIATTACH_TYPE)
    if found is None:
        conn.block_storage.create_type(name=MULTIATTACH_TYPE, extra_specs={"multiattach": "<is> True"})
        prepared.append(f'volume type {MULTIATTACH_TYPE}: multiattach="<is> True"')
    return MULTIATTACH_TYPE


def discover(conn: Connection) -> dict[str, Any]:
    prepared: list[str] = []
    image = conn.image.find_image(GUEST_IMAGE, ignore_missing=False)
    hard_power_off(conn, image, prepared)
    image_alt = alt_image(conn, image, prepared)
    public = conn.network.find_network(PROVIDER_NETWORK, ignore_missing=False)
    auto_allocation(conn, public, prepared)
    guest_vcpus(conn, prepared)
    hypervisors = list(conn.compute.hypervisors(details=True))
    facts: dict[str, Any] = {
        "prepared": prepared,
        "image": image.id,
        "image_alt": image_alt.id,
        "flavor": conn.compute.find_flavor(FLAVOR, ignore_missing=False).id,
        "flavor_alt": alt_flavor(conn).id,
        "public_network": public.id,
        "hypervisors": len(hypervisors),
        "hypervisor_types": sorted({h.hypervisor_type for h in hypervisors if h.hypervisor_type}),
        "microversions": {"compute": microversions(conn.compute), "placement": microversions(conn.placement)},
        "extensions": {
            "identity": identity_extensions(conn),
            "network": sorted(e.alias for e in conn.network.extensions()),
        },
        "image_stores": sorted(store.id for store in conn.image.stores()),
    }
    services = {s.type for s in conn.identity.services()}
    volume = next((t for t in ("block-storage", "volumev3", "volume") if t in services), None)
    facts["volume_catalog_type"] = volume
    if volume:
        facts["microversions"]["volume"] = microversions(conn.block_storage)
        facts["extensions"]["volume"] = sorted(e.alias for e in conn.block_storage.extensions())
        facts["volume_type_multiattach"] = multiattach_type(conn, prepared)
    return facts


def main() -> None:
    import openstack

    print(json.dumps(discover(openstack.connect())))


if __name__ == "__main__":
    main()
