"""Which oslo.config namespaces describe which rendered config file, per release.

Taken from the projects' own generator configs in the 2026.1 sdists (those files are
not installed with the wheels), and what 2025.2's differ by (RELEASE_ADDED):
  keystone-29.1.0/config-generator/keystone.conf
  glance-32.0.0/etc/oslo-config-generator/glance-api.conf
  openstack_placement-15.0.0/etc/placement/config-generator.conf
  nova-33.0.2/etc/nova/nova-config-generator.conf
  neutron-28.0.2/etc/oslo-config-generator/{neutron.conf,ml2_conf.ini,...}.ini
  cinder-28.0.0/tools/config/cinder-config-generator.conf
The lists are exactly those files' (keystone's keeps oslo.concurrency commented out,
nova's leaves out oslo.db, both on purpose upstream).
"""

import configparser
from fnmatch import fnmatch
from pathlib import PurePath

from components.settings.releases import DEFAULT_RELEASE


def _ns(names: str) -> tuple[str, ...]:
    return tuple(names.split())


# Spelled out per file, shared libraries included, so that a reader sees exactly
# what the validator is told.
NAMESPACES: dict[str, tuple[str, ...]] = {
    "keystone.conf": _ns("keystone oslo.cache oslo.log oslo.messaging oslo.policy oslo.db oslo.middleware osprofiler"),
    "glance-api.conf": _ns(
        "castellan.config glance.api glance.store os_brick glance.multi_store oslo.concurrency oslo.messaging"
        " oslo.db oslo.policy keystonemiddleware.auth_token oslo.limit oslo.log oslo.middleware.cors"
        " oslo.middleware.healthcheck oslo.middleware.http_proxy_to_wsgi oslo.reports"
    ),
    "placement.conf": _ns(
        "placement.conf keystonemiddleware.auth_token oslo.log oslo.middleware.cors"
        " oslo.middleware.http_proxy_to_wsgi oslo.policy osprofiler"
    ),
    # One list for nova-api, -conductor, -scheduler and -compute: they share nova.conf.
    # No oslo.db, as upstream: nova.conf defines [database] and [api_database] itself.
    "nova.conf": _ns(
        "nova.conf oslo.limit oslo.log oslo.messaging oslo.policy oslo.privsep oslo.service.periodic_task"
        " oslo.service.service oslo.middleware oslo.concurrency oslo.reports oslo.versionedobjects"
        " keystonemiddleware.auth_token osprofiler os_vif os_brick"
    ),
    "neutron.conf": _ns(
        "neutron neutron.agent neutron.db neutron.experimental neutron.extensions nova.auth ironic.auth"
        " placement.auth designate.auth oslo.log oslo.cache oslo.db oslo.policy oslo.privsep oslo.concurrency"
        " oslo.messaging oslo.middleware.cors oslo.middleware.healthcheck oslo.middleware.http_proxy_to_wsgi"
        " oslo.reports oslo.service.periodic_task oslo.service.service oslo.service.wsgi oslo.versionedobjects"
        " keystonemiddleware.auth_token osprofiler"
    ),
    "ml2_conf.ini": _ns("neutron.ml2 neutron.ml2.ovn oslo.log"),
    "openvswitch_agent.ini": _ns("neutron.ml2.ovs.agent oslo.log"),
    "l3_agent.ini": _ns("neutron.az.agent neutron.base.agent neutron.l3.agent oslo.log"),
    "dhcp_agent.ini": _ns("neutron.az.agent neutron.base.agent neutron.dhcp.agent oslo.log"),
    "metadata_agent.ini": _ns("neutron.metadata.agent oslo.log oslo.cache"),
    "cinder.conf": _ns(
        "castellan.config cinder keystonemiddleware.auth_token osprofiler oslo.config oslo.concurrency oslo.db"
        " oslo.log oslo.messaging oslo.middleware oslo.policy oslo.privsep oslo.reports"
        " oslo.service.periodic_task oslo.service.service oslo.service.sslutils oslo.service.wsgi"
        " oslo.versionedobjects os_brick"
    ),
}

# What a release's generator configs list beyond the table above (2026.1's), per file. The
# generator configs of stable/2025.2 (keystone, glance, placement, nova, neutron, cinder) are
# 2026.1's but for neutron.conf's oslo.service.sslutils, which neutron 28 dropped with its own
# TLS listener.
RELEASE_ADDED: dict[str, dict[str, tuple[str, ...]]] = {"2025.2": {"neutron.conf": ("oslo.service.sslutils",)}}

# Namespaces listed above that cannot be loaded from the 2026.1 venv, and why.
# tests/real/test_machinery.py asserts this table is exact.
UNLOADABLE: dict[str, str] = {}


# glance: the staging and tasks areas are filesystem stores named in its code
# (glance/common/wsgi.py RESERVED_STORES), registered at runtime.
GLANCE_RESERVED_STORES = {"os_glance_staging_store": "file", "os_glance_tasks_store": "file"}
# The group of glance.multi_store's sample that holds each store type's options: file and cinder
# have their own name, the others their driver's (glance_store/backend.py, _list_driver_opts).
GLANCE_STORE_GROUPS = {
    "rbd": "glance.store.rbd.Store",
    "http": "glance.store.http.Store",
    "s3": "glance.store.s3.Store",
    "swift": "glance.store.swift.Store",
    "vmware": "glance.store.vmware_datastore.Store",
}


def dynamic_sections(path: str | PurePath, text: str) -> dict[str, str]:
    """Sections a file names itself, mapped to the sample group holding their options.

    The generator cannot list them, so oslo-config-validator would call every option
    in them unknown: cinder's backends (`enabled_backends = lvm` -> [lvm], options of
    [backend_defaults]) and glance's stores (`enabled_backends = fast:rbd` -> [fast],
    options of the rbd driver's group, glance.store.rbd.Store).
    """
    parser = configparser.ConfigParser(strict=False, interpolation=None)
    parser.read_string(text)
    enabled = [b.strip() for b in parser.defaults().get("enabled_backends", "").split(",") if b.strip()]
    name = PurePath(path).name
    if name == "cinder.conf":
        return dict.fromkeys(enabled, "backend_defaults")
    if name == "glance-api.conf":
        stores = dict(b.split(":", 1) for b in enabled if ":" in b)
        groups = {store: GLANCE_STORE_GROUPS.get(kind.strip(), kind.strip()) for store, kind in stores.items()}
        return {**GLANCE_RESERVED_STORES, **groups}
    return {}


# Rendered files named after a variable part (a compute profile) that are read as
# an extra --config-file of a service above: pattern -> the table entry.
PATTERNS: dict[str, str] = {"nova-*.conf": "nova.conf", "neutron-agent.conf": "neutron.conf"}

# Rendered files that are not oslo.config files at all, and what reads them.
NOT_OSLO: dict[str, str] = {
    "*-uwsgi.ini": "uWSGI's own ini, read by uwsgi",
    "libvirtd*.conf": "libvirtd's configuration",
    "libvirt-sasl.conf": "Cyrus SASL's configuration of libvirtd",
    "libvirt-auth.conf": "libvirt clients' credentials file",
    "qemu*.conf": "libvirt's QEMU driver configuration",
    "local_settings.py": "Horizon's Django settings, Python code",
    "ceph.conf": "Ceph's client configuration, read by librados (its fsid and mon_host: tests/test_ceph.py)",
}


def not_oslo_reason(path: str | PurePath) -> str | None:
    """Why a rendered file is not validated with oslo.config, or None if it is."""
    name = PurePath(path).name
    return next((why for pattern, why in NOT_OSLO.items() if fnmatch(name, pattern)), None)


def namespaces_for(path: str | PurePath, release: str = DEFAULT_RELEASE) -> tuple[str, ...]:
    """The namespaces of a rendered oslo.config file of the release, by its base name."""
    name = PurePath(path).name
    entry = name if name in NAMESPACES else next((e for p, e in PATTERNS.items() if fnmatch(name, p)), None)
    if entry is None:
        raise KeyError(f"no oslo.config namespaces recorded for {name!r}: add it to tests/lab/realenv/namespaces.py")
    return NAMESPACES[entry] + RELEASE_ADDED.get(release, {}).get(entry, ())
