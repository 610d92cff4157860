"""mariadb-backup: a scheduled mariadb-operator Backup of every database, to a claim or a bucket.

The Backup is a custom resource the offline plan cannot validate against a cluster's schema, so
its spec is checked against the operator's own CRD of the pinned version (tests/fixtures).
"""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from components.infrastructure.isolation import policies
from tests.conftest import plan_of
from tests.helpers import bundle_job, objects, unknown_fields
from tools.plan import Plan
from tools.runtime import REPO, Registration

CRDS = Path(__file__).parent / "fixtures" / "mariadb-operator"
S3 = {
    "bucket": "openstack-backups",
    "endpoint": "minio.storage.svc:9000",
    "region": "us-east-1",
    "prefix": "prod/mariadb",
    "credentials": "backup-s3",
}


@cache
def _schema(plural: str = "backups") -> dict[str, Any]:
    [crd] = [d for d in yaml.safe_load_all((CRDS / f"k8s.mariadb.com_{plural}.yaml").read_text()) if d]
    [version] = [v for v in crd["spec"]["versions"] if v["name"] == "v1alpha1"]
    return version["schema"]["openAPIV3Schema"]


def _backup(plan: Plan) -> Registration:
    return plan.by_name("mariadb-backup", "Backup")


def _check_against_the_crd(backup: Registration) -> None:
    manifest = {k: backup.inputs[k] for k in ("apiVersion", "kind", "metadata", "spec")}
    assert unknown_fields(manifest, _schema()) == []
    jsonschema.validate(manifest, _schema())


def test_every_stack_backs_up_every_database_on_a_schedule(stack_plan: Plan) -> None:
    settings = stack_plan.settings.backup
    backup = _backup(stack_plan)
    spec = backup.inputs["spec"]
    assert backup.inputs["apiVersion"] == "k8s.mariadb.com/v1alpha1"
    assert spec["mariaDbRef"] == {"name": "mariadb"}
    assert "databases" not in spec  # all of them (mariadb-dump --all-databases)
    assert spec["schedule"] == {"cron": settings.schedule, "suspend": False}
    assert spec["timeZone"] == "Etc/UTC"
    assert spec["maxRetention"] == settings.max_retention
    assert spec["nodeSelector"] == stack_plan.settings.node_selectors.control_plane
    _check_against_the_crd(backup)


def test_backups_go_to_a_claim_that_outlives_the_backup(stack_plan: Plan) -> None:
    backup = _backup(stack_plan)
    assert backup.inputs["spec"]["storage"] == {"volume": {"persistentVolumeClaim": {"claimName": "mariadb-backup"}}}
    claim = stack_plan.by_name("mariadb-backup", "PersistentVolumeClaim")
    assert claim.inputs["spec"]["resources"]["requests"]["storage"] == "20Gi"
    assert claim.inputs["spec"]["accessModes"] == ["ReadWriteOnce"]
    assert claim.inputs["spec"].get("storageClassName") == stack_plan.settings.storage.class_for("backups")
    # The operator deletes a claim it made with its Backup; this one stays, also after `pulumi destroy`.
    assert claim.retain_on_delete
    by_urn = {r.urn: r for r in stack_plan.custom}
    waits = {(by_urn[u].kind, by_urn[u].k8s_name) for u in stack_plan.dependencies[backup.urn] if u in by_urn}
    assert waits - {("Namespace", stack_plan.settings.namespace)} == {
        ("MariaDB", "mariadb"),
        ("PersistentVolumeClaim", "mariadb-backup"),
        *(("Job", job) for job in bundle_job(stack_plan)),  # its pod verifies MariaDB with the bundle
    }


def test_the_backup_pods_pass_the_databases_network_policy(stack_plan: Plan) -> None:
    labels = _backup(stack_plan).inputs["spec"]["podMetadata"]["labels"]
    rules = policies(stack_plan.settings)["mariadb"]["ingress"]
    admitted = [
        rule
        for rule in rules
        for source in rule.get("from") or [{}]  # no `from`: every source
        if "namespaceSelector" not in source
        and source.get("podSelector", {}).get("matchLabels", {}).items() <= labels.items()
        and {"protocol": "TCP", "port": 3306} in rule.get("ports", [])
    ]
    assert admitted
    assert labels["app.kubernetes.io/component"] == "backup"


def test_a_claim_of_its_own_size_and_class() -> None:
    plan = plan_of("prod", backup={"storage": {"pvc": {"size": "200Gi", "storageClass": "rbd"}}})
    claim = plan.by_name("mariadb-backup", "PersistentVolumeClaim").inputs["spec"]
    assert (claim["resources"]["requests"]["storage"], claim["storageClassName"]) == ("200Gi", "rbd")


def test_backups_to_an_s3_bucket() -> None:
    plan = plan_of("prod", backup={"schedule": "0 */6 * * *", "maxRetention": "720h", "storage": {"s3": S3}})
    backup = _backup(plan)
    assert backup.inputs["spec"]["storage"] == {
        "s3": {
            "bucket": "openstack-backups",
            "endpoint": "minio.storage.svc:9000",
            "region": "us-east-1",
            "prefix": "prod/mariadb",
            "accessKeyIdSecretKeyRef": {"name": "backup-s3", "key": "access-key-id"},
            "secretAccessKeySecretKeyRef": {"name": "backup-s3", "key": "secret-access-key"},
            "tls": {"enabled": True},
        }
    }
    assert backup.inputs["spec"]["schedule"]["cron"] == "0 */6 * * *"
    assert "mariadb-backup" not in objects(plan, "PersistentVolumeClaim")
    _check_against_the_crd(backup)


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_backups_can_be_turned_off(stack: str) -> None:
    plan = plan_of(stack, backup={"enabled": False})
    assert not objects(plan, "Backup")
    assert "mariadb-backup" not in objects(plan, "PersistentVolumeClaim")


def test_the_crd_check_finds_a_misspelt_field() -> None:
    backup = _backup(plan_of("dev"))
    misspelt = {**backup.inputs, "spec": {**backup.inputs["spec"], "retention": "168h"}}
    assert unknown_fields(misspelt, _schema()) == [".spec.retention"]


def test_the_readmes_restore_is_one_the_operator_takes_and_the_network_policy_admits() -> None:
    readme = (REPO / "README.md").read_text()
    block = re.search(r"```yaml\n(apiVersion: k8s.mariadb.com/v1alpha1\nkind: Restore\n.*?)```", readme, re.S)
    assert block, "README.md has no Restore"
    restore = yaml.safe_load(block[1])
    assert unknown_fields(restore, _schema("restores")) == []
    jsonschema.validate(restore, _schema("restores"))
    assert restore["spec"]["backupRef"] == {"name": "mariadb-backup"}
    assert restore["spec"]["mariaDbRef"] == {"name": "mariadb"}
    labels = restore["spec"]["podMetadata"]["labels"]
    assert labels["app.kubernetes.io/part-of"] == "openstack"  # what the mariadb NetworkPolicy admits on 3306
