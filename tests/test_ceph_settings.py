"""`ceph` and the rbd backends: bad combinations are settings errors naming the key."""

from __future__ import annotations

import json
from typing import Any

import pytest

from components.cloud.stack_config import parse_settings, settings_from_config
from components.settings.ceph import Ceph
from tests.helpers import settings_problems

FSID = "857fbda4-cb80-447c-baab-a23e6e01e146"
CEPH = {"external": {"fsid": FSID, "monitors": ["192.168.200.100"]}}


def one_problem(raw: dict[str, Any], key: str, fragment: str) -> None:
    found = [p for p in settings_problems(raw) if p.startswith(f"{key}: ")]
    assert found and fragment in found[0], settings_problems(raw)


@pytest.mark.parametrize(
    ("raw", "key", "fragment"),
    [
        ({"glance": {"backend": "rbd"}}, "openstack:glance.backend", "set ceph.external"),
        ({"cinder": {"backend": "rbd"}}, "openstack:cinder.backends", "set ceph.external"),
        ({"cinder": {"backend": "rbd", "backup": "ceph"}}, "openstack:cinder.backup", "set ceph.external"),
        ({"compute": {"ephemeralStorage": "rbd"}}, "openstack:compute.ephemeralStorage", "set ceph.external"),
        (
            {
                "compute": {
                    "nodeGroups": [{"name": "a"}, {"name": "b", "ephemeralStorage": "rbd", "nodeSelector": {"g": "b"}}]
                }
            },
            "openstack:compute.nodeGroups.1.ephemeralStorage",
            "set ceph.external",
        ),
        # Backups of volumes that are not RBD images would need them attached to the backup pod.
        ({"ceph": CEPH, "cinder": {"backend": "lvm", "backup": "ceph"}}, "openstack:cinder.backup", "rbd volumes"),
        ({"ceph": {**CEPH, "rook": {"cluster": {"name": "ceph"}}}}, "openstack:ceph", "not both"),
        ({"ceph": {"rook": {}}}, "openstack:ceph.rook", "declares no CephCluster"),
        ({"ceph": {"rook": {"cephClusterName": "ceph"}}}, "openstack:ceph.rook.cephClusterName", ""),
        ({"ceph": {"pools": {"images": "glance-images"}}}, "openstack:ceph", "needs external"),
        ({"ceph": {"external": {"fsid": FSID, "monitors": []}}}, "openstack:ceph.external.monitors", "at least 1"),
        (
            {"ceph": {"external": {"fsid": FSID, "monitors": ["10.0.0.1:6789/0"]}}},
            "openstack:ceph.external.monitors.0",
            "mon_host",
        ),
        (
            {"ceph": {"external": {"fsid": "not-a-uuid", "monitors": ["10.0.0.1"]}}},
            "openstack:ceph.external.fsid",
            "UUID",
        ),
        ({"ceph": {**CEPH, "pools": {"vms": "vms pool"}}}, "openstack:ceph.pools.vms", "Ceph pool or client name"),
        (
            {"ceph": {**CEPH, "clients": {"glance": {"keyringSecret": "Glance_Key"}}}},
            "openstack:ceph.clients.glance.keyringSecret",
            "Kubernetes object name",
        ),
        (
            {"ceph": {**CEPH, "clients": {"glance": {"libvirtSecretUuid": FSID}}}},
            "openstack:ceph.clients",
            "libvirtSecretUuid is for the clients whose key libvirt uses",
        ),
        # Each use a pool of its own: a client's caps are per pool.
        ({"ceph": {**CEPH, "pools": {"images": "volumes"}}}, "openstack:ceph.pools", "images and volumes"),
        # libvirt holds one key per secret.
        (
            {
                "ceph": {
                    **CEPH,
                    "clients": {
                        "cinder": {"libvirtSecretUuid": FSID},
                        "nova": {"user": "nova", "keyringSecret": "ceph-client-nova", "libvirtSecretUuid": FSID},
                    },
                }
            },
            "openstack:ceph.clients",
            "one libvirtSecretUuid",
        ),
        (
            {"ceph": {**CEPH, "clients": {"glance": {"user": "client.glance"}}}},
            "openstack:ceph.clients.glance.user",
            "without its type: 'glance'",
        ),
        (
            {"ceph": {"external": {"fsid": FSID, "monitors": ["10.0.0.1:67890"]}}},
            "openstack:ceph.external.monitors.0",
            "1 to 65535",
        ),
        (
            {"ceph": {"external": {"fsid": FSID, "monitors": ["[v2:10.0.0.1:99999,v1:10.0.0.1:6789]"]}}},
            "openstack:ceph.external.monitors.0",
            "1 to 65535",
        ),
        # The host's libvirt: the operator defines the secret there, so its UUID must be known.
        (
            {"ceph": CEPH, "cinder": {"backend": "rbd"}, "hypervisorIsolation": "baremetal-hypervisor"},
            "openstack:ceph.clients.cinder.libvirtSecretUuid",
            "runs libvirt on the host",
        ),
    ],
)
def test_bad_ceph_settings_name_their_key(raw: dict[str, Any], key: str, fragment: str) -> None:
    one_problem(raw, key, fragment)


def test_the_hosts_libvirt_takes_the_uuid_given() -> None:
    uuid = "457eb676-33da-42ec-9a8c-9293d545c337"
    settings = parse_settings(
        {
            "ceph": {**CEPH, "clients": {"cinder": {"libvirtSecretUuid": uuid}}},
            "cinder": {"backend": "rbd"},
            "hypervisorIsolation": "baremetal-hypervisor",
        }
    )
    assert settings.ceph is not None and settings.ceph.libvirt_secret_uuid(settings.ceph.clients.cinder) == uuid


def test_defaults_are_kolla_ansibles_and_a_client_given_in_part_keeps_the_rest() -> None:
    ceph = parse_settings({"ceph": {**CEPH, "clients": {"glance": {"user": "images-rw"}}}}).ceph
    assert ceph is not None
    assert ceph.pools.model_dump() == {"images": "images", "volumes": "volumes", "vms": "vms", "backups": "backups"}
    assert (ceph.clients.glance.user, ceph.clients.glance.keyring_secret) == ("images-rw", "ceph-client-glance")
    assert (ceph.clients.cinder.user, ceph.clients.cinder_backup.user) == ("cinder", "cinder-backup")
    # kolla-ansible's ceph_nova_user is ceph_cinder_user.
    assert ceph.clients.nova is None and ceph.clients.nova_client == ceph.clients.cinder


def test_libvirt_secret_uuids_are_stable_and_one_per_client() -> None:
    ceph = Ceph.model_validate({**CEPH, "clients": {"nova": {"user": "nova", "keyringSecret": "ceph-client-nova"}}})
    again = Ceph.model_validate(CEPH)
    cinder, nova = ceph.clients.cinder, ceph.clients.nova_client
    assert ceph.libvirt_secret_uuid(cinder) == again.libvirt_secret_uuid(again.clients.cinder)
    assert ceph.libvirt_secret_uuid(cinder) != ceph.libvirt_secret_uuid(nova)
    other = Ceph.model_validate({**CEPH, "external": {**CEPH["external"], "fsid": "1" + FSID[1:]}})
    assert other.libvirt_secret_uuid(other.clients.cinder) != ceph.libvirt_secret_uuid(cinder)


@pytest.mark.parametrize(
    "monitor",
    ["10.0.0.1", "10.0.0.1:6789", "mon-a.ceph.example.com", "[fd00::1]:3300", "[v2:10.0.0.1:3300,v1:10.0.0.1:6789]"],
)
def test_monitor_addresses_as_mon_host_takes_them(monitor: str) -> None:
    ceph = parse_settings({"ceph": {"external": {"fsid": FSID, "monitors": [monitor]}}}).ceph
    assert ceph is not None and ceph.external is not None and ceph.external.monitors == (monitor,)


def test_the_stack_file_gives_ceph_as_json_like_every_structured_setting() -> None:
    """The engine hands an object as JSON text; `ceph` is optional (Ceph | None) and still decoded."""
    config = {"openstack:ceph": json.dumps(CEPH)}
    settings = settings_from_config(config)
    assert settings.ceph is not None and settings.ceph.fsid == FSID and settings.ceph.external is not None
    assert settings.ceph.external.monitors == ("192.168.200.100",)


def test_a_stack_without_ceph_needs_none() -> None:
    settings = parse_settings({})
    assert settings.ceph is None and settings.ceph_users() == {}
