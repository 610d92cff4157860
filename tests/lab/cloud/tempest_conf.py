"""tempest.conf for a stack's running cloud: from its plan, what the cloud reports, and the lab's limits.

Options are Tempest 47's (tempest/config.py). Three sources, kept apart:
- the plan: endpoints (the catalog's internal interface, as the admin's OS_* variables name it),
  region, credentials, which services are deployed, and features as the rendered configs set them;
- the cloud (tests/lab/cloud/tempest_discover.py): the scenario's guest image, flavors and provider
  network, microversion ranges, API extensions, Glance's stores, the number of hypervisors;
- this machine: what it cannot run (tests/lab/cloud/run.py `cannot_run`) and the lab's guest.
Every feature turned off is returned with its reason, so a skip it causes is explained.
"""

from __future__ import annotations

import configparser
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from components.mechanism.inifile import parse_ini, render_ini
from components.services.cinder import volume_pods
from components.settings.model import Settings
from tools.plan import Plan

# The API tests of each deployed service (tempest/api/<dir>); Placement has none in Tempest.
API_TESTS = {"keystone": "identity", "glance": "image", "neutron": "network", "nova": "compute", "cinder": "volume"}
# What Nova's libvirt driver reports as hypervisor_type (QEMU, or KVM with older libvirts).
LIBVIRT_HYPERVISORS = {"QEMU", "KVM"}
# Tempest's own tag for the smoke set, in the test ids' attributes: `test_x[id-...,smoke]`.
SMOKE = r"\[[^\]]*\bsmoke\b"
NO_SSH_GUEST = (
    "the lab's guest (tests/lab/cloud/guest.py: Debian's kernel and a busybox initramfs) runs no SSH server, "
    "so Tempest cannot log in to its servers"
)


@dataclass(frozen=True)
class TempestConf:
    text: str
    features_off: dict[str, str] = field(default_factory=dict)  # "section.option" → why


def selection(plan: Plan, smoke: bool) -> str:
    """The stestr regex of the API tests of every service the plan deploys (and only the smoke ones)."""
    services = plan.settings.services
    dirs = [d for s, d in API_TESTS.items() if s == "keystone" or services.on(s)]
    return rf"^tempest\.api\.({'|'.join(dirs)})\." + (f".*{SMOKE}" if smoke else "")


def narrowed(regex: str, only: str | None) -> str:
    """The selection's tests whose id also matches `only` (a rerun of some of them), as one stestr regex."""
    if not only:
        return regex
    return rf"^(?=.*(?:{only}))(?:{regex})"


def volume_backend_runs(cannot_run: Mapping[str, str], settings: Settings) -> str:
    """'' when the default volume type's cinder-volume (the first backend's) runs here, else why not
    (the lab's own words). Tempest makes its volumes of that type; another backend's pod that
    cannot run turns off multi_backend only (_volume)."""
    return cannot_run.get(volume_pods(settings)[0][1].name, "")


def _rendered(plan: Plan, service: str, name: str) -> configparser.ConfigParser:
    try:
        files = plan.by_name(f"{service}-etc", "Secret").revealed["stringData"]
    except KeyError:
        return parse_ini("")
    return parse_ini(files.get(name, ""))


def _flag(conf: configparser.ConfigParser, section: str, option: str, default: bool) -> bool:
    return conf.getboolean(section, option, fallback=default)


def _off(off: dict[str, str], key: str, on: bool, why: str) -> bool:
    """A feature's value; when it is off, why goes into `off`."""
    if not on:
        off[key] = why
    return on


def tempest_conf(
    plan: Plan,
    admin: Mapping[str, str],
    facts: Mapping[str, Any],
    cannot_run: Mapping[str, str],
    workspace: Path,
) -> TempestConf:
    settings = plan.settings
    on = settings.services.on
    off: dict[str, str] = {}
    keystone = _rendered(plan, "keystone", "keystone.conf")
    nova = _rendered(plan, "nova", "nova.conf")
    cinder = _rendered(plan, "cinder", "cinder.conf")
    micro = facts.get("microversions", {})
    extensions = facts.get("extensions", {})
    internal = admin.get("OS_INTERFACE", "internal")
    region = admin["OS_REGION_NAME"]

    def service(catalog_type: str | None = None, versions: str | None = None) -> dict[str, Any]:
        found = micro.get(versions or "", {})
        return {
            "catalog_type": catalog_type,
            "endpoint_type": internal,
            "region": region,
            "min_microversion": found.get("min"),
            "max_microversion": found.get("max"),
        }

    conf: dict[str, dict[str, Any]] = {
        "DEFAULT": {"log_dir": str(workspace / "logs"), "log_file": "tempest.log", "use_stderr": False},
        "oslo_concurrency": {"lock_path": str(workspace / "locks")},
        "auth": {
            # Tempest makes a project, users and (with Neutron) a network and router per test class.
            "use_dynamic_credentials": True,
            "admin_username": admin["OS_USERNAME"],
            "admin_password": admin["OS_PASSWORD"],
            "admin_project_name": admin["OS_PROJECT_NAME"],
            "admin_domain_name": admin.get("OS_USER_DOMAIN_NAME", "Default"),
            "admin_user_domain_name": admin.get("OS_USER_DOMAIN_NAME", "Default"),
            "admin_project_domain_name": admin.get("OS_PROJECT_DOMAIN_NAME", "Default"),
            "create_isolated_networks": on("neutron"),
        },
        "identity": {
            "uri_v3": admin["OS_AUTH_URL"],
            "v3_endpoint_type": internal,
            "region": region,
            **_trust(admin),
        },
        "identity-feature-enabled": {
            "api_extensions": extensions.get("identity", []),
            "trust": _off(
                off,
                "identity-feature-enabled.trust",
                _flag(keystone, "trust", "enabled", True),
                "keystone.conf [trust] enabled is false",
            ),
            "security_compliance": _off(
                off,
                "identity-feature-enabled.security_compliance",
                keystone.has_option("security_compliance", "lockout_failure_attempts"),
                "keystone.conf sets no [security_compliance] lockout_failure_attempts",
            ),
        },
        "service_available": {
            "glance": on("glance"),
            "nova": on("nova"),
            "neutron": on("neutron"),
            "cinder": on("cinder"),
            "horizon": on("horizon"),
            "swift": False,  # no stack deploys Swift
        },
        "image": service(),
        "network": {
            **{k: v for k, v in service().items() if "microversion" not in k},
            "public_network_id": facts.get("public_network"),
            "floating_network_name": "public" if facts.get("public_network") else None,
        },
        "placement": {k: v for k, v in service(versions="placement").items() if k != "catalog_type"},
        "validation": {"run_validation": False},
    }
    off["validation.run_validation"] = NO_SSH_GUEST
    if on("neutron"):
        network = extensions.get("network", [])
        conf["network-feature-enabled"] = {
            "api_extensions": network,
            "port_security": "port-security" in network,
            "ipv6_subnet_attributes": True,
        }
    if on("nova"):
        conf["compute"], conf["compute-feature-enabled"] = _compute(
            settings, facts, nova, service(versions="compute"), off, volumes_run=_volumes_run(plan, cannot_run)
        )
    if on("cinder"):
        conf["volume"], conf["volume-feature-enabled"] = _volume(plan, facts, cinder, cannot_run, service, off)
    if on("nova"):
        multiattach = _multiattach(facts, cinder, on("cinder") and _volumes_run(plan, cannot_run), off)
        conf["compute-feature-enabled"]["volume_multiattach"] = multiattach
        if multiattach:  # the tests create their volumes of this type (tempest/api/compute/volumes)
            conf["volume"]["volume_type_multiattach"] = facts["volume_type_multiattach"]
    return TempestConf(render_ini(conf), off)


def _trust(admin: Mapping[str, str]) -> dict[str, Any]:
    """The CA the internal endpoints are verified with, as the admin's OS_CACERT names it (the
    internal CA under tls.internal): Tempest hands `[identity] ca_certificates_file` to its auth
    and every service client (tempest/config.py service_client_config `ca_certs`); verification
    stays on."""
    if not admin.get("OS_CACERT"):
        return {}
    return {"ca_certificates_file": admin["OS_CACERT"], "disable_ssl_certificate_validation": False}


RBD_DRIVER = "cinder.volume.drivers.rbd.RBDDriver"
LVM_DRIVER = "cinder.volume.drivers.lvm.LVMVolumeDriver"
# The drivers that report multiattach in their pool stats (cinder/volume/drivers/rbd.py, lvm.py);
# the NFS driver does not.
MULTIATTACH_DRIVERS = {RBD_DRIVER, LVM_DRIVER}


def _multiattach(
    facts: Mapping[str, Any], cinder: configparser.ConfigParser, volumes_run: bool, off: dict[str, str]
) -> bool:
    """A volume attached to two servers: where the default volume type's backend reports multiattach
    (cinder's RBD and LVM drivers) and the hypervisors are libvirt's (nova's libvirt driver:
    supports_multiattach)."""
    backends = [b.strip() for b in cinder.get("DEFAULT", "enabled_backends", fallback="").split(",") if b.strip()]
    driver = cinder.get(backends[0], "volume_driver", fallback="") if backends else ""
    types = set(facts.get("hypervisor_types") or [])
    if not volumes_run:
        why = "no volume backend runs here"
    elif not facts.get("volume_type_multiattach"):
        why = "no multiattach volume type was made (tests/lab/cloud/tempest_discover.py)"
    elif driver not in MULTIATTACH_DRIVERS:
        why = f"the default volume type's driver ({driver or 'none'}) reports no multiattach"
    elif not types & LIBVIRT_HYPERVISORS:
        why = f"hypervisors {sorted(types)} are not libvirt's"
    else:
        return True
    off["compute-feature-enabled.volume_multiattach"] = why
    return False


# The drivers whose volumes and snapshots an administrator can manage and unmanage (manage_existing,
# manage_existing_snapshot in cinder/volume/drivers/rbd.py and lvm.py; the NFS driver has neither), and
# the name Tempest finds an unmanaged snapshot by on each: the RBD driver's snapshot of the volume's image
# is `snapshot-<id>` (cinder's snapshot_name_template), LVM's logical volume `_snapshot-<id>` (lvm.py
# _escape_snapshot; Tempest's default).
UNMANAGED_SNAPSHOT = {RBD_DRIVER: "snapshot-%s", LVM_DRIVER: "_snapshot-%s"}
# Extending an attached volume: Cinder's volume API 3.42 and Nova's external event, compute API 2.51
# (Tempest's [volume-feature-enabled] extend_attached_volume help).
EXTEND_ATTACHED = {"volume": (3, 42), "compute": (2, 51)}


def _announces(found: Mapping[str, Any], api: str, wanted: tuple[int, int]) -> bool:
    top = (found.get(api) or {}).get("max")
    return bool(top) and tuple(int(part) for part in str(top).split(".")) >= wanted


def _volume_management(
    drivers: set[str], facts: Mapping[str, Any], nova: bool, off: dict[str, str]
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The optional Cinder features Tempest leaves off unless told (manage_volume, manage_snapshot,
    extend_attached_volume), on where every backend's driver has them and the APIs announce them;
    and the snapshot ref the manage tests use."""
    names = {UNMANAGED_SNAPSHOT.get(driver) for driver in drivers}
    manageable = bool(drivers) and None not in names
    found = facts.get("microversions", {})
    features = {
        "manage_volume": manageable,
        "manage_snapshot": manageable and len(names) == 1,  # one ref has to fit every backend's snapshots
        "extend_attached_volume": nova and all(_announces(found, api, v) for api, v in EXTEND_ATTACHED.items()),
    }
    listed = ", ".join(sorted(drivers)) or "none"
    if not manageable:
        off["volume-feature-enabled.manage_volume"] = off["volume-feature-enabled.manage_snapshot"] = (
            f"the backends' drivers ({listed}) cannot manage existing volumes"
        )
    elif not features["manage_snapshot"]:
        off["volume-feature-enabled.manage_snapshot"] = f"the backends' drivers ({listed}) name snapshots apart"
    if not features["extend_attached_volume"]:
        off["volume-feature-enabled.extend_attached_volume"] = (
            "needs Nova, volume API 3.42 and compute API 2.51; announced: "
            f"volume {(found.get('volume') or {}).get('max')}, compute {(found.get('compute') or {}).get('max')}"
        )
    refs = {"manage_snapshot_ref": ["source-name", *names]} if features["manage_snapshot"] else {}
    return features, refs


def _volumes_run(plan: Plan, cannot_run: Mapping[str, str]) -> bool:
    return plan.settings.services.on("cinder") and not volume_backend_runs(cannot_run, plan.settings)


def _compute(
    settings: Settings,
    facts: Mapping[str, Any],
    nova: configparser.ConfigParser,
    endpoint: dict[str, Any],
    off: dict[str, str],
    volumes_run: bool,
) -> tuple[dict[str, Any], dict[str, Any]]:
    hosts = int(facts.get("hypervisors", 0))
    types = facts.get("hypervisor_types") or [None]
    compute = {
        **endpoint,
        "image_ref": facts.get("image"),
        "image_ref_alt": facts.get("image_alt") or facts.get("image"),
        "flavor_ref": facts.get("flavor"),
        "flavor_ref_alt": facts.get("flavor_alt"),
        # Migration tests skip themselves below two ("Less than 2 compute nodes").
        "min_compute_nodes": hosts,
        "hypervisor_type": types[0],
    }
    # Cold migration and resize copy the disk between compute nodes over SSH as the nova user, which
    # the program does not deploy (README, "Cold migration and resize"); a resize to the same host
    # copies nothing, so nova.conf's allow_resize_to_same_host turns resize back on.
    no_ssh = "the program deploys no SSH between compute nodes, which cold migration and resize copy disks over"
    same_host = _flag(nova, "DEFAULT", "allow_resize_to_same_host", False)
    features: dict[str, Any] = {
        "resize": _off(off, "compute-feature-enabled.resize", same_host, f"{no_ssh} (allow_resize_to_same_host off)"),
        "cold_migration": _off(off, "compute-feature-enabled.cold_migration", False, no_ssh),
        "live_migration": _off(off, "compute-feature-enabled.live_migration", hosts > 1, f"{hosts} compute host"),
        # libvirt's rescue that keeps the server's disks where they are and adds the rescue disk on
        # the bus the image asks for (hw_rescue_bus, hw_rescue_device); nova's x86 machine type `pc`
        # keeps IDE for the cdrom case. Tempest's default is off, for drivers without it.
        "stable_rescue": _off(
            off,
            "compute-feature-enabled.stable_rescue",
            bool(set(types) & LIBVIRT_HYPERVISORS),
            f"hypervisors {types} are not libvirt's",
        ),
    }
    # Local disks move with the guest (a block migration); disks in RBD are shared, and nova-compute
    # refuses a block migration of them ("Block migration can not be used with shared storage").
    # Where they live is the node groups' nova.conf, not the API's (the one read above): the
    # settings say it for every group, and Tempest may pick any two hosts.
    local = {settings.compute.ephemeral_of(group) == "local" for group in settings.compute.node_groups}
    features["block_migration_for_live_migration"] = _off(
        off,
        "compute-feature-enabled.block_migration_for_live_migration",
        local == {True},
        "the VM disks of some node groups are in Ceph (ephemeralStorage rbd): shared, never block-migrated",
    )
    # A server on a volume migrates with its volume attached on both hosts: where volumes run.
    features["volume_backed_live_migration"] = _off(
        off,
        "compute-feature-enabled.volume_backed_live_migration",
        features["live_migration"] and volumes_run,
        "no live migration here" if not features["live_migration"] else "no volume backend runs here",
    )
    # The console URL Nova hands out is novncproxy_base_url's public host, served by the gateway:
    # Tempest runs inside the cluster, where that name does not resolve and the console proxy's
    # NetworkPolicy admits the gateway's proxies only. The lab opens it from outside instead
    # (tests/lab/cloud/public_scenario.py: report.json's tls.checks.console).
    vnc = _flag(nova, "vnc", "enabled", True)
    features["vnc_console"] = False
    off["compute-feature-enabled.vnc_console"] = (
        f"the console's public URL ({nova.get('vnc', 'novncproxy_base_url', fallback='unset')}) is the gateway's, "
        "outside the cluster Tempest runs in; the lab opens it from outside (report.json tls.checks.console)"
        if vnc
        else "nova.conf [vnc] enabled is false"
    )
    for option, section in (("serial_console", "serial_console"), ("spice_console", "spice")):
        features[option] = _off(
            off,
            f"compute-feature-enabled.{option}",
            _flag(nova, section, "enabled", False),
            f"nova.conf [{section}] enabled is false",
        )
    return compute, features


def _volume(
    plan: Plan,
    facts: Mapping[str, Any],
    cinder: configparser.ConfigParser,
    cannot_run: Mapping[str, str],
    service: Any,
    off: dict[str, str],
) -> tuple[dict[str, Any], dict[str, Any]]:
    backends = [b.strip() for b in cinder.get("DEFAULT", "enabled_backends", fallback="").split(",") if b.strip()]
    first = backends[0] if backends else ""
    names = [cinder.get(b, "volume_backend_name", fallback=b) for b in backends]
    # Tempest's spelling of the protocol the backend's driver reports (iSCSI for LVM's target).
    protocol = {"iscsi": "iSCSI"}.get(cinder.get(first, "target_protocol", fallback=""), first) if first else None
    if cinder.get(first, "volume_driver", fallback="") == RBD_DRIVER:
        protocol = "ceph"  # what cinder's RBD driver reports (STORAGE_PROTOCOL, constants.CEPH)
    volume = {
        **service(facts.get("volume_catalog_type"), "volume"),
        "backend_names": names,
        "volume_type": cinder.get("DEFAULT", "default_volume_type", fallback=None),
        "storage_protocol": protocol,
    }
    deployed = {r.k8s_name for r in plan.custom if r.kind in ("Deployment", "DaemonSet", "StatefulSet")}
    features: dict[str, Any] = {
        "api_extensions": facts.get("extensions", {}).get("volume", []),
        "multi_backend": len(backends) > 1,
        "backup": "cinder-backup" in deployed,
    }
    if not features["backup"]:
        off["volume-feature-enabled.backup"] = "the stack deploys no cinder-backup"
    if len(backends) < 2:
        off["volume-feature-enabled.multi_backend"] = f"cinder.conf enables one backend ({', '.join(backends)})"
    stopped = {pod.name: cannot_run[pod.name] for _, pod in volume_pods(plan.settings) if pod.name in cannot_run}
    if len(backends) > 1 and stopped:
        features["multi_backend"] = False
        why_not = "; ".join(f"{name}: {why}" for name, why in stopped.items())
        off["volume-feature-enabled.multi_backend"] = f"a backend's cinder-volume does not run here ({why_not})"
    drivers = {cinder.get(b, "volume_driver", fallback="") for b in backends}
    management, refs = _volume_management(drivers, facts, plan.settings.services.on("nova"), off)
    features |= management
    volume |= refs
    why = volume_backend_runs(cannot_run, plan.settings)
    if why:
        # The tests that need a backend are left out of the run (tests/lab/cloud/tempest_limits.py), and counted
        # as skipped with this reason; those that only talk to cinder-api and the scheduler run.
        off["(tests needing a volume backend)"] = f"cinder-volume does not run here: {why}"
    return volume, features
