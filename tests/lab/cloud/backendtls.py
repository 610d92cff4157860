"""BackendTLSPolicy as the Gateway's implementation resolves it: which backends get TLS, trusting what.

Gateway API v1 (apis/v1/backendtlspolicy_types.go, standard since v1.4) and Envoy Gateway's
reading of it (internal/gatewayapi/backendtlspolicy.go):
- a policy applies to the Services its `targetRefs` name (group "", kind Service) in its own
  namespace; with a `sectionName`, only to the Service port of that name (Envoy Gateway maps the
  backendRef's port number to the port's name). A policy for the port wins over one for the whole
  Service; between equals the older one, then the first by namespace/name (the lab's objects have
  no creation time: namespace/name decides), and the others are `Conflicted`;
- `validation.hostname` is the SNI and the name the backend's certificate must carry;
- `validation.caCertificateRefs` are the only trust: a ConfigMap (core) or a Secret (Envoy
  Gateway's extension) of the policy's namespace, its key `ca.crt` (Envoy Gateway falls back to
  `tls.crt`, or to a lone key); several refs are concatenated;
- a reference that does not resolve (missing object, no CA in it, another kind) makes the policy
  not Accepted (NoValidCACertificate) and the route's backendRef invalid (Envoy Gateway:
  ResolvedRefs False, InvalidBackendTLS): "Connections using an invalid CACertificateRef MUST
  fail, and the client MUST receive an HTTP 5xx error response". The lab's gateway sends that
  backend nothing: fail closed, never plain text instead.
What this resolution does not implement (subjectAltNames, wellKnownCACertificates, options) fails
closed too, as a problem, rather than weaken the check. A backend that no policy targets is
spoken to in plain HTTP, as the spec says.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from cryptography import x509

Manifest = dict[str, Any]
GROUP = "gateway.networking.k8s.io"
CA_KEYS = ("ca.crt", "tls.crt")  # Envoy Gateway's order (getFirstMatchOrFirstFromData)
CA_KINDS = ("ConfigMap", "Secret")
SPEC_FIELDS = {"targetRefs", "validation"}
VALIDATION_FIELDS = {"caCertificateRefs", "hostname"}
ObjectLookup = Callable[[str, str, str], Mapping[str, str] | None]  # (kind, namespace, name) → data; None: none
PortName = Callable[[str, str, int], str | None]  # (namespace, Service, port) → the port's name


@dataclass(frozen=True)
class BackendTls:
    """TLS from the gateway to a backend: `ca` (PEM) its only trust, `hostname` its SNI and the name verified."""

    policy: str  # namespace/name
    hostname: str
    ca: str


@dataclass(frozen=True)
class _Policy:
    namespace: str
    name: str
    manifest: Manifest

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    def targets(self, namespace: str, service: str) -> list[str | None]:
        """The sectionNames with which it targets this Service (None: the whole Service)."""
        if namespace != self.namespace:
            return []
        refs = self.manifest.get("spec", {}).get("targetRefs") or []
        return [
            ref.get("sectionName")
            for ref in refs
            if ref.get("group", "") == "" and ref.get("kind") == "Service" and ref.get("name") == service
        ]


def _ca_text(data: Mapping[str, str]) -> str | None:
    for key in CA_KEYS:
        if key in data:
            return data[key]
    return next(iter(data.values())) if len(data) == 1 else None


@dataclass
class BackendTlsPolicies:
    """The policies of the cluster, resolved for the backends the routes send to."""

    manifests: Iterable[Manifest]
    lookup: ObjectLookup
    port_name: PortName
    status: dict[str, str] = field(default_factory=dict)  # namespace/name → Accepted, or why not
    _policies: list[_Policy] = field(default_factory=list)

    def __post_init__(self) -> None:
        for manifest in self.manifests:
            meta = manifest["metadata"]
            self._policies.append(_Policy(meta.get("namespace", "default"), meta["name"], manifest))
        self._policies.sort(key=lambda p: p.key)
        for policy in self._policies:
            self.status[policy.key] = "targets no backend of an attached route"

    def _chosen(self, namespace: str, service: str, port: int) -> _Policy | None:
        """The policy that applies to this Service port; the others targeting it are Conflicted."""
        section = self.port_name(namespace, service, port)
        for wanted in ([section] if section else []) + [None]:
            matching = [p for p in self._policies if wanted in p.targets(namespace, service)]
            if matching:
                for loser in matching[1:]:
                    self.status[loser.key] = f"Accepted False (Conflicted): {matching[0].key} takes precedence"
                return matching[0]
        return None

    def _resolve(self, policy: _Policy) -> BackendTls | str:
        """The policy's TLS settings, or why its backend gets no traffic."""
        spec = policy.manifest.get("spec") or {}
        validation = spec.get("validation") or {}
        unknown = sorted((set(spec) - SPEC_FIELDS) | (set(validation) - VALIDATION_FIELDS))
        if unknown:
            return f"{unknown} not implemented by the lab's gateway"
        hostname = validation.get("hostname")
        refs = validation.get("caCertificateRefs") or []
        if not hostname or not refs:
            return "validation.hostname and caCertificateRefs are required here"
        bundle = []
        for ref in refs:
            kind, name = ref.get("kind", ""), ref.get("name", "")
            if ref.get("group", "") != "" or kind not in CA_KINDS:
                return f"Accepted False (NoValidCACertificate), InvalidKind: {kind} {name}"
            data = self.lookup(kind, policy.namespace, name)
            if data is None:
                return f"Accepted False (NoValidCACertificate): {kind} {policy.namespace}/{name} does not exist"
            text = _ca_text(data)
            if not text:
                return f"Accepted False (NoValidCACertificate): {kind} {policy.namespace}/{name} has no ca.crt"
            try:
                x509.load_pem_x509_certificates(text.encode())
            except ValueError:
                return f"Accepted False (NoValidCACertificate): {kind} {policy.namespace}/{name}'s CA is no PEM"
            bundle.append(text if text.endswith("\n") else text + "\n")
        return BackendTls(policy.key, str(hostname), "".join(bundle))

    def for_backend(self, namespace: str, service: str, port: int) -> tuple[BackendTls | None, str]:
        """(TLS, "") for a backend a valid policy targets; (None, "") for one no policy targets (plain
        HTTP); (None, why) for one whose policy is invalid: it gets no traffic."""
        policy = self._chosen(namespace, service, port)
        if policy is None:
            return None, ""
        found = self._resolve(policy)
        if isinstance(found, str):
            self.status[policy.key] = found
            return None, f"BackendTLSPolicy {policy.key}: {found}"
        self.status[policy.key] = "Accepted"
        return found, ""


def no_policies() -> BackendTlsPolicies:
    """A cluster without BackendTLSPolicies: every backend in plain HTTP."""
    return BackendTlsPolicies((), lambda kind, namespace, name: None, lambda namespace, service, port: None)
