"""The Gateway API as an implementation resolves it: which routes a Gateway's listeners take, what they serve.

From the plan's Gateway (dev) or, where the stack attaches to the cluster's Gateway (staging, prod:
`gateway.existing`), the Gateway its owner keeps as the README asks for it: the listener
`sectionName`, HTTPS on 443, terminating TLS with the stack's `public-tls` and taking HTTPRoutes of
every namespace. Resolution follows Gateway API v1's rules where the plan's objects use them: a
listener's certificate in another namespace needs a ReferenceGrant there (else the listener is
not programmed: ResolvedRefs False, RefNotPermitted); an HTTPRoute attaches to the listeners its
parentRefs name (every listener of the Gateway without sectionName) whose `allowedRoutes` admit
its namespace and kind, and whose hostname its own hostnames intersect; a backendRef is a Service
(and port) of the route's namespace, or of another one where a ReferenceGrant allows it (else
requests get 500, as the spec asks); a backend a BackendTLSPolicy targets is spoken to over TLS
as the policy says, and one whose policy is invalid gets no traffic (tests/lab/cloud/backendtls.py).
What the plan's routes use that this resolution does not implement (filters, header matches, TLS
passthrough) is a problem, not silently ignored.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from tests.lab.cloud.backendtls import BackendTls, BackendTlsPolicies, no_policies

Manifest = dict[str, Any]
GROUP = "gateway.networking.k8s.io"
NAMESPACE_NAME = "kubernetes.io/metadata.name"
RULE_FIELDS = {"matches", "backendRefs", "name", "timeouts"}
TIMEOUT_FIELDS = {"request"}
MATCH_FIELDS = {"path"}
DURATION = re.compile(r"([0-9]{1,5}(h|m|s|ms)){1,4}")  # GEP-2257's pattern, as the CRD validates it
DURATION_PART = re.compile(r"([0-9]{1,5})(ms|h|m|s)")
DURATION_UNITS = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 0.001}


@dataclass(frozen=True)
class Listener:
    name: str
    port: int
    protocol: str  # HTTPS or HTTP
    hostname: str | None
    certificates: tuple[tuple[str, str], ...]  # (namespace, Secret name)
    routes_from: str  # Same, All or Selector
    routes_selector: Mapping[str, str] = field(default_factory=dict)  # matchLabels of `Selector`


@dataclass(frozen=True)
class Gateway:
    name: str
    namespace: str
    listeners: tuple[Listener, ...]
    stand_in: str = ""  # why the lab plays it (the cluster's Gateway, not in the plan); "" for the plan's own


@dataclass(frozen=True)
class Backend:
    namespace: str
    service: str
    port: int
    weight: int = 1
    tls: BackendTls | None = None  # a BackendTLSPolicy's: TLS to it; None: plain HTTP


@dataclass(frozen=True)
class Rule:
    """One path match of a route and where it sends it; no backend: 500 (an invalid or refused backendRef)."""

    path_type: str  # PathPrefix or Exact
    path: str
    backends: tuple[Backend, ...]
    request_timeout: str | None = None  # timeouts.request (a GEP-2257 duration); None: the implementation's


@dataclass(frozen=True)
class AttachedRoute:
    name: str
    namespace: str
    hostnames: tuple[str, ...]
    listeners: tuple[str, ...]
    rules: tuple[Rule, ...]


@dataclass
class Programmed:
    """What the gateway serves: its listeners with their certificates, the routes attached, and problems."""

    gateway: Gateway
    listeners: list[Listener] = field(default_factory=list)  # those programmed (their refs resolved)
    routes: list[AttachedRoute] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    backend_tls: dict[str, str] = field(default_factory=dict)  # each BackendTLSPolicy: Accepted, or why not


def _spec_gateway(manifest: Manifest, stand_in: str = "") -> Gateway:
    meta, spec = manifest["metadata"], manifest["spec"]
    listeners = []
    for item in spec["listeners"]:
        tls = item.get("tls") or {}
        refs = tuple(
            (ref.get("namespace", meta["namespace"]), ref["name"])
            for ref in tls.get("certificateRefs") or []
            if ref.get("kind", "Secret") == "Secret" and ref.get("group", "") == ""
        )
        allowed = (item.get("allowedRoutes") or {}).get("namespaces") or {}
        selector = (allowed.get("selector") or {}).get("matchLabels") or {}
        listeners.append(Listener(item["name"], int(item["port"]), item["protocol"], item.get("hostname"), refs,
                                  allowed.get("from", "Same"), selector))  # fmt: skip
    return Gateway(meta["name"], meta["namespace"], tuple(listeners), stand_in)


def owners_gateway(name: str, namespace: str, listener: str, certificate: tuple[str, str]) -> Gateway:
    """The cluster's Gateway as the README asks its owner to keep it for the stack (a stand-in here)."""
    why = (
        f"the cluster's Gateway {namespace}/{name} (not in the plan) as the README asks its owner to keep it: "
        f"listener {listener}, HTTPS on 443, certificateRefs {certificate[0]}/{certificate[1]}, routes from All"
    )
    manifest = {
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"listeners": [{
            "name": listener, "protocol": "HTTPS", "port": 443,
            "tls": {"mode": "Terminate",
                    "certificateRefs": [{"kind": "Secret", "name": certificate[1], "namespace": certificate[0]}]},
            "allowedRoutes": {"namespaces": {"from": "All"}},
        }]},
    }  # fmt: skip
    return _spec_gateway(manifest, why)


def plan_gateway(resources: Iterable[Manifest]) -> Gateway | None:
    """The plan's own Gateway (the first: the program makes at most one)."""
    found = [r for r in resources if r.get("kind") == "Gateway" and r.get("apiVersion", "").startswith(GROUP)]
    return _spec_gateway(found[0]) if found else None


def _granted(grants: Iterable[Manifest], to_namespace: str, from_kind: str, from_namespace: str, to_kind: str,
             to_name: str) -> bool:  # fmt: skip
    """Does a ReferenceGrant in `to_namespace` let `from_kind` objects of `from_namespace` refer to this object?"""
    for grant in grants:
        if grant["metadata"].get("namespace") != to_namespace:
            continue
        spec = grant["spec"]
        takes_from = any(
            f.get("group") == GROUP and f.get("kind") == from_kind and f.get("namespace") == from_namespace
            for f in spec.get("from", [])
        )
        gives_to = any(
            t.get("group", "") == "" and t.get("kind") == to_kind and t.get("name", to_name) == to_name
            for t in spec.get("to", [])
        )
        if takes_from and gives_to:
            return True
    return False


def _host_matches(pattern: str, host: str) -> bool:
    if pattern.startswith("*."):
        return host.endswith(pattern[1:]) and host.count(".") >= pattern.count(".")
    return pattern == host


def _hostnames(listener: Listener, route_hosts: tuple[str, ...]) -> tuple[str, ...] | None:
    """The route's hostnames this listener serves (None: none, the route does not attach here)."""
    if listener.hostname is None:
        return route_hosts
    if not route_hosts:
        return (listener.hostname,)
    found = tuple(h for h in route_hosts if _host_matches(listener.hostname, h) or _host_matches(h, listener.hostname))
    return found or None


def _admits(listener: Listener, gateway: Gateway, route_namespace: str, namespace_labels: Mapping[str, str]) -> bool:
    if listener.routes_from == "All":
        return True
    if listener.routes_from == "Same":
        return route_namespace == gateway.namespace
    labels = {NAMESPACE_NAME: route_namespace, **namespace_labels}
    return all(labels.get(k) == v for k, v in listener.routes_selector.items())


def _rules(
    route: Manifest, grants: list[Manifest], problems: list[str], policies: BackendTlsPolicies
) -> tuple[Rule, ...]:
    meta, found = route["metadata"], []
    for rule in route["spec"].get("rules", []):
        unknown = set(rule) - RULE_FIELDS
        if unknown:
            problems.append(f"HTTPRoute {meta['name']}: {sorted(unknown)} not implemented by the lab's gateway")
        backends = []
        for ref in rule.get("backendRefs", []):
            namespace = ref.get("namespace", meta["namespace"])
            if ref.get("kind", "Service") != "Service" or ref.get("group", "") != "":
                problems.append(f"HTTPRoute {meta['name']}: backend {ref.get('kind')} {ref['name']} is not a Service")
                continue
            if namespace != meta["namespace"] and not _granted(
                grants, namespace, "HTTPRoute", meta["namespace"], "Service", ref["name"]
            ):
                problems.append(f"HTTPRoute {meta['name']}: Service {namespace}/{ref['name']} not granted (500)")
                continue
            tls, refused = policies.for_backend(namespace, ref["name"], int(ref["port"]))
            if refused:
                problems.append(f"HTTPRoute {meta['name']}: Service {namespace}/{ref['name']} gets no traffic "
                                f"(500), {refused}")  # fmt: skip
                continue
            backends.append(Backend(namespace, ref["name"], int(ref["port"]), int(ref.get("weight", 1)), tls))
        for match in rule.get("matches") or [{"path": {"type": "PathPrefix", "value": "/"}}]:
            if set(match) - MATCH_FIELDS:
                problems.append(f"HTTPRoute {meta['name']}: matches on {sorted(set(match) - MATCH_FIELDS)} not "
                                "implemented by the lab's gateway")  # fmt: skip
                continue
            path = match.get("path") or {"type": "PathPrefix", "value": "/"}
            request_timeout = _request_timeout(meta["name"], rule.get("timeouts") or {}, problems)
            found.append(Rule(path.get("type", "PathPrefix"), path.get("value", "/"), tuple(backends), request_timeout))
    return tuple(found)


def _request_timeout(route: str, timeouts: Mapping[str, str], problems: list[str]) -> str | None:
    if set(timeouts) - TIMEOUT_FIELDS:
        problems.append(f"HTTPRoute {route}: timeouts {sorted(set(timeouts) - TIMEOUT_FIELDS)} not implemented by "
                        "the lab's gateway")  # fmt: skip
    request = timeouts.get("request")
    if request is not None and duration_seconds(request) is None:
        problems.append(f"HTTPRoute {route}: timeouts.request {request!r} is no Gateway API duration (GEP-2257)")
        return None
    return request


def duration_seconds(duration: str) -> float | None:
    """A Gateway API duration (GEP-2257: up to four number-unit pairs of h, m, s, ms, e.g. 1h30m) in
    seconds; None when it is none."""
    match = DURATION.fullmatch(duration)
    if match is None:
        return None
    return sum(int(number) * DURATION_UNITS[unit] for number, unit in DURATION_PART.findall(duration))


def program(
    gateway: Gateway,
    routes: Iterable[Manifest],
    grants: Iterable[Manifest],
    namespace_labels: Mapping[str, Mapping[str, str]] | None = None,
    backend_tls: BackendTlsPolicies | None = None,
) -> Programmed:
    """What the Gateway serves, as its controller would program it (`backend_tls`: the cluster's
    BackendTLSPolicies; None: there are none)."""
    grants, labels = list(grants), namespace_labels or {}
    policies = backend_tls or no_policies()
    found = Programmed(gateway)
    for listener in gateway.listeners:
        if listener.protocol not in ("HTTPS", "HTTP"):
            found.problems.append(f"listener {listener.name}: {listener.protocol} is not implemented by the lab")
            continue
        refused = [
            f"{ns}/{name}" for ns, name in listener.certificates
            if ns != gateway.namespace and not _granted(grants, ns, "Gateway", gateway.namespace, "Secret", name)
        ]  # fmt: skip
        if refused:
            found.problems.append(f"listener {listener.name}: certificate {', '.join(refused)} not granted by a "
                                  "ReferenceGrant (RefNotPermitted): not programmed")  # fmt: skip
            continue
        if listener.protocol == "HTTPS" and not listener.certificates:
            found.problems.append(f"listener {listener.name}: HTTPS without a certificate: not programmed")
            continue
        found.listeners.append(listener)
    for route in routes:
        meta, spec = route["metadata"], route["spec"]
        hosts = tuple(spec.get("hostnames") or ())
        attached: list[str] = []
        served: list[str] = []
        for parent in spec.get("parentRefs", []):
            named = (parent.get("group", GROUP), parent.get("kind", "Gateway"), parent["name"])
            if (
                named != (GROUP, "Gateway", gateway.name)
                or parent.get("namespace", meta["namespace"]) != gateway.namespace
            ):
                continue
            for listener in found.listeners:
                if parent.get("sectionName") not in (None, listener.name):
                    continue
                if parent.get("port") not in (None, listener.port):
                    continue
                names = _hostnames(listener, hosts)
                route_labels = labels.get(meta["namespace"], {})
                if names is None or not _admits(listener, gateway, meta["namespace"], route_labels):
                    continue
                attached.append(listener.name)
                served += [n for n in names if n not in served]
        if not attached:
            found.problems.append(f"HTTPRoute {meta['namespace']}/{meta['name']}: attached to no listener of "
                                  f"{gateway.namespace}/{gateway.name} (Accepted False)")  # fmt: skip
            continue
        rules = _rules(route, grants, found.problems, policies)
        found.routes.append(AttachedRoute(meta["name"], meta["namespace"], tuple(served), tuple(attached), rules))
    found.backend_tls = dict(policies.status)
    return found
