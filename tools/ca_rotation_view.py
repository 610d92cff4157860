"""`--against`: what a change of the internal CAs does, phase by phase (components/infrastructure/ca_rotation.py).

Between two plans it reads the trusted CAs and the issuing one from each plan's settings
(components/mechanism/internal_ca.py) and says what this `pulumi up` does to them: a CA added to every
bundle, every certificate issued again from another CA, a CA dropped. For each, who does what:
the Job that writes the bundle runs again, the pods that read the CA file once roll (the program
restarts them through their template), MariaDB's operator replaces its pods (the bundle is a
Secret it watches), RabbitMQ and the gateway take the new bundle without a restart, every other
client reads it at its next connection. A step that skips a phase is a warning: it breaks
connections (a CA issuing before the clients trust it, or dropped while servers still present
its certificates).
"""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from components.infrastructure.ca_rotation import BUNDLE_JOB, TRUSTED_CAS
from components.mechanism import internal_tls
from components.mechanism.internal_ca import CaPhase, ca_phase
from components.settings.gateway import InternalTls
from tools.certificate_impact import MOUNTS, users
from tools.plan_diff import WORKLOADS, PlanView, template_of


def _cas(view: PlanView) -> CaPhase | None:
    internal = ((view.settings.get("tls") or {}).get("internal")) or None
    if internal is None:
        return None
    try:  # an older plan.json lacks the rotation's keys: their defaults, no rotation
        settings = InternalTls.model_validate({k: v for k, v in internal.items() if v is not None}, by_alias=True)
    except ValidationError:
        return None
    return ca_phase(settings) if settings.enabled else None


def _marker(view: PlanView, key: str) -> str | None:
    obj = view.objects.get(key)
    return ((template_of(obj).get("metadata") or {}).get("annotations") or {}).get(TRUSTED_CAS) if obj else None


def _restarted(old: PlanView, new: PlanView) -> list[str]:
    """The workloads the program rolls because the trusted CAs they read once changed."""
    return sorted(
        f"{obj['kind']}/{obj['name']}"
        for key, obj in new.objects.items()
        if obj["kind"] in WORKLOADS and _marker(old, key) != _marker(new, key)
    )


def _bundle_users(new: PlanView, namespace: str, trusts: list[str]) -> list[str]:
    """What the data stores and the gateway do with a new bundle (its users beyond the pods), one line per kind:
    those of the bundle Secret, and the BackendTLSPolicies of the trusted CAs' ConfigMaps the Job also writes."""
    by_kind: dict[tuple[str, str], list[str]] = {}
    found = [*users(new, namespace, internal_tls.CA_BUNDLE), *(u for t in trusts for u in users(new, namespace, t))]
    for user in found:
        if user["kind"] not in MOUNTS and user["kind"] != "Job":
            names = by_kind.setdefault((user["kind"], user["does"]), [])
            if f"`{user['name']}`" not in names:
                names.append(f"`{user['name']}`")
    return [f"{kind} {', '.join(sorted(names))}: {does}" for (kind, does), names in by_kind.items()]


def change(old: PlanView, new: PlanView) -> dict[str, Any] | None:
    """The internal CA change between the plans; None when their CAs are the same (or there are none)."""
    before, after = _cas(old), _cas(new)
    if after is None or before == after:
        return None
    namespace = new.settings.get("namespace", "openstack")
    was = [ca.shown for ca in before.trusted] if before else []
    now = [ca.shown for ca in after.trusted]
    steps, warnings = [], []
    added, dropped = [c for c in now if c not in was], [c for c in was if c not in now]
    restarted = _restarted(old, new)
    if added or dropped:
        said = "; ".join([*(f"adds {c}" for c in added), *(f"drops {c}" for c in dropped)])
        steps.append(
            f"the trusted CAs become {', '.join(now)} ({said}): Job `{BUNDLE_JOB}` runs again and writes them into "
            f"Secret `{internal_tls.CA_BUNDLE}`, before any pod that mounts it rolls; the processes that read it "
            f"once roll (their template carries the trusted CAs): {', '.join(f'`{r}`' for r in restarted) or 'none'}; "
            "every other client reads the bundle at its next connection"
        )
        steps += _bundle_users(new, namespace, [ca.trust for ca in after.trusted])
    if before is None or before.signer != after.signer:
        steps.append(f"{after.signer.shown} issues every certificate from now on: cert-manager issues each one again "
                     "(below), and each server takes its new one as at a renewal; drop the previous CA only once every "
                     "server presents its new certificate (README, \"Rotating the internal CA\")")  # fmt: skip
        if after.signer.shown not in was:
            warnings.append(
                f"{after.signer.shown} issues before every bundle trusts it: until the Job has written the bundle and "
                f"the pods that read it once have restarted, clients refuse the servers' new certificates. Add it "
                f"first (tls.internal.rotation.phase: trust), then issue"
            )
    if before is not None and before.signer.shown in dropped:
        warnings.append(
            f"drops {before.signer.shown}, which issued the certificates the servers present until now: clients "
            "refuse each one until cert-manager has issued it again and the server has reloaded. Issue from the new "
            "CA first (phase: issue), wait until every server presents its new certificate, then drop it"
        )
    gone = [ca.root for ca in (before.trusted if before else ()) if ca.root and ca.root not in after.roots]
    if gone:
        steps.append(f"the program deletes the root(s) {', '.join(gone)} and their Issuers; cert-manager keeps each "
                     "root's Secret, which holds its key: delete it (`kubectl delete secret <root>`)")  # fmt: skip
    return {
        "trusted": {"before": was, "after": now},
        "issuer": {"before": before.signer.shown if before else None, "after": after.signer.shown},
        "phase": after.phase,
        "steps": steps,
        "restarted": restarted,
        "warnings": warnings,
    }


def render(found: dict[str, Any] | None) -> list[str]:
    """The diff.md section."""
    if not found:
        return []
    phase = f" (rotation phase `{found['phase']}`)" if found["phase"] else ""
    out = [f"**Internal CA**{phase}: trusted {', '.join(found['trusted']['before']) or 'none'} → "
           f"{', '.join(found['trusted']['after'])}; issuing {found['issuer']['before']} → "
           f"{found['issuer']['after']}", ""]  # fmt: skip
    out += [f"- Warning: {w}" for w in found["warnings"]]
    out += [f"- {s}" for s in found["steps"]]
    return [*out, ""]
