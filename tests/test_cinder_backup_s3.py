"""`cinder.backup: s3`: cinder's S3 backup driver in cinder.conf, its keys only in the cinder-backup
container's environment from the user's Secret, and the settings it refuses."""

from __future__ import annotations

import json
from typing import Any

import pytest

from components.mechanism.inifile import parse_ini
from tests.conftest import plan_of
from tests.helpers import containers, objects, pod_template, settings_problems
from tools.plan import Plan

CEPH = {"external": {"fsid": "5c3f8a2e-7d41-4b9e-a6c0-2f1e9d8b7a63", "monitors": ["10.0.0.1"]}}
BUCKET = {"bucket": "volume-backups", "endpoint": "minio.storage.svc:9000", "credentials": "cinder-backup-s3"}
# cinder/backup/drivers/s3.py registers its options in [DEFAULT]; oslo.config's environment source
# names each OS_<GROUP>__<OPTION> (oslo_config/sources/_environment.py).
KEY_ENV = {
    "OS_DEFAULT__BACKUP_S3_STORE_ACCESS_KEY": "access-key-id",
    "OS_DEFAULT__BACKUP_S3_STORE_SECRET_KEY": "secret-access-key",
}
WORKLOAD_KINDS = ("Deployment", "DaemonSet", "StatefulSet", "Job", "CronJob", "Pod")


def s3_plan(**bucket: Any) -> Plan:
    return plan_of("prod", cinder={"backends": ["rbd"], "backup": "s3", "backupS3": {**BUCKET, **bucket}})


def cinder_conf(plan: Plan, secret: str = "cinder-node-etc") -> Any:
    return parse_ini(plan.by_name(secret, "Secret").revealed["stringData"]["cinder.conf"])


def backup_container(plan: Plan) -> dict[str, Any]:
    [container] = pod_template(objects(plan, "DaemonSet")["cinder-backup"])["spec"]["containers"]
    return container


def test_cinder_conf_names_the_s3_driver_endpoint_and_bucket() -> None:
    plan = s3_plan()
    for secret in ("cinder-etc", "cinder-node-etc"):  # the API's copy and the one cinder-backup mounts
        conf = cinder_conf(plan, secret)["DEFAULT"]
        assert conf["backup_driver"] == "cinder.backup.drivers.s3.S3BackupDriver"
        assert conf["backup_s3_endpoint_url"] == "https://minio.storage.svc:9000"
        assert conf["backup_s3_store_bucket"] == "volume-backups"
        assert "backup_s3_ca_cert_file" not in conf  # no caSecret: botocore's own CAs
        assert not any(option.startswith("backup_ceph") for option in conf)
    assert cinder_conf(s3_plan(tls=False))["DEFAULT"]["backup_s3_endpoint_url"] == "http://minio.storage.svc:9000"


def test_the_keys_reach_cinder_backup_only_from_the_users_secret() -> None:
    plan = s3_plan()
    env = {e["name"]: e for e in backup_container(plan)["env"]}
    for name, key in KEY_ENV.items():
        assert env[name] == {"name": name, "valueFrom": {"secretKeyRef": {"name": "cinder-backup-s3", "key": key}}}
    # No other container gets them, and no rendered file or other object names the key options.
    elsewhere = [
        (kind, name, c["name"])
        for kind in WORKLOAD_KINDS
        for name, r in objects(plan, kind).items()
        for c in containers(r)
        if name != "cinder-backup" and KEY_ENV.keys() & {e["name"] for e in c.get("env", [])}
    ]
    assert elsewhere == []
    for r in plan.custom:
        if r.kind in ("Secret", "ConfigMap"):
            text = json.dumps(r.revealed)
            assert "backup_s3_store_access_key" not in text and "backup_s3_store_secret_key" not in text, r.urn
    assert "AWS_DEFAULT_REGION" not in env  # no region: boto3's default


def test_the_region_is_boto3s_and_the_ca_is_mounted_where_the_option_names_it() -> None:
    plan = s3_plan(region="eu-west-1", caSecret="minio-ca")
    container = backup_container(plan)
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert env["AWS_DEFAULT_REGION"] == "eu-west-1"
    ca_file = cinder_conf(plan)["DEFAULT"]["backup_s3_ca_cert_file"]
    # The Secret's directory, not a subPath: a renewed CA reaches the file.
    [mount] = [m for m in container["volumeMounts"] if ca_file.startswith(m["mountPath"] + "/")]
    assert "subPath" not in mount
    volumes = {v["name"]: v for v in pod_template(objects(plan, "DaemonSet")["cinder-backup"])["spec"]["volumes"]}
    assert volumes[mount["name"]]["secret"]["secretName"] == "minio-ca"
    relative = ca_file.removeprefix(mount["mountPath"] + "/")
    assert {"key": "ca.crt", "path": relative} in volumes[mount["name"]]["secret"]["items"]


def test_cinder_backup_reads_rbd_volumes_as_cinder_and_needs_no_backups_pool_client() -> None:
    plan = s3_plan()
    mounts = {m["mountPath"] for m in backup_container(plan)["volumeMounts"]}
    assert "/etc/ceph/ceph.client.cinder.keyring" in mounts
    assert "/etc/ceph/ceph.client.cinder-backup.keyring" not in mounts


def test_no_network_policy_holds_back_cinder_backups_traffic_to_the_bucket() -> None:
    """The program restricts no egress (README, Ceph, "The network"): cinder-backup reaches any endpoint."""
    policies = objects(s3_plan(), "NetworkPolicy")
    assert policies and all(p.inputs["spec"]["policyTypes"] == ["Ingress"] for p in policies.values())


@pytest.mark.parametrize(
    ("cinder", "key", "fragment"),
    [
        ({"backends": ["rbd"], "backup": "s3"}, "openstack:cinder.backupS3", "give bucket, endpoint and credentials"),
        ({"backends": ["rbd"], "backupS3": BUCKET}, "openstack:cinder.backupS3", "only with backup 's3'"),
        ({"backends": ["rbd"], "backup": "s3", "backupS3": {**BUCKET, "prefix": "cinder/"}},
         "openstack:cinder.backupS3.prefix", "no prefix option"),
        ({"backends": ["rbd"], "backup": "s3", "backupS3": {**BUCKET, "tls": False, "caSecret": "minio-ca"}},
         "openstack:cinder.backupS3.caSecret", "set tls: true or unset caSecret"),
        ({"backends": ["rbd"], "backup": "s3", "backupS3": {**BUCKET, "credentials": None}},
         "openstack:cinder.backupS3.credentials", ""),
        ({"backends": ["rbd"], "backup": "s3", "backupS3": {k: v for k, v in BUCKET.items() if k != "bucket"}},
         "openstack:cinder.backupS3.bucket", "required"),
        ({"backends": ["rbd"], "backup": "s3", "backupS3": {**BUCKET, "endpoint": "https://s3.example.com"}},
         "openstack:cinder.backupS3.endpoint", "without scheme"),
        ({"backends": ["rbd"], "backup": "s3", "backupS3": {**BUCKET, "bucket": "Volume_Backups"}},
         "openstack:cinder.backupS3.bucket", "S3 bucket name"),
        ({"backends": ["lvm"], "backup": "s3", "backupS3": BUCKET}, "openstack:cinder.backup", "rbd volumes only"),
        ({"backends": ["rbd"], "backup": "swift"}, "openstack:cinder.backup", "'none', 'ceph' or 's3'"),
    ],
)  # fmt: skip
def test_bad_s3_backup_settings_name_their_key(cinder: dict[str, Any], key: str, fragment: str) -> None:
    problems = settings_problems({"ceph": CEPH, "cinder": cinder})
    found = [p for p in problems if p.startswith(f"{key}: ")]
    assert found and fragment in found[0], problems
