"""`--against`: the Certificates a change makes cert-manager issue again, and what each one's users do.

A Certificate whose spec changed (a name added, another issuer, a duration) is issued again by
cert-manager into the same Secret, as at each renewal. Nothing of the plan changes with it (the
program never sees a certificate), so Pulumi rolls nothing for it: what happens to the pods is
what each user of the Secret does when its files change. That is README's table "What each
consumer does when its certificate renews", here per user the plan has, so that a pull request
shows which pods a certificate change restarts (MariaDB's, by its operator) and which take the new
certificate hot. The lab measures the same on staging (`tls.rotation`, tests/lab/cloud/rotation.py).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from components.infrastructure import mariadb_tls
from tools.plan_diff import PlanView, changed_paths, show, template_of

MOUNTS = ("Deployment", "DaemonSet", "StatefulSet", "Job", "CronJob")
MOUNTED = (
    "no restart: the kubelet rewrites the mounted files within its sync period; uWSGI reloads on tls.crt "
    "(touch-reload), memcached's readiness probe sends refresh_certs, clients read the CA per connection"
)
MARIADB = "rolls: mariadb-operator replaces its pods one at a time, replicas first (the Secret's hash is on them)"
RABBITMQ = "no restart: Erlang's PEM cache takes the new files within ssl_pem_cache_clean (two minutes)"
GATEWAY = "no restart: the Gateway's implementation hands the new certificate to its proxies (Envoy over SDS)"
OUTSIDE = (
    "no object of the plan uses the Secret: what reads it outside the plan decides (a Gateway the stack "
    "attaches to, gateway.existing, takes its certificate without a restart; an installed chart's pods, "
    "e.g. Envoy Gateway's own certificates, as that chart does)"
)
BACKEND_TLS = "no restart: the gateway verifies backends with the new CA from its next connection"
CA_ISSUER = "signs with it: the certificates cert-manager issues from now on (those issued before are unchanged)"
BUNDLE_JOB = (
    "reads its ca.crt when it runs, into the bundle every pod trusts: the bundle changes only with the trusted CAs "
    "(tools/ca_rotation_view.py)"
)


def _mounted(obj: dict[str, Any]) -> set[str]:
    """The Secrets a workload's pods mount, directly or through a projected volume."""
    names = set()
    for volume in (template_of(obj).get("spec") or {}).get("volumes") or []:
        if "secret" in volume:
            names.add(volume["secret"].get("secretName"))
        for source in (volume.get("projected") or {}).get("sources") or []:
            if "secret" in source:
                names.add(source["secret"].get("name"))
    return names


def _referenced(obj: dict[str, Any]) -> tuple[set[str], str] | None:
    """The Secrets an operator's resource or a Gateway API object names, and what their change does."""
    spec = obj["inputs"].get("spec") or {}
    kind = obj["kind"]
    if kind == "MariaDB":
        return mariadb_tls.secrets_named(spec), MARIADB
    if kind == "RabbitmqCluster":
        tls = spec.get("tls") or {}
        return {str(tls[key]) for key in ("secretName", "caSecretName") if tls.get(key)}, RABBITMQ
    if kind == "Gateway":
        refs = [r for listener in spec.get("listeners") or [] for r in (listener.get("tls") or {}).get(
            "certificateRefs") or []]  # fmt: skip
        return {r["name"] for r in refs if r.get("kind", "Secret") == "Secret"}, GATEWAY
    if kind == "BackendTLSPolicy":
        # A ConfigMap of the CA bundle Job's is named as the trust Secret whose CA it holds (write_ca_bundle.py).
        refs = (spec.get("validation") or {}).get("caCertificateRefs") or []
        return {r["name"] for r in refs if r.get("kind") in ("Secret", "ConfigMap")}, BACKEND_TLS
    if kind == "Issuer" and "ca" in spec:
        return {str(spec["ca"].get("secretName"))}, CA_ISSUER
    if (
        kind == "Job"
    ):  # the bundle's writer reads the trust Secrets through the API (components/infrastructure/ca_rotation.py)
        env = {e.get("name"): e.get("value") for c in (template_of(obj).get("spec") or {}).get("containers") or []
               for e in c.get("env") or []}  # fmt: skip
        trusted = str(env.get("TRUSTED_CAS") or "").split()
        return ({item.partition("=")[0] for item in trusted}, BUNDLE_JOB) if trusted else None
    return None


def users(view: PlanView, namespace: str, secret: str) -> Iterator[dict[str, Any]]:
    """Each object of the plan that uses the Secret, and what it does when the Secret changes."""
    for obj in view.objects.values():
        if obj["namespace"] != namespace:
            continue
        if obj["kind"] in MOUNTS and secret in _mounted(obj):
            yield {"kind": obj["kind"], "name": obj["name"], "does": MOUNTED, "rolls": False}
            continue
        referenced = _referenced(obj)
        if referenced is not None and secret in referenced[0]:
            yield {"kind": obj["kind"], "name": obj["name"], "does": referenced[1], "rolls": referenced[1] == MARIADB}


def reissued(old: PlanView, new: PlanView) -> list[dict[str, Any]]:
    """The Certificates new or changed in `new`: cert-manager issues each again; who notices and how."""
    found = []
    for key, obj in sorted(new.objects.items()):
        if obj["kind"] != "Certificate":
            continue
        before = old.objects.get(key)
        spec = obj["inputs"].get("spec") or {}
        if before is None:
            why = "new"
        else:
            paths = changed_paths(before["inputs"].get("spec") or {}, spec)
            if not paths:
                continue
            why = "spec changed: " + ", ".join(show(p) for p in paths)
        secret = spec.get("secretName", "")
        using = list(users(new, obj["namespace"], secret))
        if not using:  # e.g. public-tls, where the stack attaches to a Gateway its owner keeps
            using = [{"kind": "outside the plan", "name": secret, "rolls": False, "does": OUTSIDE}]
        found.append({
            "certificate": obj["name"], "namespace": obj["namespace"], "secret": secret, "why": why,
            "users": using, "rolls": [f"{u['kind']}/{u['name']}" for u in using if u["rolls"]],
        })  # fmt: skip
    return found


def render(found: list[dict[str, Any]]) -> list[str]:
    """The diff.md section."""
    if not found:
        return []
    out = ["**Certificates cert-manager issues again** (Pulumi rolls nothing for them; what each user does)", ""]
    for entry in found:
        rolls = ", ".join(f"`{r}`" for r in entry["rolls"]) or "nothing"
        out.append(f"- `{entry['certificate']}` ({entry['why']}), Secret `{entry['secret']}`: restarts {rolls}")
        out += [f"  - {u['kind']} `{u['name']}`: {u['does']}" for u in entry["users"]]
    return [*out, ""]
