"""Names the program owns: a setting that names the user's Secret may not name one of the program's.

The list of owned names (components/cloud/owned_names.py) is held to the plans here: every Secret a
plan creates, and every Certificate's Secret (cert-manager writes it), in the stack's namespace, is
named there, so a new Secret cannot be added without it.
"""

from __future__ import annotations

from typing import Any

import pytest

from components.cloud.owned_names import owners
from components.settings.problems import PROJECT
from tests.conftest import plan_of
from tests.helpers import settings_problems
from tools.plan import Plan

FSID = "5c3f8a2e-7d41-4b9e-a6c0-2f1e9d8b7a63"
CEPH = {"external": {"fsid": FSID, "monitors": ["10.0.0.1"]}}
ROOK = {"rook": {"cluster": {"name": "ceph", "namespace": "rook-ceph"}}}
PUBLIC = {"issuer": {"kind": "ClusterIssuer", "name": "letsencrypt"}}
ROTATION = {"public": PUBLIC, "internal": {"selfSigned": True, "generation": 2, "rotation": {"phase": "trust"}}}
ISSUER_ROTATION = {
    "public": PUBLIC,
    "internal": {
        "issuer": {"kind": "ClusterIssuer", "name": "vault-2026"},
        "rotation": {"phase": "issue", "previousIssuer": {"kind": "ClusterIssuer", "name": "vault-2025"}},
    },
}
VARIANTS: list[tuple[str, dict[str, Any]]] = [
    ("dev", {}),
    ("staging", {}),
    ("prod", {}),
    ("staging", {"tls": ROTATION}),
    ("staging", {"tls": ISSUER_ROTATION}),
    ("prod", {"ceph": ROOK}),
]
S3 = {"bucket": "openstack-backups", "endpoint": "minio.storage.svc:9000"}


def _written(plan: Plan) -> set[str]:
    ns = plan.settings.namespace
    secrets = {r.k8s_name for r in plan.custom if r.kind == "Secret" and r.inputs["metadata"].get("namespace") == ns}
    certificates = {
        r.inputs["spec"]["secretName"]
        for r in plan.custom
        if r.kind == "Certificate" and r.inputs["metadata"].get("namespace") == ns
    }
    return {name for name in secrets | certificates if name}


@pytest.mark.parametrize(("stack", "changed"), VARIANTS)
def test_every_secret_a_plan_writes_in_its_namespace_is_an_owned_name(stack: str, changed: dict[str, Any]) -> None:
    plan = plan_of(stack, **changed)
    owner_of = owners(plan.settings)
    users = set()
    if plan.settings.ceph is not None:  # with Rook the keys Job fills the user's keyring Secrets
        clients = plan.settings.ceph.clients
        users = {c.keyring_secret for c in (clients.glance, clients.cinder, clients.cinder_backup, clients.nova) if c}
    written = _written(plan) - users
    assert len(written) > 10, written
    assert {name for name in written if owner_of(name) is None} == set()


@pytest.mark.parametrize(
    ("raw", "key"),
    [
        (
            {"ceph": {**CEPH, "clients": {"glance": {"keyringSecret": "mariadb-root"}}}},
            "ceph.clients.glance.keyringSecret",
        ),
        (
            {"ceph": {**ROOK, "clients": {"cinder": {"keyringSecret": "internal-ca"}}}},
            "ceph.clients.cinder.keyringSecret",
        ),
        (
            {"ceph": {**CEPH, "clients": {"cinder": {"keyringSecret": "keystone-fernet-keys"}}}},
            "ceph.clients.cinder.keyringSecret",
        ),
        (
            {"backup": {"storage": {"s3": {**S3, "credentials": "nova-etc"}}}},
            "backup.storage.s3.credentials",
        ),
    ],
)
def test_a_users_secret_named_as_one_of_the_programs_is_refused(raw: dict[str, Any], key: str) -> None:
    problems = settings_problems(raw)
    assert any(p.startswith(f"{PROJECT}:{key}: ") and "which the program writes" in p for p in problems), problems


def test_two_cephx_users_in_one_keyring_secret_are_refused() -> None:
    raw = {"ceph": {**CEPH, "clients": {"glance": {"keyringSecret": "keys"}, "cinder": {"keyringSecret": "keys"}}}}
    problems = settings_problems(raw)
    assert any("name one Secret for two cephx users" in p for p in problems), problems


def test_the_defaults_and_the_committed_stacks_name_no_owned_secret() -> None:
    for stack in ("dev", "staging", "prod"):
        plan_of(stack)  # parses with every check
    plan_of("prod", ceph=ROOK)  # the keys Job fills the user's keyring Secrets: still the user's names
