"""Pods run as the Kolla image's own service user, by the UIDs Kolla fixes."""

from __future__ import annotations

import pytest

from tests.conftest import plan_of
from tests.helpers import pod_template

# From kolla/common/users.py at stable/2026.1 (uid == gid), not from components/mechanism/images.py.
KOLLA_UIDS = {"ansible": 42401, "keystone": 42425, "glance": 42415, "nova": 42436, "memcached": 42457}


@pytest.mark.parametrize(
    ("name", "kind", "user"),
    [
        ("keystone-db-init", "Job", "ansible"),  # kolla-toolbox
        ("glance-ks-user", "Job", "ansible"),
        ("keystone-api", "Deployment", "keystone"),
        ("glance-api", "Deployment", "glance"),
        ("nova-conductor", "Deployment", "nova"),
        ("memcached", "StatefulSet", "memcached"),
    ],
)
def test_pods_run_as_the_kolla_user_of_their_image(name: str, kind: str, user: str) -> None:
    security = pod_template(plan_of("dev").by_name(name, kind))["spec"]["securityContext"]
    uid = KOLLA_UIDS[user]
    assert (security["runAsUser"], security["runAsGroup"], security["fsGroup"]) == (uid, uid, uid)
