"""mariadb-backup: mariadb-operator's scheduled logical Backup of every database.

The operator turns a `Backup` with a schedule into a CronJob that dumps every database with
`mariadb-dump --single-transaction --events --all-databases` (pkg/command/backup.go) and
deletes dumps older than `maxRetention` (docs/logical_backup.md, v26.6.0). Dumps go to a
PersistentVolumeClaim the program declares (not one the operator makes for the Backup, which
it owns and would delete with it), or to an S3 bucket. README.md "Restoring the databases"
has the `Restore`.
"""

from __future__ import annotations

from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from components.mechanism import kube, oslo
from components.mechanism.meta import labels, metadata
from components.mechanism.workload import resources_manifest
from components.settings import scheduling
from components.settings.cron import TIME_ZONE
from components.settings.model import S3_KEYS, BackupBucket, Settings

NAME = "mariadb-backup"
# The backup pods reach MariaDB through its NetworkPolicy as the cloud's own pods
# (components/infrastructure/isolation.py): the operator gives them no label of its own (BuildBackupJob
# takes the pod's metadata from spec.podMetadata).
POD_LABELS = labels("mariadb", "backup")


def _bucket(s3: BackupBucket) -> dict[str, Any]:
    bucket: dict[str, Any] = {
        "bucket": s3.bucket,
        "endpoint": s3.endpoint,
        "accessKeyIdSecretKeyRef": {"name": s3.credentials, "key": S3_KEYS[0]},
        "secretAccessKeySecretKeyRef": {"name": s3.credentials, "key": S3_KEYS[1]},
        "tls": {"enabled": s3.tls},
    }
    bucket.update({k: v for k, v in (("region", s3.region), ("prefix", s3.prefix)) if v})
    return bucket


def mariadb_backup(settings: Settings, server: pulumi.Resource, parent: pulumi.Resource) -> pulumi.Resource | None:
    backup = settings.backup
    if not backup.enabled:
        return None
    ns = settings.namespace
    waits = [server]
    claim = backup.storage.claim
    if claim is not None:
        storage_class = claim.storage_class or settings.storage.class_for("backups")
        # Retained when deleted from the program or the stack: it holds the only copies.
        waits.append(kube.volume_claim(NAME, ns, "mariadb", claim.size, storage_class, False, parent))
        storage: dict[str, Any] = {"volume": {"persistentVolumeClaim": {"claimName": NAME}}}
    else:
        assert backup.storage.s3 is not None
        storage = {"s3": _bucket(backup.storage.s3)}
    spec = {
        "mariaDbRef": {"name": oslo.MARIADB},
        "schedule": {"cron": backup.schedule, "suspend": False},
        "timeZone": TIME_ZONE,  # the schedule is checked as UTC (components/settings/cron.py)
        "maxRetention": backup.max_retention,
        "compression": "gzip",
        "storage": storage,
        "podMetadata": {"labels": POD_LABELS},
        "nodeSelector": settings.node_selectors.control_plane,
        **scheduling.pod_fields(settings.tolerations.control_plane, None),
        "resources": resources_manifest(settings.resources_of(NAME)),
        "successfulJobsHistoryLimit": 1,
        "failedJobsHistoryLimit": 3,
    }
    return k8s.apiextensions.CustomResource(
        NAME,
        api_version="k8s.mariadb.com/v1alpha1",
        kind="Backup",
        metadata=metadata(NAME, ns, "mariadb", "backup"),
        spec=spec,
        # Not awaited: a scheduled Backup completes at its first run, hours after the deploy.
        opts=pulumi.ResourceOptions(parent=parent, depends_on=waits),
    )


# A Backup's condition Complete turns True when its Job fails too (reason JobFailed; mariadb-operator
# pkg/condition/complete.go, v26.6.0): only the reason JobComplete says the dump exists.
WAIT_DUMPED = {
    "pulumi.com/waitFor": "jsonpath={.status.conditions[?(@.type=='Complete')].reason}=JobComplete",
    "pulumi.com/timeoutSeconds": "3600",
}


def backup_before_upgrade(
    name: str, settings: Settings, waits: list[pulumi.Resource], opts: pulumi.ResourceOptions
) -> pulumi.Resource:
    """A one-time Backup (no schedule: mariadb-operator runs it once) of every database, taken
    before an upgrade's first migration, into the scheduled backups' storage (its claim exists
    since the release before). Awaited: the expand Jobs wait for the dump."""
    backup = settings.backup
    if backup.storage.claim is not None:
        storage: dict[str, Any] = {"volume": {"persistentVolumeClaim": {"claimName": NAME}}}
    else:
        assert backup.storage.s3 is not None
        storage = {"s3": _bucket(backup.storage.s3)}
    return k8s.apiextensions.CustomResource(
        name,
        api_version="k8s.mariadb.com/v1alpha1",
        kind="Backup",
        metadata={**metadata(name, settings.namespace, "mariadb", "backup"), "annotations": WAIT_DUMPED},
        spec={
            "mariaDbRef": {"name": oslo.MARIADB},
            "compression": "gzip",
            "storage": storage,
            "podMetadata": {"labels": POD_LABELS},
            "nodeSelector": settings.node_selectors.control_plane,
            **scheduling.pod_fields(settings.tolerations.control_plane, None),
            "resources": resources_manifest(settings.resources_of(NAME)),
        },
        opts=pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(depends_on=waits)),
    )
