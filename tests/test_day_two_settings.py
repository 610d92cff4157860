"""Settings of day-2 operations (keyRotation, backup, housekeeping): defaults, and every mistake
an error naming the key, the value and what is allowed (as in tests/test_settings.py)."""

from __future__ import annotations

from typing import Any

import pytest

from components.cloud.stack_config import parse_settings
from components.settings.model import Settings, SettingsError

S3 = {"bucket": "openstack-backups", "endpoint": "minio.storage.svc:9000", "credentials": "backup-s3"}

MALFORMED: list[tuple[dict[str, Any], str, str]] = [
    ({"keyRotation": {"fernetSchedule": "0 */12 * *"}}, "openstack:keyRotation.fernetSchedule", "found 4 field(s)"),
    ({"keyRotation": {"fernetSchedule": "0 25 * * *"}}, "openstack:keyRotation.fernetSchedule", "outside 0-23"),
    ({"keyRotation": {"fernetSchedule": "*/30 * * * *"}}, "openstack:keyRotation.fernetSchedule", "once an hour"),
    ({"keyRotation": {"credentialSchedule": "@every 24h"}}, "openstack:keyRotation.credentialSchedule", "@every"),
    ({"keyRotation": {"credentialSchedule": "0 0 30 2 *"}}, "openstack:keyRotation.credentialSchedule", "never"),
    ({"keyRotation": {"enabled": "sometimes"}}, "openstack:keyRotation.enabled", "boolean"),
    ({"keyRotation": {"schedule": "0 0 * * *"}}, "openstack:keyRotation.schedule", "unknown setting"),
    ({"backup": {"schedule": "daily"}}, "openstack:backup.schedule", "five cron fields"),
    ({"backup": {"maxRetention": "7d"}}, "openstack:backup.maxRetention", "a duration as Go writes it"),
    ({"backup": {"maxRetention": "0h"}}, "openstack:backup.maxRetention", "more than 0"),
    ({"backup": {"maxRetention": 720}}, "openstack:backup.maxRetention", "valid string"),
    ({"backup": {"maxRetention": "12h"}}, "openstack:backup.maxRetention", "longest time between two backups"),
    (
        {"backup": {"schedule": "0 2 * * 0", "maxRetention": "144h"}},
        "openstack:backup.maxRetention",
        "'0 2 * * 0' (168h)",
    ),
    ({"backup": {"storage": {"pvc": {"size": "20"}}}}, "openstack:backup.storage.pvc.size", "a size with a unit"),
    (
        {"backup": {"storage": {"pvc": {"storageClass": "Fast_SSD"}}}},
        "openstack:backup.storage.pvc.storageClass",
        "DNS",
    ),
    ({"backup": {"storage": {"pvc": {}, "s3": S3}}}, "openstack:backup.storage", "pvc or s3, not both"),
    ({"backup": {"storage": {"s3": {**S3, "bucket": "Backups"}}}}, "openstack:backup.storage.s3.bucket", "bucket"),
    (
        {"backup": {"storage": {"s3": {**S3, "endpoint": "https://s3.example.com"}}}},
        "openstack:backup.storage.s3.endpoint",
        "without scheme",
    ),
    ({"backup": {"storage": {"s3": {"bucket": "b-1"}}}}, "openstack:backup.storage.s3.endpoint", "required"),
    ({"backup": {"storage": {"nfs": {}}}}, "openstack:backup.storage.nfs", "unknown setting"),
    (
        {"housekeeping": {"cinderDbPurge": {"schedule": "0 0 * * *", "ageInDays": 0}}},
        "openstack:housekeeping.cinderDbPurge.ageInDays",
        "greater than or equal to 1",
    ),
    (
        {"housekeeping": {"glanceDbPurge": {"schedule": "0 0 * * *", "ageInDays": -3}}},
        "openstack:housekeeping.glanceDbPurge.ageInDays",
        "greater than or equal to 1",
    ),
    (
        {"housekeeping": {"novaArchiveDeletedRows": {"schedule": "61 * * * *"}}},
        "openstack:housekeeping.novaArchiveDeletedRows.schedule",
        "minute field: '61' is outside 0-59",
    ),
]


@pytest.mark.parametrize(("raw", "key", "allowed"), MALFORMED, ids=[m[1] + "-" + m[2][:16] for m in MALFORMED])
def test_malformed_day_two_settings_name_the_key_and_what_is_allowed(
    raw: dict[str, Any], key: str, allowed: str
) -> None:
    with pytest.raises(SettingsError) as caught:
        parse_settings(raw)
    found = [p for p in caught.value.problems if p.startswith(key + ":") and allowed in p]
    assert found, caught.value.problems


def test_the_defaults_rotate_keys_back_up_to_a_claim_and_clean_up() -> None:
    settings = Settings()
    assert settings.key_rotation.enabled and settings.backup.enabled and settings.housekeeping.enabled
    assert (settings.key_rotation.fernet_schedule, settings.key_rotation.credential_schedule) == (
        "0 */12 * * *",
        "0 0 1 * *",
    )
    assert settings.backup.storage.claim is not None and settings.backup.storage.s3 is None
    assert settings.backup.max_retention == "168h"
    purges = settings.housekeeping
    jobs = (purges.nova_archive_deleted_rows, purges.cinder_db_purge, purges.glance_db_purge)
    assert [p.age_in_days for p in jobs] == [30, 30, 30]


def test_s3_replaces_the_claim() -> None:
    settings = parse_settings({"backup": {"storage": {"s3": S3}}})
    assert settings.backup.storage.claim is None
    assert settings.backup.storage.s3 is not None and settings.backup.storage.s3.tls is True


def test_every_day_two_problem_is_reported_at_once() -> None:
    raw = {
        "keyRotation": {"fernetSchedule": "*/5 * * * *"},
        "backup": {"maxRetention": "7d"},
        "housekeeping": {"glanceDbPurge": {"schedule": "0 0 * * *", "ageInDays": 0}},
    }
    with pytest.raises(SettingsError) as caught:
        parse_settings(raw)
    keys = sorted(p.split(":")[1] for p in caught.value.problems)
    assert keys == ["backup.maxRetention", "housekeeping.glanceDbPurge.ageInDays", "keyRotation.fernetSchedule"]
