"""The stack's namespace is the user's: it may exist before the first `pulumi up`, and `pulumi destroy`
leaves it and the data in it.

A user creates the Ceph keyring and S3 key Secrets in it before deploying (README, Ceph), so a create
that refuses an existing namespace would stop the first `pulumi up` (pulumi-kubernetes creates
client-side and fails with AlreadyExists since pulumi/pulumi-kubernetes#4278). Deleting the
namespace would delete every claim in it, the database volumes and the backup claim included, which
the README promises to keep.
"""

from __future__ import annotations

import pytest

from tools.runtime import run_stack


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_the_namespace_is_patched_not_owned_and_every_claim_outlives_the_stack(stack: str) -> None:
    registrations = run_stack(stack)
    # The stack's own (both stack files keep the default name); an operator's the stack installs is apart.
    [namespace] = [r for r in registrations if r.kind == "Namespace" and r.k8s_name == "openstack"]
    # A patch resource: server-side apply creates the namespace if missing; its delete removes its fields only.
    assert namespace.type == "kubernetes:core/v1:NamespacePatch"
    assert namespace.inputs["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "privileged"
    claims = [r for r in registrations if r.kind == "PersistentVolumeClaim"]
    assert claims, "every stack keeps data in a claim of its own (the backup's at least)"
    assert [c.k8s_name for c in claims if not c.retain_on_delete] == []
