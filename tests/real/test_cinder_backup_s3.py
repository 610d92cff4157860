"""cinder's S3 backup driver, configured as the plan configures cinder-backup, backs up a volume to
a bucket and restores it.

moto's S3 server stands in for the bucket (plain http: `tls: false`). A stand-in for cinder-backup
loads the plan's rendered cinder.conf as cinder/cmd/backup.py does, with the container's environment
as the kubelet resolves it (the keys from the user's Secret, here a dict), loads the driver
`backup_driver` names, checks its setup (cinder-backup's own check: the options set, the bucket
listed), backs a file-like volume up and restores it into another. What it cannot run is the rest
of cinder-backup: its volume comes from a BytesIO instead of librbd (os-brick's RBD connector gives
the driver a file-like object too), and its database is a SQLite file (`[database] connection`
overridden through the environment) with cinder's own schema, where the volume and backup rows live.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import boto3
import pytest
from moto.server import ThreadedMotoServer

from tests.conftest import plan_of
from tests.helpers import containers
from tests.lab.realenv.openstack_venv import OpenStackVenv

CONFIG_DIR = "/etc/cinder"
BUCKET = "volume-backups"
SECRET = {"access-key-id": "AKIACINDERBACKUP0001", "secret-access-key": "cinder-backup-secret-key-for-the-test"}

STAND_IN = """
import io, json, os, sys
import cinder.cmd.backup  # registers cinder-backup's options, as the real command does
from cinder import context, objects, rpc, version
from cinder.db import migration
from cinder.volume import volume_types
from oslo_config import cfg
from oslo_utils import importutils

CONF = cfg.CONF
objects.register_all()
import cinder.backup.manager  # after the objects, which it names: backup_driver, loaded as _setup_backup_driver does
CONF(sys.argv[1:], project="cinder", version=version.version_string())
rpc.init(CONF)  # as cinder-backup's service does; the transports connect on first use only
migration.db_sync()
ctxt = context.RequestContext("a-user", "a-project", is_admin=True)
volume_types.create(ctxt, CONF.default_volume_type, {"volume_backend_name": CONF.default_volume_type})  # the Job's
owner = {"user_id": ctxt.user_id, "project_id": ctxt.project_id, "availability_zone": "nova"}
volume = objects.Volume(context=ctxt, size=1, status="backing-up", **owner)
volume.create()
backup = objects.Backup(context=ctxt, volume_id=volume.id, status="creating", size=1, **owner)
backup.create()
driver = importutils.import_class(CONF.backup_driver)(context=ctxt)
driver.check_for_setup_error()
data = os.urandom(3 * 1024 * 1024) + bytes(2 * 1024 * 1024) + b"end of the volume"
driver.backup(backup, io.BytesIO(data))
backup.status = "restoring"
backup.save()
restored = io.BytesIO()
driver.restore(backup, volume.id, restored, True)
credentials = driver.conn._request_signer._credentials
print(json.dumps({
    "driver": type(driver).__module__ + "." + type(driver).__name__,
    "endpoint": driver.conn.meta.endpoint_url,
    "container": backup.container,
    "service_metadata": backup.service_metadata,
    "keys": [credentials.access_key, credentials.secret_key],
    "same": restored.getvalue()[: len(data)] == data,
    "size": len(data),
}))
"""


def _pod_env(container: dict[str, Any], secrets: dict[str, dict[str, str]]) -> dict[str, str]:
    """The container's environment as the kubelet resolves it, its Secrets' keys from `secrets`."""
    resolved = {}
    for entry in container["env"]:
        source = entry.get("valueFrom", {})
        if "secretKeyRef" in source:
            ref = source["secretKeyRef"]
            resolved[entry["name"]] = secrets[ref["name"]][ref["key"]]
        elif "fieldRef" in source:
            assert source["fieldRef"] == {"fieldPath": "spec.nodeName"}, entry
            resolved[entry["name"]] = "storage-node-1"
        else:
            resolved[entry["name"]] = entry["value"]
    return resolved


@pytest.fixture
def s3_server() -> Any:
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0)
    server.start()
    host, port = server.get_host_and_port()
    yield f"{host}:{port}"
    server.stop()


def test_the_plans_s3_backup_driver_backs_a_volume_up_to_the_bucket_and_restores_it(
    openstack_venv: OpenStackVenv, s3_server: str, tmp_path: Path
) -> None:
    s3 = boto3.client(
        "s3",
        endpoint_url=f"http://{s3_server}",
        aws_access_key_id=SECRET["access-key-id"],
        aws_secret_access_key=SECRET["secret-access-key"],
        region_name="us-east-1",
    )
    s3.create_bucket(Bucket=BUCKET)  # the user makes the bucket (README)
    plan = plan_of(
        "prod",
        cinder={
            "backends": ["rbd"],
            "backup": "s3",
            "backupS3": {"bucket": BUCKET, "endpoint": s3_server, "credentials": "cinder-backup-s3", "tls": False},
        },
    )
    [container] = containers(plan.by_name("cinder-backup", "DaemonSet"))
    files = plan.by_name("cinder-node-etc", "Secret").revealed["stringData"]
    conf = tmp_path / "cinder.conf"
    conf.write_text(files["cinder.conf"])
    assert conf.read_text().count("backup_s3_store_") == 1  # the bucket only: the keys are no option in the file
    (tmp_path / "stand_in.py").write_text(STAND_IN)
    pod_env = _pod_env(container, {"cinder-backup-s3": SECRET})
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "OS_"))},
        **pod_env,
        # The test's stand-ins for what is not here: cinder's database and its lock and state paths.
        "OS_DATABASE__CONNECTION": f"sqlite:///{tmp_path / 'cinder.sqlite'}",
        "OS_DEFAULT__STATE_PATH": str(tmp_path),
        "OS_OSLO_CONCURRENCY__LOCK_PATH": str(tmp_path),
    }
    done = subprocess.run(
        [str(openstack_venv.python), str(tmp_path / "stand_in.py"), "--config-file", str(conf)],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["driver"] == "cinder.backup.drivers.s3.S3BackupDriver"
    assert result["endpoint"] == f"http://{s3_server}"
    assert result["keys"] == [SECRET["access-key-id"], SECRET["secret-access-key"]]  # from the environment
    assert result["container"] == BUCKET and result["same"], result
    # The objects are in the bucket the config names, under the prefix cinder recorded for the backup.
    names = [o["Key"] for o in s3.list_objects_v2(Bucket=BUCKET)["Contents"]]
    prefix = result["service_metadata"]
    assert names and all(name.startswith(prefix) for name in names), names
    assert any(name.endswith("_metadata") for name in names) and any(name.endswith("-00001") for name in names)
