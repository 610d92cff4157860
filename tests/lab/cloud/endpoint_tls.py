"""Do the endpoints inside the cluster speak TLS only? report.json's `tls.endpoints`, asked from the user's pod.

What the clients really sent is the packet capture's part (tests/lab/cloud/encryption.py, `tls.encrypted`);
this asks each server what it accepts.

Where the stack names an internal CA (tls.internal), every API Service of the plan, RabbitMQ's
amqps port and MariaDB's client port are tried from inside the cluster (tests/lab/cloud/tls_probe.py
in the user's pod: the cluster's network, its DNS names) by their Service's cluster name, and each
memcached server by its pod's name from a pod of memcached's clients (its NetworkPolicy admits no
other). An endpoint is encrypted when all three hold:
- a TLS handshake that trusts only the internal CA (ca.crt of the Secret internal-ca-bundle, as
  every pod of the cloud trusts it) and checks the Service's name succeeds (its protocol
  version, the certificate's subject, names and notAfter are recorded);
- the same handshake trusting only the machine's CA store fails on the certificate (so a client
  without the internal CA cannot be talked into trusting it, and verification means something);
- plain text gets nowhere: a plain HTTP request to an API's port, or AMQP's protocol header to
  amqps, gets no answer in that protocol; MariaDB, whose protocol starts in plain text and
  switches to TLS on the client's request, refuses a plain-text login with the root credentials
  that the same probe's TLS login was admitted with (require_secure_transport); memcached's
  `version` in plain text gets no `VERSION`.
What stays in plain text inside the cluster is listed in the report's `not_encrypted` with why, not left out.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from components.infrastructure import isolation
from components.infrastructure.front_door import plain_backends
from components.mechanism import internal_tls, oslo
from components.services.specs import public_routes
from tests.lab.cloud.pods import SyncedVolume
from tests.lab.cloud.userpod import isolated_command
from tools.plan import Plan
from tools.runtime import REPO

if TYPE_CHECKING:
    from components.settings.model import Settings
    from tests.lab.cloud.deploy import Cloud
    from tests.lab.cloud.userpod import UserPod

PROBE_TIMEOUT = 300
InCluster = Callable[..., subprocess.CompletedProcess[str]]  # UserPod.run: argv, then subprocess.run's keywords
# What the plan leaves in plain text inside the cluster besides the gateway's plain backends
# (components/infrastructure/front_door.py plain_backends), and why.
NOT_ENCRYPTED = {
    "rabbitmq-nodes": "Erlang distribution between RabbitMQ nodes (25672) is not on TLS (the operator's "
    "mtls-inter-node example needs an Erlang config of its own); only RabbitMQ's own pods reach it",
}
PLAIN_BACKEND = "the gateway reaches it in plain HTTP (no BackendTLSPolicy): it serves no internal certificate yet"


# Where each endpoint is probed from: a place its NetworkPolicy admits, as its clients are.
USER_POD, MEMCACHED_CLIENT_POD, GATEWAY = "user-pod", "memcached-client", "gateway"


def endpoints(plan: Plan) -> list[dict[str, Any]]:
    """What must be on TLS inside the cluster: each API's and Horizon's Service port, amqps, MariaDB's
    clients' port, each memcached server; `from`: where its NetworkPolicy lets a probe in."""
    settings = plan.settings
    gateway_only = {route.backend for route in public_routes(settings) if route.gateway_only}
    found = []
    for api in internal_tls.https_servers(settings):
        port = int(plan.by_name(api, "Service").revealed["spec"]["ports"][0]["port"])
        found.append({"name": f"{api}:{port}", "host": settings.service_host(api), "port": port, "protocol": "https",
                      "from": GATEWAY if api in gateway_only else USER_POD})  # fmt: skip
    port = oslo.rabbitmq_port(settings)
    found.append({"name": f"{oslo.RABBITMQ}:{port}", "host": settings.service_host(oslo.RABBITMQ), "port": port,
                  "protocol": "amqps", "from": USER_POD})  # fmt: skip
    database = oslo.database_service(settings)
    found.append({"name": f"{database}:{oslo.MARIADB_PORT}", "host": settings.service_host(database),
                  "port": oslo.MARIADB_PORT, "protocol": "mysql", "from": USER_POD})  # fmt: skip
    # Each memcached server by the name its clients use (they hash keys over the pods, not the Service).
    for server in oslo.memcached_servers(settings):
        host, number = server.rsplit(":", 1)
        found.append({"name": f"{host.split('.')[0]}:{number}", "host": host, "port": int(number),
                      "protocol": "memcached", "from": MEMCACHED_CLIENT_POD})  # fmt: skip
    return found


def not_encrypted(settings: Settings) -> dict[str, str]:
    """The plan's parts that speak plain text inside the cluster under internal TLS, and why."""
    return {**dict.fromkeys(sorted(plain_backends(settings, public_routes(settings))), PLAIN_BACKEND), **NOT_ENCRYPTED}


def _plain_refused(fact: Mapping[str, Any]) -> tuple[bool, str]:
    plain = fact.get("plain") or {}
    if fact["protocol"] != "mysql":
        if plain.get("answered"):
            return False, f"plain text answered in {fact['protocol'].removesuffix('s')} ({plain.get('first_bytes')})"
        return True, ""
    login = (fact.get("verified") or {}).get("login") or {}
    if login.get("answer") != "ok":
        return False, f"the TLS login with the same credentials failed too ({login}): the refusal proves nothing"
    if plain.get("answer") != "error":
        return False, f"a plain-text login was {plain.get('answer') or plain.get('error')}"
    return True, ""


def classify(fact: Mapping[str, Any]) -> dict[str, Any]:
    """One endpoint's verdict from the probe's facts: ok, and each failed condition's reason."""
    verified, system = fact.get("verified") or {}, fact.get("system_trust") or {}
    failed = []
    if not verified.get("ok"):
        failed.append(f"no TLS handshake verifying the internal CA and {fact['host']}: {verified.get('error')}")
    if not system.get("refused"):
        failed.append(f"a client with only the machine's CA store was not refused on the certificate: "
                      f"{system.get('error') or 'it was accepted'}")  # fmt: skip
    refused, why = _plain_refused(fact)
    if not refused:
        failed.append(why)
    shown = ("version", "cipher", "subject", "dns_names", "not_after", "fingerprint")
    tls = {k: verified[k] for k in shown if k in verified}
    return {
        "ok": not failed,
        "host": fact["host"],
        "port": fact["port"],
        "protocol": fact["protocol"],
        **tls,
        "system_trust_error": system.get("error", ""),
        "plain": {k: v for k, v in (fact.get("plain") or {}).items() if k != "message"},
        "failed": failed,
    }


def verdict(plan: Plan, facts: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """report.json's `tls.endpoints` from the probe's facts: per endpoint, and `encrypted_ok` for them all."""
    wanted = endpoints(plan)
    found = {e["name"]: classify(facts[e["name"]]) if e["name"] in facts else {"ok": False, "failed": ["not probed"]}
             for e in wanted}  # fmt: skip
    return {
        "encrypted_ok": bool(found) and all(e["ok"] for e in found.values()),
        "endpoints": found,
    }


def plain_text_stack(plan: Plan) -> dict[str, Any]:
    """A stack that keeps plain text inside the cluster says so: nothing to check."""
    return {"not_run": "the stack says tls.internal plainText: true: the APIs, RabbitMQ and MariaDB speak plain text "
            "inside the cluster (no internal CA to verify with)"}  # fmt: skip


class InternalCaMissingError(LookupError):
    pass


class ProbeError(RuntimeError):
    pass


def write_internal_ca(cloud: Cloud, directory: Path) -> Path | None:
    """ca.crt of the Secret internal-ca-bundle, which every pod of the cloud mounts at
    /etc/openstack-ca/ca.crt, as a file the lab's clients inside the cluster trust; None without internal TLS.
    It is a volume of the lab's user pod: the kubelet's sync writes it again when the bundle changes."""
    if not cloud.plan.settings.tls.internal_enabled:
        return None
    data = cloud.objects.get(("Secret", internal_tls.CA_BUNDLE)) or {}
    if not data.get("ca.crt"):
        why = "the Job internal-ca-bundle wrote no bundle (components/infrastructure/ca_rotation.py)"
        raise InternalCaMissingError(f"Secret {internal_tls.CA_BUNDLE} has no ca.crt: {why}")
    volume = SyncedVolume("Secret", internal_tls.CA_BUNDLE, directory / "internal-ca", (("ca.crt", "ca.crt", None),),
                          0o644, None)  # fmt: skip
    volume.write(data)
    cloud.lab_volumes.append(volume)
    return volume.target / "ca.crt"


def _root_credentials(cloud: Cloud) -> dict[str, str]:
    """The MariaDB root user's, from the Secret the MariaDB resource names (the administrator's view)."""
    resource = cloud.plan.by_name(oslo.MARIADB, "MariaDB").revealed
    ref = resource["spec"]["rootPasswordSecretKeyRef"]
    return {"MYSQL_USER": "root", "MYSQL_PASSWORD": cloud.objects[("Secret", ref["name"])][ref["key"]]}


def memcached_clients(settings: Settings) -> dict[str, str]:
    """The labels of the pods memcached's NetworkPolicy admits to its client port
    (components/infrastructure/isolation.py)."""
    [rule] = isolation.policies(settings)["memcached"]["ingress"]
    if "from" not in rule:
        return {}  # every source (host-network clients the plugin cannot tell apart): any pod
    selectors = [peer["podSelector"]["matchLabels"] for peer in rule["from"] if "podSelector" in peer]
    if not selectors:
        raise LookupError("memcached's NetworkPolicy admits no pods by their labels: nowhere to probe it from")
    return dict(selectors[0])


def places(cloud: Cloud, user: UserPod, gateway_netns: str | None) -> dict[str, InCluster]:
    """How to run a command from each place endpoints() names, with the user pod's resolver: the user's
    pod; a pod of a Deployment that memcached's NetworkPolicy admits (it admits no other); the
    gateway's proxy (Horizon's admits only it), where the stack has one."""
    admitted = memcached_clients(cloud.plan.settings)
    pods = sorted(
        (p for w in cloud.workloads.values() if w.kind == "Deployment" for p in w.active_pods),
        key=lambda p: p.plan.name,
    )
    pod = next((p for p in pods if p.ready and not p.plan.host_network and admitted.items() <= p.plan.labels.items()),
               None)  # fmt: skip
    if pod is None:
        raise LookupError(f"no ready pod of a Deployment labelled {admitted} to probe memcached from")

    def runner(netns: str) -> InCluster:
        def run(argv: list[str], **kwargs: Any) -> subprocess.CompletedProcess[str]:
            return subprocess.run(isolated_command(netns, user.state, argv), text=True, **kwargs)

        return run

    found = {USER_POD: user.run, MEMCACHED_CLIENT_POD: runner(f"pod-{pod.plan.name}")}
    if gateway_netns is not None:
        found[GATEWAY] = runner(gateway_netns)
    return found


def probe(
    cloud: Cloud, runs: Mapping[str, InCluster], python: Path, ca_file: Path, wanted: list[dict[str, Any]], log: Path
) -> dict[str, Any]:
    """The probe's facts for `wanted`, each endpoint probed from its `from` (`runs`: place → how to run a
    command there)."""
    # The credentials in the environment, not the command line; PATH also finds the user pod's `ip` and `unshare`.
    path = f"{python.parent}:/usr/sbin:/usr/bin:/sbin:/bin"
    env = {"PATH": path, "PYTHONPATH": str(REPO), **_root_credentials(cloud)}
    facts: dict[str, Any] = {}
    by_place: dict[str, list[dict[str, Any]]] = {}
    for endpoint in wanted:
        by_place.setdefault(endpoint.get("from", USER_POD), []).append(endpoint)
    for place, group in by_place.items():
        if place not in runs:  # before anything runs: a probe that cannot be complete is not started
            raise ProbeError(f"nowhere to probe {[e['name'] for e in group]} from: the lab has no {place}")
    for place, group in by_place.items():
        command = [str(python), "-m", "tests.lab.cloud.tls_probe", str(ca_file), json.dumps(group)]
        with log.open("a") as output:
            done = runs[place](command, env=env, cwd=REPO, stdout=subprocess.PIPE, stderr=output,
                               timeout=PROBE_TIMEOUT)  # fmt: skip
        try:
            facts |= json.loads(done.stdout.strip().splitlines()[-1])
        except (IndexError, json.JSONDecodeError):
            raise ProbeError(f"the probe exited {done.returncode} without facts; see {log}") from None
    return facts


def check(cloud: Cloud, runs: Mapping[str, InCluster], python: Path, ca_file: Path | None) -> dict[str, Any]:
    """The proof from inside the cluster, each endpoint from where its clients are (report.json's tls.endpoints)."""
    plan = cloud.plan
    if ca_file is None:
        return plain_text_stack(plan)
    log = cloud.out / "tls-probe.log"
    log.unlink(missing_ok=True)
    try:
        facts = probe(cloud, runs, python, ca_file, endpoints(plan), log)
    except ProbeError as error:
        return {"encrypted_ok": False, "error": str(error)}
    return verdict(plan, facts)
