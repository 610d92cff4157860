"""Ceph RBD for images, volumes, VM disks and backups: the configs as the projects and kolla-ansible
expect them, and each client's keyring only in the pods that use that client (prod uses Ceph)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from components.mechanism.inifile import parse_ini
from tests.conftest import plan_of
from tests.helpers import objects, pod_template
from tests.test_compute import _run_libvirt_start
from tools.plan import Plan

KEYRINGS = {"ceph-client-glance", "ceph-client-cinder", "ceph-client-cinder-backup"}
FSID = "857fbda4-cb80-447c-baab-a23e6e01e146"
CEPH = {"external": {"fsid": FSID, "monitors": ["192.168.200.100"]}}


def files(plan: Plan, secret: str) -> dict[str, str]:
    return plan.by_name(secret, "Secret").revealed["stringData"]


def ini(plan: Plan, secret: str, name: str) -> Any:
    return parse_ini(files(plan, secret)[name])


def keyring_mounts(plan: Plan) -> dict[str, dict[str, set[str]]]:
    """workload → container → the keyring Secrets it mounts (by the volume's Secret), and where."""
    found: dict[str, dict[str, set[str]]] = {}
    for kind in ("Deployment", "DaemonSet", "StatefulSet", "Job", "CronJob"):
        for name, r in objects(plan, kind).items():
            spec = pod_template(r)["spec"]
            secrets = {v["name"]: v["secret"]["secretName"] for v in spec.get("volumes", []) if "secret" in v}
            for container in (*spec.get("initContainers", []), *spec["containers"]):
                mounted = {
                    f"{secrets[m['name']]}:{m['mountPath']}"
                    for m in container.get("volumeMounts", [])
                    if secrets.get(m["name"]) in KEYRINGS
                }
                if mounted:
                    found.setdefault(name, {})[container["name"]] = mounted
    return found


def test_each_keyring_is_mounted_only_into_the_containers_of_its_client() -> None:
    """kolla-ansible's copies: glance-api glance's, cinder-volume cinder's, cinder-backup its own and
    cinder's, nova-compute Nova's (cinder's by default); and libvirt, which defines the secret from it."""
    glance = "ceph-client-glance:/etc/ceph/ceph.client.glance.keyring"
    cinder = "ceph-client-cinder:/etc/ceph/ceph.client.cinder.keyring"
    backup = "ceph-client-cinder-backup:/etc/ceph/ceph.client.cinder-backup.keyring"
    assert keyring_mounts(plan_of("prod")) == {
        "glance-api": {"glance-api": {glance}},
        "cinder-volume": {"cinder-volume": {cinder}},
        "cinder-backup": {"cinder-backup": {backup, cinder}},
        "nova-compute-kvm-general": {"nova-compute": {cinder}},
        "libvirt-kvm-general": {"libvirt": {cinder}},
    }


def test_the_program_never_holds_a_key() -> None:
    """The keyring Secrets are the user's: the plan creates none, and no ConfigMap names a key."""
    plan = plan_of("prod")
    assert not KEYRINGS & set(objects(plan, "Secret"))
    for name, config_map in objects(plan, "ConfigMap").items():
        text = json.dumps(config_map.revealed)
        assert "ceph.conf" not in config_map.revealed.get("data", {}) and "[client." not in text, name
    # ceph.conf names the cluster only, in the services' config Secrets.
    conf = ini(plan, "glance-etc", "ceph.conf")
    assert {k: conf["global"][k] for k in conf["global"]} == {"fsid": "5c3f8a2e-7d41-4b9e-a6c0-2f1e9d8b7a63",
                                    "mon_host": "10.20.0.11,10.20.0.12,10.20.0.13"}  # fmt: skip
    assert files(plan, "cinder-node-etc")["ceph.conf"] == files(plan, "compute-node-etc")["ceph.conf"]


def test_glance_stores_images_in_the_images_pool_and_shows_their_location() -> None:
    plan = plan_of("prod")
    conf = ini(plan, "glance-etc", "glance-api.conf")
    assert conf["DEFAULT"]["enabled_backends"] == "rbd:rbd" and conf["glance_store"]["default_backend"] == "rbd"
    own = {k: v for k, v in conf["rbd"].items() if k not in conf.defaults()}
    assert own == {"rbd_store_pool": "images", "rbd_store_user": "glance", "rbd_store_ceph_conf": "/etc/ceph/ceph.conf"}
    # Nova and Cinder clone an image they find by its direct URL instead of downloading it.
    assert conf["DEFAULT"]["show_image_direct_url"] == "true"
    assert "glance-images" not in objects(plan, "PersistentVolumeClaim")
    # Elsewhere the direct URL would be a file path of the image claim: not shown.
    assert "show_image_direct_url" not in ini(plan_of("staging"), "glance-etc", "glance-api.conf")["DEFAULT"]


def test_cinder_nova_and_libvirt_agree_on_the_secret_of_each_client() -> None:
    plan = plan_of("prod")
    cinder = ini(plan, "cinder-etc", "cinder.conf")
    assert cinder["DEFAULT"]["enabled_backends"] == "rbd" and cinder["DEFAULT"]["default_volume_type"] == "rbd"
    rbd = cinder["rbd"]
    assert (rbd["volume_driver"], rbd["rbd_pool"], rbd["rbd_user"]) == (
        "cinder.volume.drivers.rbd.RBDDriver", "volumes", "cinder")  # fmt: skip
    nova = ini(plan, "compute-node-etc", "nova-kvm-general.conf")["libvirt"]
    assert (nova["images_type"], nova["images_rbd_pool"], nova["rbd_user"]) == ("rbd", "vms", "cinder")
    libvirt = next(c for c in pod_template(plan.by_name("libvirt-kvm-general", "DaemonSet"))["spec"]["containers"])
    secrets = {e["name"]: e.get("value") for e in libvirt["env"]}["LIBVIRT_CEPH_CLIENTS"]
    assert secrets == f"{rbd['rbd_secret_uuid']}=client.cinder=/etc/ceph/ceph.client.cinder.keyring"
    assert nova["rbd_secret_uuid"] == rbd["rbd_secret_uuid"]


def test_cinder_backup_writes_to_the_backups_pool_as_its_own_client() -> None:
    plan = plan_of("prod")
    conf = ini(plan, "cinder-etc", "cinder.conf")["DEFAULT"]
    assert conf["backup_driver"] == "cinder.backup.drivers.ceph.CephBackupDriver"
    assert (conf["backup_ceph_pool"], conf["backup_ceph_user"]) == ("backups", "cinder-backup")
    backup = plan.by_name("cinder-backup", "DaemonSet")
    [container] = pod_template(backup)["spec"]["containers"]
    assert container["args"] == ["cinder-backup", "--config-file", "/etc/cinder/cinder.conf"]
    # Named after its node: its service record survives the pod's restarts.
    env = {e["name"]: e for e in container["env"]}
    assert env["OS_DEFAULT__HOST"]["valueFrom"] == {"fieldRef": {"fieldPath": "spec.nodeName"}}
    assert "cinder-backup" not in objects(plan_of("staging"), "DaemonSet")


def test_a_node_group_keeps_local_disks_beside_one_on_rbd() -> None:
    plan = plan_of(
        "staging",
        ceph=CEPH,
        compute={"nodeGroups": [{"name": "default", "nodeSelector": {"openstack-compute-group": "default"}},
                                          {"name": "rbd", "ephemeralStorage": "rbd",
                                                        "nodeSelector": {"openstack-compute-group": "rbd"}}]},
    )  # fmt: skip
    local = ini(plan, "compute-node-etc", "nova-default.conf")["libvirt"]
    on_rbd = ini(plan, "compute-node-etc", "nova-rbd.conf")["libvirt"]
    assert "images_type" not in local and on_rbd["images_type"] == "rbd"
    # Only the rbd group's pods get a keyring (cinder's, as Nova's client); staging's LVM volumes need none.
    assert set(keyring_mounts(plan)) == {"libvirt-rbd", "nova-compute-rbd"}


def test_one_pod_of_libvirt_and_nova_compute_lists_the_keyring_volume_once() -> None:
    plan = plan_of("dev", ceph=CEPH, compute={"ephemeralStorage": "rbd"})
    spec = pod_template(plan.by_name("compute-node", "DaemonSet"))["spec"]
    names = [v["name"] for v in spec["volumes"]]
    assert names.count("ceph-cinder") == 1 and len(names) == len(set(names))
    assert set(keyring_mounts(plan)["compute-node"]) == {"libvirt", "nova-compute"}


def test_libvirt_start_defines_a_secret_per_client_from_its_keyring(tmp_path: Path) -> None:
    """kolla-ansible's nova-libvirt: /etc/libvirt/secrets/<uuid>.xml and <uuid>.base64, read by libvirtd."""
    key = "AQBvqyBnAAAAABAAcD9V2mJ2kW6v3T9wq8ZrbQ=="
    keyring = tmp_path / "ceph.client.cinder.keyring"
    keyring.write_text(f'[client.cinder]\n\tkey = {key}\n\tcaps mon = "profile rbd"\n')
    uuid = "c8bfdc15-d1f1-5946-add9-aa4a1e8d5de4"
    _run_libvirt_start(tmp_path, {"LIBVIRT_CEPH_CLIENTS": f"{uuid}=client.cinder={keyring}"})
    secrets = tmp_path / "etc/libvirt/secrets"
    assert (secrets / f"{uuid}.base64").read_text() == key
    xml = (secrets / f"{uuid}.xml").read_text()
    assert f"<uuid>{uuid}</uuid>" in xml and "<usage type='ceph'>" in xml and "client.cinder secret" in xml
    assert (secrets / f"{uuid}.base64").stat().st_mode & 0o077 == 0


def test_libvirt_start_refuses_a_keyring_without_a_key(tmp_path: Path) -> None:
    keyring = tmp_path / "keyring"
    keyring.write_text("AQBvqyBnAAAAABAAcD9V2mJ2kW6v3T9wq8ZrbQ==\n")  # the bare key, not the keyring file
    try:
        _run_libvirt_start(tmp_path, {"LIBVIRT_CEPH_CLIENTS": f"{FSID}=client.cinder={keyring}"})
    except Exception as error:  # CalledProcessError: the script stops libvirtd from starting
        assert "holds no 'key = ...' line" in str(getattr(error, "stderr", ""))
    else:
        raise AssertionError("libvirt_start.sh started libvirtd without the secret")


def test_no_network_policy_of_the_program_holds_back_the_ceph_traffic() -> None:
    """The monitors (3300, 6789) and OSDs (6800-7300) are outside the cluster: a policy that restricts
    egress would have to admit them (README, Ceph). The program's policies restrict ingress only."""
    policies = objects(plan_of("prod"), "NetworkPolicy")
    assert policies and all(p.inputs["spec"]["policyTypes"] == ["Ingress"] for p in policies.values())


def test_glances_jobs_read_the_ceph_conf_their_config_names_and_no_key() -> None:
    """glance-api.conf names /etc/ceph/ceph.conf (rbd_store_ceph_conf) wherever it is mounted (tools/imagecheck)."""
    plan = plan_of("prod")
    for kind, name in (("Job", "glance-db-sync"), ("Job", "glance-metadefs-load"), ("CronJob", "glance-db-purge")):
        [container] = pod_template(plan.by_name(name, kind))["spec"]["containers"]
        assert "/etc/ceph/ceph.conf" in [m["mountPath"] for m in container["volumeMounts"]], name
        assert name not in keyring_mounts(plan)


def host_paths(plan: Plan, workload: str) -> set[str]:
    spec = pod_template(objects(plan, "DaemonSet")[workload])["spec"]
    return {v["hostPath"]["path"] for v in spec.get("volumes", []) if "hostPath" in v}


def test_cinder_volume_on_rbd_needs_none_of_the_lvm_and_iscsi_host_paths() -> None:
    """A node without configfs or LVM runs the rbd backend's cinder-volume (the lab's node, without
    configfs, could not start it); staging's LVM backend keeps them."""
    assert host_paths(plan_of("prod"), "cinder-volume") == set()
    assert {"/sys/kernel/config", "/run/lock/lvm", "/dev"} <= host_paths(plan_of("staging"), "cinder-volume")
