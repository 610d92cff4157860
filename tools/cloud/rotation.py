"""Certificate renewal under load: every certificate of the plan renewed while clients call the APIs.

The issue's proof (report.json's `tls.rotation`), on a stack with internal TLS, after the user's
scenario left a VM running:
1. Two clients call the APIs once a second (tools/cloud/api_loop.py): the laptop through the
   gateway and the user's pod on the internal endpoints.
2. The cert-manager stand-in renews every Certificate that is no CA, as cert-manager does when one
   is due: a new key and certificate in the same Secret. Then each consumer does what it does on
   a real cluster (README, "What each consumer does when its certificate renews"): the lab's
   API server and kubelet see the new Secret (the kubelet rewrites the pods' volumes after its
   sync period, subPath mounts excepted), the gateway's proxy takes its certificate hot as Envoy
   takes one over SDS (tools/cloud/gateway.py), and mariadb-operator, whose pods carry the hashes
   of the Secrets its MariaDB names in `spec.tls`, replaces them one at a time. uWSGI, memcached
   and RabbitMQ are left to do what they do by themselves (touch-reload, the readiness probe's
   refresh_certs, Erlang's PEM cache): nothing of the lab plays them.
3. Every endpoint is probed until it serves its renewed certificate (its SHA-256 fingerprint), or
   until SETTLE_SECONDS, which is longer than the slowest consumer's own period (Erlang checks
   its PEM cache every two minutes).
4. The clients stop; each failed call is counted, and set against the restarts the consumers made
   (a single MariaDB server is down while the operator replaces its pod). The VM survived when its
   QEMU process is the same and its console kept printing.

CA Certificates are not renewed here: a CA renewal replaces the root that every bundle trusts, at
once, with no overlap of old and new (README: CA rotation is open), so it would break every
client by design rather than show what a renewal does.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cryptography.hazmat.primitives import hashes

from components import mariadb_tls
from components.oslo import KEYSTONE
from components.public_routes import public_routes
from tools.cloud import endpoint_tls
from tools.cloud.api_clients import Restart, judge, start_clients, stop_all
from tools.cloud.gateway import PROXY_NETNS
from tools.cloud.vmsafety import vm_signs

if TYPE_CHECKING:
    from tools.cloud.apiserver import LabApiServer
    from tools.cloud.deploy import Cloud
    from tools.cloud.public_access import FrontDoor
    from tools.cloud.userpod import UserPod

BASELINE_SECONDS = 10.0  # calls before the renewal: the clients work at all
SETTLE_SECONDS = 210.0  # Erlang's PEM cache period (120 s) after the kubelet's sync, with margin
POLL_SECONDS = 10.0
AFTER_SECONDS = 10.0  # calls once every endpoint serves its new certificate
# A failed call counts against a restart when it overlapped it: from the call's start to its end
# (tools/cloud/api_clients.py judge).
READY_TIMEOUT = 300.0


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
    restarts: list[Restart] = field(default_factory=list)

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
        """Every Certificate that is no CA renewed and published (FrontDoor.renew); returns {namespace/name:
        its new leaf's fingerprint}, the (namespace, Secret) renewed, and what was not renewed, with why."""
        renewed, secrets, skipped = {}, set(), {}
        for certificate in self.door.certs.certificates:
            meta, spec = certificate["metadata"], certificate["spec"]
            key = f"{meta['namespace']}/{meta['name']}"
            if spec.get("isCA"):
                skipped[key] = ("a CA: renewing it replaces the root every bundle trusts at once, with no overlap of "
                                "old and new (open: CA rotation)")  # fmt: skip
                continue
            issued = self.door.renew(self.api, meta["namespace"], meta["name"])
            renewed[key] = fingerprint_of(issued.chain[0])
            secrets.add((meta["namespace"], issued.name))
        return renewed, secrets, skipped

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
) -> dict[str, Any]:
    """report.json's `tls.rotation`."""
    if ca_file is None:
        return {"not_run": "the stack keeps plain text inside the cluster (tls.internal plainText): no internal "
                "certificate to renew under load"}  # fmt: skip
    if server.get("status") != "ACTIVE" or not server.get("instance_name"):
        return {"not_run": "the user's scenario left no running VM to watch through the renewal"}
    rotation = Rotation(door, cloud, api, user, python, ca_file, log)
    host, instance, server_id = server["host"], server["instance_name"], server["id"]
    pid_before, alive_before = vm_signs(cloud, host, instance, server_id)
    # Each endpoint and the Certificate it presents (the one whose names include its host).
    hosts = {e["name"]: e["host"] for e in [*rotation._internal_endpoints(), *rotation._public_endpoints()]}
    presents = {name: rotation._certificate_of(host) for name, host in hosts.items()}
    before = rotation.served()
    clients = start_clients(door, cloud, user, python, admin, server_id)
    calls: list[dict[str, Any]] = []
    try:
        time.sleep(BASELINE_SECONDS)
        renewal_started, renewed_at = time.time(), time.monotonic()
        renewed, secrets, skipped = rotation.renew_all()
        swapped = rotation.gateway_takes_its_certificate(secrets)
        rotation.mariadb_operator_restarts(
            {name for namespace, name in secrets if namespace == cloud.plan.settings.namespace}
        )
        expected = {name: renewed[c] for name, c in presents.items() if c in renewed}
        served, took = rotation.settle(expected, renewed_at)
        time.sleep(AFTER_SECONDS)
    finally:
        calls = stop_all(clients)
    pid_after, alive_after = vm_signs(cloud, host, instance, server_id)
    vm_survived = pid_before is not None and pid_after == pid_before and alive_after > alive_before
    endpoints = {
        name: {"certificate": presents.get(name),
               "before": (before.get(name) or "")[:16], "after": (served.get(name) or "")[:16],
               "renewed_served": took.get(name) is not None if name in expected else None,
               "seconds": took.get(name)}
        for name in before
    }  # fmt: skip
    served_by_endpoint = {endpoints[n]["certificate"] for n in expected}
    result = judge(calls, rotation.restarts, renewal_started)
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
    return {
        "ok": ok,
        # Per Certificate: its renewal served by every endpoint that presents it (None: presented by none,
        # e.g. MariaDB's client certificate, which only the operator's own clients use).
        "renewed": renewed_ok,
        "not_renewed": skipped,
        "endpoints": endpoints,
        "gateway_listeners_swapped": swapped,
        "restarted": {
            r.pod: {"why": r.why, "seconds": round(r.ready_at - r.started, 1) if r.ready_at else None}
            for r in rotation.restarts
        },
        **result,
        "vm_survived": vm_survived,
        "vm": {
            "qemu_pid_before": pid_before,
            "qemu_pid_after": pid_after,
            "alive_lines_before": alive_before,
            "alive_lines_after": alive_after,
        },
    }
