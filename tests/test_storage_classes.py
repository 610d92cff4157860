"""A storage class per use: block storage for MariaDB and RabbitMQ, a shared file system for Glance's images."""

from __future__ import annotations

from typing import Any

import pytest

from components.cloud.stack_config import parse_settings
from components.settings.model import SettingsError
from tests.conftest import plan_of
from tools import diff_report, plan_diff
from tools.plan import Plan

# What Pulumi.prod.yaml said before there were classes per use: one class for every claim.
ONE_CLASS_FOR_ALL = {"storageClass": "cephfs", "mariadbSize": "100Gi", "rabbitmqSize": "20Gi", "glanceSize": "500Gi"}
# Prod keeps its images in Ceph since (glance.backend rbd: no claim); before, on a claim of their own class.
ON_FILES = {"glance": {"backend": "file"}}
PROD_ON_FILES = {
    **ON_FILES,
    "storage": {
        "classes": {"database": "ceph-rbd", "queue": "ceph-rbd", "images": "cephfs", "backups": "cephfs"},
        **{k: v for k, v in ONE_CLASS_FOR_ALL.items() if k.endswith("Size")},
    },
}


def classes(plan: Plan) -> dict[str, Any]:
    """The storage class each volume is claimed from, as the objects declare it (None: the cluster's default)."""
    mariadb = plan.by_name("mariadb", "MariaDB").inputs["spec"]["storage"]
    rabbitmq = plan.by_name("rabbitmq", "RabbitmqCluster").inputs["spec"]["persistence"]
    found = {"database": mariadb.get("storageClassName"), "queue": rabbitmq.get("storageClassName")}
    for use, claim in (("images", "glance-images"), ("backups", "mariadb-backup")):
        found[use] = plan.by_name(claim, "PersistentVolumeClaim").inputs["spec"].get("storageClassName")
    return found


def test_prod_keeps_databases_and_queues_on_block_storage_and_images_on_cephfs() -> None:
    plan = plan_of("prod", **PROD_ON_FILES)
    assert classes(plan) == {"database": "ceph-rbd", "queue": "ceph-rbd", "images": "cephfs", "backups": "cephfs"}
    images = plan.by_name("glance-images", "PersistentVolumeClaim").inputs["spec"]
    assert plan.settings.replicas_of("glance-api") == 3 and images["accessModes"] == ["ReadWriteMany"]


def test_every_use_defaults_to_the_clusters_default_class() -> None:
    assert classes(plan_of("dev")) == {"database": None, "queue": None, "images": None, "backups": None}


def test_a_stack_with_one_class_for_every_claim_keeps_it_everywhere() -> None:
    """storage.storageClass keeps its meaning: an existing stack's volumes stay where they are."""
    plan = plan_of("prod", storage=ONE_CLASS_FOR_ALL, **ON_FILES)
    assert classes(plan) == {"database": "cephfs", "queue": "cephfs", "images": "cephfs", "backups": "cephfs"}


def test_a_use_of_its_own_class_overrides_the_common_one() -> None:
    plan = plan_of(
        "prod", storage={**ONE_CLASS_FOR_ALL, "classes": {"database": "rbd", "queue": "rbd-fast"}}, **ON_FILES
    )
    assert classes(plan) == {"database": "rbd", "queue": "rbd-fast", "images": "cephfs", "backups": "cephfs"}
    claim_of_its_own = {"storage": {"pvc": {"storageClass": "local-path"}}}
    own = plan_of(
        "prod", storage={**ONE_CLASS_FOR_ALL, "classes": {"backups": "rbd"}}, backup=claim_of_its_own, **ON_FILES
    )
    assert classes(own)["backups"] == "local-path"  # backup.storage.pvc.storageClass is the backup claim's own


@pytest.mark.parametrize(("replicas", "modes"), [(1, ["ReadWriteOnce"]), (2, ["ReadWriteMany"])])
def test_glances_claim_is_shared_when_glance_api_has_replicas_on_several_nodes(replicas: int, modes: list) -> None:
    plan = plan_of("dev", replicas={"glance-api": replicas}, storage={"classes": {"images": "nfs"}})
    claim = plan.by_name("glance-images", "PersistentVolumeClaim").inputs["spec"]
    assert (claim["accessModes"], claim["storageClassName"]) == (modes, "nfs")


@pytest.mark.parametrize(
    "storage",
    [{}, {"classes": {"database": "ceph-rbd", "queue": "ceph-rbd", "backups": "ceph-rbd"}}],
)
def test_replicated_glance_needs_a_class_for_its_images(storage: dict[str, Any]) -> None:
    with pytest.raises(SettingsError) as caught:
        parse_settings({"ha": True, "storage": storage})
    [problem] = [p for p in caught.value.problems if "ReadWriteMany" in p]
    assert problem.startswith("openstack:storage.classes.images: glance-api runs 3 replicas")
    parse_settings({"ha": True, "storage": {"storageClass": "cephfs"}})  # the common class serves too


def test_a_claims_new_class_is_a_replacement_the_diff_shows() -> None:
    old = plan_of("prod", **PROD_ON_FILES)
    new = plan_of("prod", storage={**ONE_CLASS_FOR_ALL, "classes": {"images": "nfs"}}, **ON_FILES)
    diff = plan_diff.diff(plan_diff.view_of(old), plan_diff.view_of(new))
    replaced = {(o["kind"], o["name"]): o for o in diff["replaced"]}
    claim = replaced[("PersistentVolumeClaim", "glance-images")]
    assert claim["immutable"] == ["spec.storageClassName"] and claim["retained"]
    text = diff_report.render(diff, "main")
    assert "- PersistentVolumeClaim `glance-images`: `spec.storageClassName` (retained)" in text
    assert "move the data first" in text


def test_a_database_or_queue_class_change_is_flagged_as_not_applied_by_the_operators() -> None:
    """Moving prod from one class for all (cephfs) to block storage changes the operators' resources only."""
    old, new = plan_of("prod", storage=ONE_CLASS_FOR_ALL), plan_of("prod")
    diff = plan_diff.diff(plan_diff.view_of(old), plan_diff.view_of(new))
    assert {(o["kind"], o["name"]) for o in diff["replaced"]} == set()  # images and backups stay on cephfs
    unapplied = {(u["kind"], u["field"]): (u["before"], u["after"]) for u in diff["unapplied"]}
    assert unapplied == {
        ("MariaDB", "spec.storage.storageClassName"): ("cephfs", "ceph-rbd"),
        ("RabbitmqCluster", "spec.persistence.storageClassName"): ("cephfs", "ceph-rbd"),
    }
    text = diff_report.render(diff, "main")
    assert "**Changes the operators do not apply to what exists**" in text
    assert "move the data with a Backup and a Restore" in text
