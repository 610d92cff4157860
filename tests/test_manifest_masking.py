"""`make plan`'s manifests.yaml without --show-secrets: every secret masked where it sits, and every
object still a valid manifest of its kind (a masked Secret used to carry `stringData: '[secret]'`)."""

from __future__ import annotations

import kubernetes_validate
import pytest

from tests.conftest import plan_of
from tools import manifest_yaml, schemas
from tools.plan import manifests


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_masked_secrets_stay_valid_and_hide_every_value(stack: str) -> None:
    plan = plan_of(stack)
    shown = manifests(plan, reveal=False)
    version = f"{plan.settings.kubernetes_version}.0"
    secrets = [m for m in shown if m.get("kind") == "Secret"]
    assert secrets
    invalid = []
    for secret in secrets:
        try:
            schemas.validate(secret, version, strict=True)
        except kubernetes_validate.ValidationError as error:
            invalid.append(f"{secret['metadata']['name']}: {error.message}")
    assert invalid == []
    text = manifest_yaml.dump_all(shown)
    revealed = [m for m in manifests(plan, reveal=True) if m.get("kind") == "Secret"]
    values = {v for m in revealed for v in (m.get("stringData") or {}).values() if isinstance(v, str) and len(v) >= 12}
    assert values, "the revealed Secrets hold values"
    assert [v[:6] for v in values if v in text] == []
