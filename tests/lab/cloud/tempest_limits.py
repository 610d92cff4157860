"""This machine's limits as Tempest meets them, and tempest.json: every result counted and classed.

A test that fails here is class `cloud` unless a row of LAB_FAILURES names it (a regex over the
test id, searched) and the error it ended with (a regex over the traceback's last line, searched)
with the limit of this machine that makes it fail: the same test failing for another reason is the
cloud's. A test that needs what this machine cannot run at all is not started: NEEDS_VOLUME_BACKEND
lists those that create, attach or otherwise need a volume, left out when cinder-volume cannot run
here, and counted as skipped with the lab's reason. Nothing else is excused.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

PASSED = {"success", "xfail"}
SKIPPED = {"skip"}
NO_INTERNET = (
    "glance-api downloads the image from the Internet ([image] http_image, download.cirros-cloud.net); "
    "the lab's node network has no route or name service beyond this machine"
)


@dataclass(frozen=True)
class LabLimit:
    tests: str  # a regex searched in the test id (setUpClass failures name their class)
    error: str  # a regex searched in the error the test ended with (the traceback's last line)
    reason: str


# The test logs in to its server over SSH whether or not [validation] run_validation is on (Tempest
# 47.0.0, test_server_actions.py: no skip on it, unlike the other tests that log in), so with the
# validation resources off it stops at get_server_ip: "When validation.connect_method equals
# floating, validation_resources cannot be None". Found in the full set once prod's volumes were in Ceph.
NO_SSH_LOGIN = (
    "the test logs in to the guest over SSH even with [validation] run_validation off, and the lab's guest "
    "(tests/lab/cloud/guest.py: a busybox initramfs, as there is no Internet for CirrOS) runs no SSH server"
)
LAB_FAILURES: tuple[LabLimit, ...] = (
    # The import's download never ends: Tempest's wait for the image to become active times out.
    LabLimit(
        r"tempest\.api\.image\.v2\.test_images\.ImportImagesTest\.test_image_web_download_import\b",
        r"^tempest\.lib\.exceptions\.TimeoutException: ",
        NO_INTERNET,
    ),
    LabLimit(
        r"tempest\.api\.compute\.servers\.test_server_actions\.ServerActionsV293TestJSON\.test_rebuild_volume_backed_server\b",
        r"^tempest\.lib\.exceptions\.InvalidParam: .*validation_resources cannot be None",
        NO_SSH_LOGIN,
    ),
)
# Tests that need a running cinder-volume: each creates a volume that must become available, or
# asks for the backend's hosts, pools, capabilities or availability zones. Tempest's class under
# tempest.api → its tests (none: every test of the class, whose setUpClass creates a volume).
# Found as the failures of Tempest 47.0.0's full set in the lab without cinder-volume (2026-11-24),
# each checked to be one of those causes; the volume API tests that need no backend (types, QoS,
# quotas, services, limits, extensions) run.
NEEDS_VOLUME_BACKEND: dict[str, tuple[str, ...]] = {
    "compute.admin.test_assisted_volume_snapshots.VolumesAssistedSnapshotsTest": (
        "test_volume_assisted_snapshot_create_delete",
    ),
    "compute.admin.test_volume.AttachSCSIVolumeTestJSON": ("test_attach_scsi_disk_with_config_drive",),
    # Live migration runs with two compute nodes (found in the multi-node lab's full set, 2026-11-24).
    "compute.admin.test_live_migration.LiveMigrationTest": ("test_live_block_migration_with_attached_volume",),
    "compute.admin.test_live_migration.LiveAutoBlockMigrationV225Test": (
        "test_live_block_migration_with_attached_volume",
    ),
    "compute.admin.test_live_migration.LiveMigrationWithoutHostTest": (
        "test_live_block_migration_with_attached_volume",
    ),
    "compute.admin.test_volumes_negative.VolumesAdminNegativeTest": (
        "test_update_attached_volume_with_nonexistent_volume_in_uri",
    ),
    "compute.servers.test_create_server.ServersTestBootFromVolume": (),
    "compute.servers.test_delete_server.DeleteServersTestJSON": ("test_delete_server_while_in_attached_volume",),
    "compute.servers.test_server_actions.ServerActionsTestOtherA": ("test_rebuild_server_with_volume_attached",),
    "compute.servers.test_server_actions.ServerActionsV293TestJSON": (),
    "compute.servers.test_server_rescue_negative.ServerRescueNegativeTestJSON": (
        "test_rescued_vm_attach_volume",
        "test_rescued_vm_detach_volume",
    ),
    "compute.servers.test_servers_negative.ServersNegativeTestJSON": (
        "test_create_server_from_non_bootable_volume",
        "test_create_server_invalid_bdm_in_2nd_dict",
    ),
    "compute.volumes.test_attach_volume.AttachVolumeShelveTestJSON": (
        "test_attach_volume_shelved_or_offload_server",
        "test_detach_volume_shelved_or_offload_server",
    ),
    "compute.volumes.test_attach_volume.AttachVolumeTestJSON": (
        "test_attach_detach_volume",
        "test_list_get_volume_attachments",
    ),
    "compute.volumes.test_attach_volume_negative.AttachVolumeNegativeTest": (
        "test_attach_attached_volume_to_different_server",
        "test_attach_attached_volume_to_same_server",
        "test_delete_attached_volume",
    ),
    "compute.volumes.test_volume_snapshots.VolumesSnapshotsTestJSON": ("test_volume_snapshot_create_get_list_delete",),
    "compute.volumes.test_volumes_get.VolumesGetTestJSON": ("test_volume_create_get_delete",),
    "compute.volumes.test_volumes_list.VolumesTestJSON": (),
    "image.v2.test_images_dependency.ImageDependencyTests": ("test_image_volume_server_snapshot_dependency",),
    "volume.admin.test_backends_capabilities.BackendsCapabilitiesAdminTestsJSON": ("test_get_capabilities_backend",),
    "volume.admin.test_group_snapshots.GroupSnapshotsTest": (
        "test_create_group_from_group_snapshot",
        "test_delete_group_snapshots_following_updated_volumes",
        "test_group_snapshot_create_show_list_delete",
    ),
    "volume.admin.test_group_snapshots.GroupSnapshotsV319Test": ("test_reset_group_snapshot_status",),
    "volume.admin.test_groups.GroupsTest": ("test_group_create_show_list_delete", "test_group_update"),
    "volume.admin.test_groups.GroupsV314Test": ("test_create_group_from_group",),
    "volume.admin.test_groups.GroupsV320Test": ("test_reset_group_status",),
    "volume.admin.test_snapshots_actions.SnapshotsActionsTest": (),
    "volume.admin.test_volume_hosts.VolumeHostsAdminTestsJSON": ("test_list_hosts", "test_show_host"),
    "volume.admin.test_volume_pools.VolumePoolsAdminTestsJSON": (
        "test_get_pools_with_details",
        "test_get_pools_without_details",
    ),
    "volume.admin.test_volume_quotas.VolumeQuotasAdminTestJSON": (
        "test_quota_usage",
        "test_quota_usage_after_volume_transfer",
    ),
    "volume.admin.test_volume_quotas_negative.VolumeQuotasNegativeTestJSON": (),
    "volume.admin.test_volume_retype.VolumeRetypeWithoutMigrationTest": ("test_available_volume_retype",),
    "volume.admin.test_volume_services.VolumesServicesTestJSON": ("test_get_service_by_volume_host_name",),
    "volume.admin.test_volume_snapshot_quotas_negative.VolumeSnapshotQuotasNegativeTestJSON": (),
    "volume.admin.test_volume_type_access.VolumeTypesAccessTest": ("test_volume_type_access_add",),
    "volume.admin.test_volume_types.VolumeTypesTest": ("test_volume_crud_with_volume_type_and_extra_specs",),
    "volume.admin.test_volumes_actions.VolumesActionsTest": (
        "test_force_detach_volume",
        "test_volume_force_delete_when_volume_is_attaching",
        "test_volume_force_delete_when_volume_is_creating",
        "test_volume_force_delete_when_volume_is_error",
        "test_volume_force_delete_when_volume_is_maintenance",
        "test_volume_reset_status",
    ),
    "volume.admin.test_volumes_list.VolumesListAdminTestJSON": (),
    "volume.test_availability_zone.AvailabilityZoneTestJSON": ("test_get_availability_zone_list",),
    "volume.test_image_metadata.VolumesImageMetadata": (),
    "volume.test_snapshot_metadata.SnapshotMetadataTestJSON": (),
    "volume.test_volume_absolute_limits.AbsoluteLimitsTests": (),
    "volume.test_volume_delete_cascade.VolumesDeleteCascade": (
        "test_volume_delete_cascade",
        "test_volume_from_snapshot_cascade_delete",
    ),
    "volume.test_volume_metadata.VolumesMetadataTest": (),
    "volume.test_volume_transfers.VolumesTransfersTest": (
        "test_create_get_list_accept_volume_transfer",
        "test_create_list_delete_volume_transfer",
    ),
    "volume.test_volume_transfers.VolumesTransfersV355Test": (
        "test_create_get_list_accept_volume_transfer",
        "test_create_list_delete_volume_transfer",
    ),
    "volume.test_volume_transfers.VolumesTransfersV357Test": (
        "test_create_get_list_accept_volume_transfer",
        "test_create_list_delete_volume_transfer",
    ),
    "volume.test_volumes_actions.VolumesActionsTest": (),
    "volume.test_volumes_clone.VolumesCloneTest": ("test_create_from_bootable_volume", "test_create_from_volume"),
    "volume.test_volumes_clone_negative.VolumesCloneNegativeTest": ("test_create_from_volume_decreasing_size",),
    "volume.test_volumes_extend.VolumesExtendTest": (
        "test_volume_extend",
        "test_volume_extend_when_volume_has_snapshot",
    ),
    "volume.test_volumes_get.VolumesGetTest": (
        "test_volume_create_get_update_delete",
        "test_volume_create_get_update_delete_as_clone",
        "test_volume_create_get_update_delete_from_image",
    ),
    "volume.test_volumes_list.VolumesListTestJSON": (),
    "volume.test_volumes_negative.VolumesNegativeTest": (),
    "volume.test_volumes_snapshots.VolumesSnapshotTestJSON": (),
    "volume.test_volumes_snapshots_list.VolumesSnapshotListTestJSON": (),
    "volume.test_volumes_snapshots_negative.VolumesSnapshotNegativeTestJSON": (
        "test_volume_from_snapshot_decreasing_size",
    ),
}


def volume_backend_tests() -> list[str]:
    """NEEDS_VOLUME_BACKEND as regexes over test ids."""

    def pattern(test_class: str, tests: tuple[str, ...]) -> str:
        prefix = re.escape(f"tempest.api.{test_class}.")
        return prefix + (f"({'|'.join(tests)})\\b" if tests else "")

    return [pattern(test_class, tests) for test_class, tests in NEEDS_VOLUME_BACKEND.items()]


def lab_reason(test_id: str, error: str, limits: Iterable[LabLimit] = LAB_FAILURES) -> str | None:
    """The lab's limit that explains this failure: the test named, ending with the error the limit causes."""
    return next(
        (limit.reason for limit in limits if re.search(limit.tests, test_id) and re.search(limit.error, error)), None
    )


def excluded(test_ids: Iterable[str], patterns: Iterable[str], reason: str) -> dict[str, str]:
    """The tests of the selection that are left out, each with why."""
    compiled = [re.compile(p) for p in patterns]
    return {t: reason for t in test_ids if any(p.search(t) for p in compiled)}


def _why(record: Mapping[str, Any]) -> str:
    """The exception a failed test ended with: the traceback's last line."""
    details = record.get("details") or {}
    text = details.get("traceback") or details.get("reason") or next(iter(details.values()), "")
    lines = [line.strip() for line in str(text).splitlines() if line.strip()]
    return lines[-1][:500] if lines else f"status {record.get('status')}, no traceback"


def summarize(
    records: Iterable[Mapping[str, Any]], left_out: Mapping[str, str], limits: Iterable[LabLimit] = LAB_FAILURES
) -> dict[str, Any]:
    """tempest.json: counts, every failure with its class and reason, every skip reason with its count."""
    limits = tuple(limits)
    passed, failures, skips = 0, [], Counter(left_out.values())
    for record in records:
        status = record["status"]
        if status in PASSED:
            passed += 1
        elif status in SKIPPED:
            skips[_why(record)] += 1
        elif status != "exists":
            lab = lab_reason(record["id"], _why(record), limits)
            failures.append(
                {"test": record["id"], "reason": lab or _why(record), "class": "lab" if lab else "cloud"}
                | ({"error": _why(record)} if lab else {})
            )
    return {
        "passed": passed,
        "failed": len(failures),
        "skipped": sum(skips.values()),
        "failures": sorted(failures, key=lambda f: (f["class"], f["test"])),
        "skips": dict(skips.most_common()),
    }
