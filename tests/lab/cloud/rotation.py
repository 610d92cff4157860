"""Certificate renewal under load: every certificate of the plan renewed while clients call the APIs.

The issue's proof (report.json's `tls.rotation`, and `tls.ca_rotation`), on a stack with internal TLS,
after the user's scenario left a VM running:
1. Two clients call the APIs once a second (tests/lab/cloud/api_clients.py): the laptop through the
   gateway and the user's pod on the internal endpoints.
2. On a stack of the program's own CA (staging), the CA is rotated to its next generation in the
   phases a platform engineer goes through (tests/lab/cloud/ca_rotation.py): trust (the new CA in every
   bundle, the processes that read it once restarted), issue, and the rotation removed (the old CA
   dropped). The issue phase is the renewal: cert-manager issues every Certificate again, from the
   new CA, and renews the ones whose issuer did not change (the public one, the trust Certificates),
   as when they are due. Elsewhere the cert-manager stand-in renews every Certificate that is no CA.
   Either way a new key and certificate in the same Secret; then each consumer does what it does on
   a real cluster (README, "What each consumer does when its certificate renews"): the lab's API
   server and kubelet see the new Secret (the kubelet rewrites the pods' volumes after its sync
   period, subPath mounts excepted), the gateway's proxy takes its certificate hot as Envoy takes one
   over SDS (tests/lab/cloud/gateway.py), and mariadb-operator, whose pods carry the hashes of the
   Secrets its MariaDB names in `spec.tls`, replaces them one at a time. uWSGI, memcached and
   RabbitMQ are left to do what they do by themselves (touch-reload, the readiness probe's
   refresh_certs, Erlang's PEM cache): nothing of the lab plays them.
3. Every endpoint is probed until it serves its renewed certificate (its SHA-256 fingerprint), or
   until SETTLE_SECONDS, which is longer than the slowest consumer's own period (Erlang checks
   its PEM cache every two minutes).
4. The clients stop; each failed call is counted, and set against the restarts the consumers made
   (a single MariaDB server is down while the operator replaces its pod) and the rollouts of the CA
   rotation's applies. The VM survived when its
   QEMU process is the same and its console kept printing.

A root is not renewed here: cert-manager renews one after two thirds of its ten years, with a new key
that no bundle holds yet; the rotation is how it is replaced (README, "Rotating the internal CA").
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cryptography.hazmat.primitives import hashes

from components.infrastructure import mariadb_tls
from components.mechanism import internal_tls
from components.mechanism.oslo import KEYSTONE
from components.services.specs import public_routes
from tests.lab.cloud import endpoint_tls
from tests.lab.cloud.api_clients import Restart, judge, start_clients, stop_all
from tests.lab.cloud.ca_rotation import CaRotation, Phase, phases
from tests.lab.cloud.gateway import PROXY_NETNS
from tests.lab.cloud.vmsafety import survived, vm_signs

if TYPE_CHECKING:
    from components.settings.gateway import InternalTls
    from tests.lab.cloud.apiserver import LabApiServer
    from tests.lab.cloud.certmanager import Issued
    from tests.lab.cloud.deploy import Cloud
    from tests.lab.cloud.public_access import FrontDoor
    from tests.lab.cloud.userpod import UserPod
    from tools.plan import Plan

BASELINE_SECONDS = 10.0  # calls before the renewal: the clients work at all
SETTLE_SECONDS = 210.0  # Erlang's PEM cache period (120 s) after the kubelet's sync, with margin
POLL_SECONDS = 10.0
AFTER_SECONDS = 10.0  # calls once every endpoint serves its new certificate
# A failed call counts against a restart when it overlapped it: from the call's start to its end
# (tests/lab/cloud/api_clients.py judge).
READY_TIMEOUT = 300.0
ROOT_NOT_RENEWED = (
    "a CA: cert-manager renews a root after two thirds of its ten years, with a new key no bundle "
    'holds; the CA rotation replaces it (tls.ca_rotation, README "Rotating the internal CA")'
)


def fingerprint_of(chain_leaf: Any) -> str:
    return str(chain_leaf.fingerprint(hashes.SHA256()).hex())


@dataclass
class Rotation:
    door: FrontDoor
    cloud: Cloud
    api: LabApiServer
    user: UserPod
    python: Path
    ca_file: Path
    log: Callable[[str], None]
    restarts: list[Restart] = field(default_factory=list)  # the operators'
    rollouts: list[Restart] = field(default_factory=list)  # the CA rotation's applies' (tests/lab/cloud/apply.py)

    # -- what is served ----------------------------------------------------------------------------

    def _internal_endpoints(self) -> list[dict[str, Any]]:
        return endpoint_tls.endpoints(self.cloud.plan)

    def _public_endpoints(self) -> list[dict[str, Any]]:
        if self.door.laptop is None or self.door.proxy is None:
            return []
        keystone = next(r for r in public_routes(self.cloud.plan.settings) if r.host_key == KEYSTONE)
        return [{"name": f"gateway {keystone.hostname}:443", "host": keystone.hostname, "port": 443,
                 "protocol": "https"}]  # fmt: skip

    def served(self) -> dict[str, str | None]:
        """Each endpoint's served certificate fingerprint (None: no verified handshake, or no answer)."""
        log = self.cloud.out / "rotation-probe.log"
        gateway = PROXY_NETNS if self.door.proxy is not None else None
        runs = endpoint_tls.places(self.cloud, self.user, gateway)
        places = [(runs, self.ca_file, self._internal_endpoints())]
        if self.door.laptop is not None:
            laptop = {endpoint_tls.USER_POD: self.door.laptop.run}  # the public endpoint, from outside
            places.append((laptop, self.door.laptop.ca_file, self._public_endpoints()))
        found: dict[str, str | None] = {}
        for where, ca, wanted in places:
            try:
                facts = endpoint_tls.probe(self.cloud, where, self.python, ca, wanted, log)
            except endpoint_tls.ProbeError:
                facts = {}
            found |= {e["name"]: (facts.get(e["name"], {}).get("verified") or {}).get("fingerprint") for e in wanted}
        return found

    def _certificate_of(self, host: str) -> str | None:
        """The Certificate (namespace/name) whose names include the endpoint's host."""
        for certificate in self.door.certs.certificates:
            if host in (certificate["spec"].get("dnsNames") or []):
                return f"{certificate['metadata']['namespace']}/{certificate['metadata']['name']}"
        return None

    # -- the renewal and what the operators do -------------------------------------------------------

    def renew_all(self) -> tuple[dict[str, str], set[tuple[str, str]], dict[str, str]]:
        """Every Certificate that is no CA renewed and published (FrontDoor.renew): renewal_of them."""
        return self.renewal_of(self.renew_rest(set()), ROOT_NOT_RENEWED)

    def renew_rest(self, done: set[tuple[str, str]]) -> list[Issued]:
        """Every Certificate that is no CA and not in `done` (namespace, name) renewed and published."""
        return [
            self.door.renew(self.api, c["metadata"]["namespace"], c["metadata"]["name"])
            for c in self.door.certs.certificates
            if not c["spec"].get("isCA") and (c["metadata"]["namespace"], c["metadata"]["name"]) not in done
        ]

    def renewal_of(
        self, issued: list[Issued], why_not: str
    ) -> tuple[dict[str, str], set[tuple[str, str]], dict[str, str]]:
        """{namespace/name: its new leaf fingerprint}, the (namespace, Secret) renewed, the CAs not renewed, why."""
        renewed = {f"{i.namespace}/{i.certificate}": fingerprint_of(i.chain[0]) for i in issued}
        skipped = {f"{c['metadata']['namespace']}/{c['metadata']['name']}": why_not
                   for c in self.door.certs.certificates if c["spec"].get("isCA")}  # fmt: skip
        return renewed, {(i.namespace, i.name) for i in issued}, skipped

    def gateway_takes_its_certificate(self, secrets: set[tuple[str, str]]) -> list[str]:
        if self.door.proxy is None:
            return []
        swapped = self.door.proxy.renew(self.door.secret_data, secrets)
        self.log(f"gateway (stand-in): listeners {swapped} took their renewed certificate hot (Envoy's SDS)")
        return swapped

    def mariadb_operator_restarts(self, secrets: set[str]) -> None:
        """mariadb-operator watches the Secrets of spec.tls and hashes them into its pods' annotations, so a
        renewal of any of them replaces its pods at once, replicas first and the primary last
        (ReplicasFirstPrimaryLast); the new pods mount the renewed Secrets."""
        for workload in [w for w in self.cloud.workloads.values() if w.kind == "MariaDB"]:
            resource = self.cloud.plan.by_name(workload.name, "MariaDB").revealed
            touched = sorted(secrets & mariadb_tls.secrets_named(resource["spec"]))
            if not touched:
                continue
            for pod in sorted(workload.pods, key=lambda p: p.plan.index, reverse=True):  # the primary (0) last
                restart = Restart(pod.plan.name, f"mariadb-operator: Secrets {touched} renewed", time.time())
                self.restarts.append(restart)
                self.log(f"mariadb-operator (stand-in): replacing pod {pod.plan.name} ({restart.why})")
                self.cloud.delete_pod(pod.plan.name)
                new = next(p for p in workload.pods if p.plan.index == pod.plan.index)
                deadline = time.monotonic() + READY_TIMEOUT
                while not new.ready and time.monotonic() < deadline:
                    time.sleep(1)
                restart.ready_at = time.time() if new.ready else None
                self.log(f"mariadb-operator (stand-in): pod {new.plan.name} ready {new.ready}")

    # -- the CA rotation's phases --------------------------------------------------------------------

    def ca_apply(self, ca: CaRotation, phase: Phase) -> tuple[dict[str, Any], list[Issued]]:
        """A phase's `pulumi up` (CaRotation.apply); its rollouts count as restarts for the clients' calls."""
        facts, applied, issued = ca.apply(phase)
        self.rollouts += [Restart(ref, r.why, r.began, r.ended) for ref, r in applied.rolled.items()]
        return facts, issued

    def react(self, ca: CaRotation, issued: list[Issued], bundle_changed: bool) -> dict[str, Any]:
        """What follows the Secrets a phase changed on a cluster: the gateway takes the bundle's CAs for its
        backends, mariadb-operator replaces its pod for any Secret of its spec.tls, and the kubelet's sync
        brings the bundle to the lab's clients."""
        namespace = self.cloud.plan.settings.namespace
        touched = {i.name for i in issued if i.namespace == namespace} | (
            {internal_tls.CA_BUNDLE} if bundle_changed else set())  # fmt: skip
        backend = self.door.backend_cas_changed() if bundle_changed else []
        self.mariadb_operator_restarts(touched)
        if bundle_changed:
            ca.trusted_by_clients()
        return {"bundle": ca.bundle(), "gateway_backend_cas_swapped": backend}

    def ca_phase(self, ca: CaRotation, phase: Phase) -> dict[str, Any]:
        """A phase of the CA rotation but the renewal, and then whether every endpoint verifies with the bundle
        as the lab's clients now trust it (in the last phase: the new CA alone)."""
        started, restarts_before = time.monotonic(), len(self.restarts)
        facts, issued = self.ca_apply(ca, phase)
        facts |= self.react(ca, issued, facts["bundle_changed"])
        unverified = sorted(name for name, fingerprint in self.served().items() if fingerprint is None)
        seconds = round(time.monotonic() - started, 1)
        self.log(f"CA rotation: phase {phase.name} done in {seconds}s, unverified endpoints {unverified}")
        return {**facts, **_restarted(self.restarts[restarts_before:]), "verified_ok": not unverified,
                "unverified": unverified, "seconds": seconds}  # fmt: skip

    def settle(
        self, expected: Mapping[str, str], renewed_at: float
    ) -> tuple[dict[str, str | None], dict[str, float | None]]:
        """Probe until each endpoint serves its renewed certificate; the last fingerprints and the
        seconds from the renewal (time.monotonic() `renewed_at`) until each did (None: not within
        SETTLE_SECONDS of the first probe)."""
        started = time.monotonic()
        took: dict[str, float | None] = dict.fromkeys(expected, None)
        served: dict[str, str | None] = {}
        while True:
            served = self.served()
            for name, wanted in expected.items():
                if took[name] is None and served.get(name) == wanted:
                    took[name] = round(time.monotonic() - renewed_at, 1)
            if all(v is not None for v in took.values()) or time.monotonic() - started > SETTLE_SECONDS:
                return served, took
            time.sleep(POLL_SECONDS)


def prove(
    door: FrontDoor,
    cloud: Cloud,
    api: LabApiServer,
    user: UserPod,
    python: Path,
    ca_file: Path | None,
    admin: Mapping[str, str],
    server: Mapping[str, Any],
    log: Callable[[str], None],
    later_plan: Callable[[dict[str, Any]], Plan] | None = None,
) -> tuple[dict[str, Any], dict[str, Any]]:
    """report.json's `tls.rotation` and `tls.ca_rotation`; `later_plan(overrides)` is the lab's plan of the
    stack with settings changed (the rotation's phases), as the stack's file changed."""
    if ca_file is None:
        why = ("the stack keeps plain text inside the cluster (tls.internal plainText): no internal certificate to "
               "renew under load")  # fmt: skip
        return {"not_run": why}, {"not_run": why}
    if server.get("status") != "ACTIVE" or not server.get("instance_name"):
        why = "the user's scenario left no running VM to watch through the renewal"
        return {"not_run": why}, {"not_run": why}
    rotation = Rotation(door, cloud, api, user, python, ca_file, log)
    plans = phases(cloud.plan, later_plan) if later_plan is not None else None  # before the clients: seconds each
    ca = CaRotation(door, cloud, api, ca_file, log) if plans else None
    host, instance, server_id = server["host"], server["instance_name"], server["id"]
    signs_before = vm_signs(cloud, host, instance, server_id, deep=True)
    # Each endpoint and the Certificate it presents (the one whose names include its host).
    hosts = {e["name"]: e["host"] for e in [*rotation._internal_endpoints(), *rotation._public_endpoints()]}
    presents = {name: rotation._certificate_of(host) for name, host in hosts.items()}
    before = rotation.served()
    clients = start_clients(door, cloud, user, python, admin, server_id)
    calls: list[dict[str, Any]] = []
    ca_phases: dict[str, dict[str, Any]] = {}
    renewal_started = time.time() + BASELINE_SECONDS  # set again when it begins
    try:
        time.sleep(BASELINE_SECONDS)
        renewal_started = time.time()
        if ca is not None and plans is not None:
            ca_phases["trust"] = rotation.ca_phase(ca, plans[0])
        renewed_at, restarts_before = time.monotonic(), len(rotation.restarts)
        if ca is not None and plans is not None:  # the renewal: every Certificate again, from the new CA
            facts, issued = rotation.ca_apply(ca, plans[1])
            issued += rotation.renew_rest({(i.namespace, i.certificate) for i in issued})  # the rest, as when due
            renewed, secrets, skipped = rotation.renewal_of(issued, ROOT_NOT_RENEWED)
            ca_phases["issue"] = facts | rotation.react(ca, issued, facts["bundle_changed"])
        else:
            renewed, secrets, skipped = rotation.renew_all()
            rotation.mariadb_operator_restarts(
                {name for namespace, name in secrets if namespace == cloud.plan.settings.namespace}
            )
        swapped = rotation.gateway_takes_its_certificate(secrets)
        expected = {name: renewed[c] for name, c in presents.items() if c in renewed}
        served, took = rotation.settle(expected, renewed_at)
        renewal_restarts = rotation.restarts[restarts_before:]
        if ca is not None and plans is not None:
            unserved = sorted(name for name in expected if took.get(name) is None)
            seconds = round(time.monotonic() - renewed_at, 1)
            ca_phases["issue"] |= {**_restarted(renewal_restarts), "verified_ok": not unserved, "unverified": unserved,
                                   "seconds": seconds}  # fmt: skip
            ca_phases["done"] = rotation.ca_phase(ca, plans[2])
        time.sleep(AFTER_SECONDS)
    finally:
        calls = stop_all(clients)
    signs_after = vm_signs(cloud, host, instance, server_id, deep=True)
    vm_survived = survived(signs_before, signs_after, renewal_started)
    endpoints = {
        name: {"certificate": presents.get(name),
               "before": (before.get(name) or "")[:16], "after": (served.get(name) or "")[:16],
               "renewed_served": took.get(name) is not None if name in expected else None,
               "seconds": took.get(name)}
        for name in before
    }  # fmt: skip
    served_by_endpoint = {endpoints[n]["certificate"] for n in expected}
    result = judge(calls, [*rotation.restarts, *rotation.rollouts], renewal_started)
    renewed_ok = {key: (all(endpoints[n]["renewed_served"] for n in expected if endpoints[n]["certificate"] == key)
                        if key in served_by_endpoint else None) for key in renewed}  # fmt: skip
    ok = (
        bool(expected)
        and all(v is not False for v in renewed_ok.values())
        and result["calls_before_renewal"] > 0
        and result["failed_before_renewal"] == 0
        and result["failed_outside_restarts"] == 0
        and vm_survived
    )
    log(f"rotation: renewed {len(renewed)}, served {sum(1 for v in renewed_ok.values() if v)}, "
        f"calls {result['calls']}, failed {result['failed_calls']} ({result['failed_outside_restarts']} outside "
        f"restarts), VM survived {vm_survived}")  # fmt: skip
    vm = {"before": signs_before.as_dict(), "after": signs_after.as_dict()}
    renewal = {
        "ok": ok,
        # Per Certificate: its renewal served by every endpoint that presents it (None: presented by none,
        # e.g. MariaDB's client certificate, which only the operator's own clients use).
        "renewed": renewed_ok,
        "renewed_by": "the CA rotation's issue phase (tls.ca_rotation)" if ca_phases else "cert-manager's renewal",
        "not_renewed": skipped,
        "endpoints": endpoints,
        "gateway_listeners_swapped": swapped,
        "restarted": _restarted(renewal_restarts)["restarted"],
        **result,
        "vm_survived": vm_survived,
        "vm": vm,
    }
    return renewal, ca_verdict(ca_phases, result, vm_survived, cloud.plan.settings.tls.internal, plans)


def _restarted(restarts: list[Restart]) -> dict[str, Any]:
    return {"restarted": [{"pod": r.pod, "why": r.why, "seconds": round(r.ready_at - r.started, 1) if r.ready_at
                           else None} for r in restarts]}  # fmt: skip


def ca_verdict(
    found: dict[str, dict[str, Any]], calls: dict[str, Any], vm_survived: bool, now: InternalTls | None,
    plans: list[Phase] | None,
) -> dict[str, Any]:  # fmt: skip
    """`tls.ca_rotation`: each phase's facts, and whether the rotation went without an outage and did what
    `--against` predicted. `now` is the internal CA's settings once the rotation is done."""
    if plans is None:
        return {"not_run": "the stack's internal CA is not the program's own (tls.internal.issuer): the lab has no "
                "second CA of that issuer to rotate to"}  # fmt: skip
    first = plans[0].plan.settings.tls.internal
    trust, done = found.get("trust", {}), found.get("done", {})
    ok = (
        len(found) == 3
        and all(phase.get("verified_ok") and not phase.get("error") for phase in found.values())
        and all(phase.get("predicted_vs_actual", {}).get("matches") for phase in found.values())
        and len(trust.get("bundle", [])) == 2
        and len(done.get("bundle", [])) == 1
        and bool(trust.get("rolled"))
        and trust.get("rolled", {}).keys() == done.get("rolled", {}).keys()
        and not found.get("issue", {}).get("rolled")
        and calls["failed_outside_restarts"] == 0
        and vm_survived
    )
    return {
        "ok": ok,
        "from": first.generation - 1 if first is not None else None,
        "to": now.generation if now is not None else None,
        "phases": found,
        "calls": calls["calls"],
        "failed_calls": calls["failed_calls"],
        "failed_outside_restarts": calls["failed_outside_restarts"],
        "vm_survived": vm_survived,
    }
