"""The internal CA's rotation in the lab: each phase's `pulumi up` applied to the running cloud.

A stack on the program's own CA (staging: tls.internal.selfSigned, generation 1) is rotated to the next
generation under the renewal's two client loops (tools/cloud/rotation.py), phase by phase, each phase
the stack's plan with `tls.internal` changed as a platform engineer changes the stack file
(components/internal_ca.py). What `pulumi up` and the cluster do with a phase's plan, here:
1. the Roles as the plan has them (the bundle Job's names the trusted CAs' Secrets), in the lab's API;
2. cert-manager (the lab's stand-in, tools/cloud/certmanager.py) issues each Certificate that is new or
   whose spec changed: the new root and its trust Certificate (trust), every Certificate from the new
   CA (issue, which is the renewal of tools/cloud/rotation.py);
3. the Job internal-ca-bundle, where its template changed, runs again (a pod of the lab running the
   plan's script against the lab's API server) and writes the trusted CAs into the bundle; then the
   Deployments whose template changed roll (Cloud.roll, maxSurge 1), as the graph orders them after
   it: the processes that read the CA once (components/ca_rotation.py);
4. what follows a changed bundle by itself on a cluster: mariadb-operator replaces MariaDB's pod (the
   bundle is a Secret of its spec.tls, rotation.py plays it), the gateway takes its BackendTLSPolicies'
   new CA hot (as Envoy Gateway does), the kubelet writes the bundle into every running pod's volume
   (Cloud.api_update_secret) and the lab's own clients' copy (`ca_file`, which the user's pod and the
   probes trust) once its sync period has passed.
Then every endpoint must verify with the bundle as it now is: in the last phase, with the new CA alone,
so none presents a certificate of the CA dropped.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cryptography import x509

from components import internal_tls
from tools.cloud.deploy import KUBELET_SYNC_SECONDS
from tools.plan import Plan
from tools.runtime import Registration

if TYPE_CHECKING:
    from tools.cloud.apiserver import LabApiServer
    from tools.cloud.certmanager import Issued
    from tools.cloud.deploy import Cloud
    from tools.cloud.public_access import FrontDoor

RBAC_KINDS = ("ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding")
JOB_TIMEOUT = 300.0
ROLL_TIMEOUT = 300.0
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


def _templates(plan: Plan, kind: str) -> dict[str, tuple[Registration, Any]]:
    found = {}
    for r in plan.custom:
        if r.kind == kind:
            spec = r.revealed["spec"]
            found[r.urn] = (r, spec.get("template"))
    return found


def changed(before: Plan, after: Plan, kind: str) -> list[Registration]:
    """The objects of `kind` whose pod template the later plan changes (what `pulumi up` rolls or replaces)."""
    old = _templates(before, kind)
    return [r for urn, (r, template) in _templates(after, kind).items() if urn in old and old[urn][1] != template]


def bundle_cas(cloud: Cloud) -> str:
    return (cloud.objects.get(("Secret", internal_tls.CA_BUNDLE)) or {}).get("ca.crt", "")


@dataclass
class CaRotation:
    door: FrontDoor
    cloud: Cloud
    api: LabApiServer
    ca_file: Path  # the lab's clients' copy of the bundle
    mariadb_restarts: Callable[[set[str]], None]  # mariadb-operator's part (tools/cloud/rotation.py)
    log: Callable[[str], None]
    current: Plan

    def apply(self, phase: Phase, renew_rest: Callable[[set[tuple[str, str]]], list[Issued]] | None = None,
              ) -> tuple[dict[str, Any], list[Issued]]:  # fmt: skip
        """One phase's `pulumi up` and what the cluster does with it; its facts, and the Certificates issued
        (with `renew_rest`: also every Certificate it did not issue, renewed as when due)."""
        started, plan = time.monotonic(), phase.plan
        self.log(f"CA rotation: phase {phase.name}")
        self.api.rbac_objects = [r.revealed for r in plan.custom if r.kind in RBAC_KINDS]
        issued = self.door.apply(self.api, [r.revealed for r in plan.custom])
        if renew_rest is not None:
            issued += renew_rest({(i.namespace, i.certificate) for i in issued})
        bundle_before = bundle_cas(self.cloud)
        jobs = changed(self.current, plan, "Job")
        job_seconds = None
        for job in jobs:  # the bundle's, the only Job a phase changes (components/ca_rotation.py)
            ran = self.cloud.replace_job(job, JOB_TIMEOUT)
            job_seconds = round((ran.job.finished_at or 0.0) - ran.job.started_at, 1) if ran.job else None
        written_at = time.monotonic()
        bundle_changed = bundle_cas(self.cloud) != bundle_before
        namespace = plan.settings.namespace
        touched = {i.name for i in issued if i.namespace == namespace} | (
            {internal_tls.CA_BUNDLE} if bundle_changed else set())  # fmt: skip
        backend = self.door.backend_cas_changed()
        rolled = self._roll(changed(self.current, plan, "Deployment"))
        self.mariadb_restarts(touched)
        if bundle_changed:  # the kubelet's sync, then the lab's clients' copy as a pod's volume would have it
            time.sleep(max(0.0, written_at + KUBELET_SYNC_SECONDS - time.monotonic()))
            write_atomically(self.ca_file, bundle_cas(self.cloud))
        unrolled = [f"{kind} {r.k8s_name or r.name}" for kind in ("StatefulSet", "DaemonSet")
                    for r in changed(self.current, plan, kind)]  # fmt: skip
        self.current = plan
        return {
            "changed_not_rolled": unrolled,  # the lab rolls Deployments only: none of these should change
            "issued": sorted(f"{i.namespace}/{i.certificate}" for i in issued),
            "jobs": {r.k8s_name or r.name: job_seconds for r in jobs},
            "bundle": _subjects(bundle_cas(self.cloud)),
            "bundle_changed": bundle_changed,
            "rolled": rolled,
            "gateway_backend_cas_swapped": backend,
            "seconds": round(time.monotonic() - started, 1),
        }, issued

    def _roll(self, deployments: list[Registration]) -> dict[str, float]:
        """Each Deployment's rolling update, all at once as the Deployment controller runs them (each its own
        pace); the seconds each took."""
        if not deployments:
            return {}
        with ThreadPoolExecutor(max_workers=len(deployments)) as pool:
            took = pool.map(lambda r: self.cloud.roll(r, ROLL_TIMEOUT), deployments)
            return {str(r.k8s_name or r.name): round(seconds, 1) for r, seconds in zip(deployments, took, strict=True)}


def _subjects(pem: str) -> list[str]:
    return [c.subject.rfc4514_string() for c in x509.load_pem_x509_certificates(pem.encode())] if pem else []


def write_atomically(path: Path, text: str) -> None:
    """As the kubelet swaps a volume's files: the new content under another name, then renamed over it."""
    staged = path.with_name(f".{path.name}.new")
    staged.write_text(text)
    os.replace(staged, path)
