"""The internal CA's rotation in the lab: each phase's `pulumi up` applied to the running cloud.

A stack on the program's own CA (staging: tls.internal.selfSigned, generation 1) is rotated to the next
generation under the renewal's two client loops (tests/lab/cloud/rotation.py), phase by phase, each phase
the stack's plan with `tls.internal` changed as a platform engineer changes the stack file
(components/mechanism/internal_ca.py). Each phase's plan is applied by tests/lab/cloud/apply.py, as every changed
plan is: the engine's steps in graph order (the Role, the Job `internal-ca-bundle` replaced and run
again as a pod of the lab against the lab's API server, the Deployments whose template changed rolled
by their strategy: the processes that read the CA once, components/infrastructure/ca_rotation.py), with the
cert-manager stand-in watching the steps (tests/lab/cloud/certmanager.py: it issues each Certificate
created or changed: the new root and its trust Certificate at trust, every Certificate from the new CA
at issue, which is the renewal of tests/lab/cloud/rotation.py). What else follows a changed Secret on a
cluster is played after the apply (tests/lab/cloud/rotation.py `react`): mariadb-operator replaces
MariaDB's pod (the bundle is a Secret of its spec.tls), the gateway takes its BackendTLSPolicies' new
CA (as Envoy Gateway does), and the kubelet's sync writes the bundle into the running pods' volumes and
the user pod's (tests/lab/cloud/deploy.py kubelet_resync), which the lab's clients trust.
What `--against` predicted for the phase (tools/views.py diff_result) is set against what the apply
did (tests/lab/cloud/prediction.py). Then every endpoint must verify with the bundle as it now is: in the
last phase, with the new CA alone, so none presents a certificate of the CA dropped.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cryptography import x509

from components.mechanism import internal_tls
from tests.lab.cloud.apply import Applied, apply
from tests.lab.cloud.deploy import KUBELET_SYNC_SECONDS
from tests.lab.cloud.engine import Step
from tests.lab.cloud.prediction import not_compared, predicted_vs_actual
from tools import plan_diff, views
from tools.plan import Plan
from tools.runtime import Registration

if TYPE_CHECKING:
    from tests.lab.cloud.apiserver import LabApiServer
    from tests.lab.cloud.certmanager import Issued
    from tests.lab.cloud.deploy import Cloud
    from tests.lab.cloud.public_access import FrontDoor

CERT_MANAGER_KINDS = ("Certificate", "Issuer", "ClusterIssuer")
# Phases, each with what it asks of tls.internal.rotation (None: the rotation removed, done).
PHASES: tuple[tuple[str, str | None], ...] = (("trust", "trust"), ("issue", "issue"), ("done", None))


@dataclass(frozen=True)
class Phase:
    name: str
    plan: Plan


def phases(plan: Plan, build: Callable[[dict[str, Any]], Plan]) -> list[Phase] | None:
    """The plans of a rotation to the next generation of the program's CA; None where the stack has none
    (another issuer's CA: the lab has no second one), or is in a rotation already."""
    internal = plan.settings.tls.internal
    if internal is None or not internal.self_signed or internal.rotation is not None:
        return None
    tls = plan.settings.tls.model_dump(mode="json", by_alias=True, exclude_none=True)
    found = []
    for name, asked in PHASES:
        rotation = {"rotation": {"phase": asked}} if asked else {}
        changed = {**tls, "internal": {"selfSigned": True, "generation": internal.generation + 1, **rotation}}
        found.append(Phase(name, build({"tls": changed})))
    return found


def bundle_cas(cloud: Cloud) -> str:
    return (cloud.objects.get(("Secret", internal_tls.CA_BUNDLE)) or {}).get("ca.crt", "")


@dataclass
class CaRotation:
    door: FrontDoor
    cloud: Cloud
    api: LabApiServer
    ca_file: Path  # the user pod's copy of the bundle (tests/lab/cloud/endpoint_tls.py write_internal_ca)
    log: Callable[[str], None]

    def apply(self, phase: Phase) -> tuple[dict[str, Any], Applied, list[Issued]]:
        """One phase's `pulumi up` with cert-manager watching; its facts, the apply's record, and the
        Certificates cert-manager issued. What follows a changed Secret is the caller's (`react`)."""
        plan = phase.plan
        self.log(f"CA rotation: phase {phase.name}")
        diff = views.diff_result(plan_diff.view_of(self.cloud.plan), plan)
        (self.cloud.out / f"ca-rotation-{phase.name}-diff.json").write_text(json.dumps(diff, indent=1) + "\n")
        skipped = not_compared(self.cloud)
        issued: list[Issued] = []
        resources = [r.revealed for r in plan.custom]

        def cert_manager(r: Registration, step: Step) -> None:
            # Its watch sees the new or changed objects; it issues what they now ask, in its issuers' order.
            if r.kind in CERT_MANAGER_KINDS and step.op in ("create", "update", "replace"):
                issued.extend(self.door.apply(self.api, resources))

        bundle_before = bundle_cas(self.cloud)
        applied = apply(self.cloud, plan, self.log, watchers=[cert_manager])
        issued += self.door.apply(self.api, resources)  # the removed ones: their Secrets stay
        check = predicted_vs_actual(diff, applied, {**skipped, **not_compared(self.cloud)})
        return (
            {
                "error": applied.error,
                "issued": sorted(f"{i.namespace}/{i.certificate}" for i in issued),
                "jobs": dict(applied.jobs_run),
                "rolled": {ref: r.as_dict()["seconds"] for ref, r in sorted(applied.rolled.items())},
                "bundle_changed": bundle_cas(self.cloud) != bundle_before,
                "predicted_vs_actual": check,
                "apply_seconds": round(applied.seconds, 1),
            },
            applied,
            issued,
        )

    def trusted_by_clients(self) -> None:
        """Wait for the kubelet's sync to bring the bundle as it now is into the user pod's copy, which the
        lab's clients trust (a little past the sync period: raise if it did not)."""
        deadline = time.monotonic() + 2 * KUBELET_SYNC_SECONDS
        while self.ca_file.read_text() != bundle_cas(self.cloud):
            if time.monotonic() > deadline:
                raise RuntimeError(f"{self.ca_file}: the kubelet's sync did not bring the new bundle")
            time.sleep(1.0)

    def bundle(self) -> list[str]:
        return subjects(bundle_cas(self.cloud))


def subjects(pem: str) -> list[str]:
    return [c.subject.rfc4514_string() for c in x509.load_pem_x509_certificates(pem.encode())] if pem else []
