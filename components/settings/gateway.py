"""The settings of the cloud's front door: `gateway` (where the public hosts are routed) and `tls`
(who issues the certificate the gateway serves them with).

`gateway` names an existing Gateway of the cluster (`existing`), or a GatewayClass for a
Gateway the program creates (`className`); `gateway.envoyGateway` may install that class's
implementation. `tls.public` names the cert-manager Issuer or ClusterIssuer of the public
certificate, or asks for a self-signed CA of the program's own (dev, tests). Without `gateway`
the program routes nothing: the catalog's public URLs are then someone else's to serve.

Separate CAs for public, internal and libvirt traffic: `tls.internal` names the CA of the
certificates the APIs serve inside the cluster (or `plainText: true`, said in the stack file,
keeps them on http: dev), required with a gateway, which reaches them too; `tls.libvirt` the
CA of the hypervisors' migrations and consoles (components/nodes/libvirt_tls.py). The settings refuse
one issuer for two of them.
`tls.internal.rotation` replaces the internal CA in phases (components/infrastructure/ca_rotation.py); what its
settings contradict is checked here, with them.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Literal

from pydantic import Field, model_validator

from components.settings.base import Model
from components.settings.problems import Problem, problem
from components.settings.value_types import (
    Count,
    DnsLabel,
    DnsSubdomain,
    LabelMap,
    TaggedChartVersion,
    admission_policy_problems,
)

if TYPE_CHECKING:
    from components.settings.model import Settings

# The Secret whose ca.crt every client trusts, and the Job that writes it (components/infrastructure/ca_rotation.py):
# here because the settings' checks name the Job.
CA_BUNDLE = "internal-ca-bundle"

# Where Envoy Gateway's chart is installed in its documentation (and openstack-helm's), and where
# it runs the proxies of every Gateway in its default deploy mode (ControllerNamespace).
ENVOY_GATEWAY_NAMESPACE = "envoy-gateway-system"
# The labels Envoy Gateway puts on every proxy pod (internal/infrastructure/kubernetes/proxy
# resource.go, EnvoyAppLabel): how the NetworkPolicies know them when the stack installs it.
ENVOY_PROXY_LABELS = {
    "app.kubernetes.io/name": "envoy",
    "app.kubernetes.io/component": "proxy",
    "app.kubernetes.io/managed-by": "envoy-gateway",
}


class ExistingGateway(Model):
    """A Gateway of the cluster (its owner's: often one per cluster) that the routes attach to."""

    name: DnsSubdomain
    namespace: DnsLabel
    section_name: DnsSubdomain | None = Field(
        None, description="the listener the routes attach to (its name); unset: every listener that admits them"
    )


class EnvoyGateway(Model):
    """Envoy Gateway's Helm chart (oci://docker.io/envoyproxy/gateway-helm), installed like the operators."""

    install: bool = Field(False, description="true: install it for the Gateway of className; false: the cluster's own")
    # The latest release when this was written; openstack-helm's guide installs v1.7.0.
    chart_version: TaggedChartVersion = "v1.9.0"


class GatewayProxies(Model):
    """Where the gateway's proxy pods run: the NetworkPolicies of what only the gateway may reach admit them."""

    namespace: DnsLabel = Field(
        ENVOY_GATEWAY_NAMESPACE,
        description="their namespace (Envoy Gateway's own by default; some implementations use the Gateway's)",
    )
    labels: LabelMap = Field(
        default_factory=dict,
        description="their labels; unset: every pod of the namespace (Envoy Gateway's proxy labels when installed)",
    )


class Gateway(Model):
    existing: ExistingGateway | None = None
    class_name: DnsSubdomain | None = Field(
        None, description="the GatewayClass of a Gateway the program creates (one HTTPS listener on 443)"
    )
    envoy_gateway: EnvoyGateway = EnvoyGateway()
    proxies: GatewayProxies = GatewayProxies()

    @model_validator(mode="after")
    def _one_gateway(self) -> Gateway:
        if (self.existing is None) == (self.class_name is None):
            raise ValueError(
                "set existing ({name, namespace, sectionName}: a Gateway of the cluster the routes attach to) or "
                "className (the program creates a Gateway of that GatewayClass), exactly one of them"
            )
        if self.existing is not None and self.envoy_gateway.install:
            raise ValueError(
                "envoyGateway.install installs the implementation of the Gateway the program creates (className); "
                "an existing Gateway runs on the cluster's own: set install: false"
            )
        if self.class_name is not None and not self.envoy_gateway.install and "proxies" not in self.model_fields_set:
            # The proxies' namespace defaults to Envoy Gateway's: under another implementation the
            # NetworkPolicies would admit the wrong pods, and Horizon and the console go unreachable.
            raise ValueError(
                f"className {self.class_name!r} is the cluster's own implementation (envoyGateway.install is false), "
                "so the program cannot tell where its proxy pods run: set proxies ({namespace, labels}: where that "
                "implementation runs the Gateway's pods), or envoyGateway.install: true for Envoy Gateway"
            )
        return self

    def proxy_labels(self) -> dict[str, str]:
        """The labels that tell the gateway's proxies: the stack's word, else Envoy Gateway's if it installs it."""
        if self.proxies.labels:
            return dict(self.proxies.labels)
        return dict(ENVOY_PROXY_LABELS) if self.envoy_gateway.install else {}


class IssuerRef(Model):
    """A cert-manager issuer: an Issuer in the stack's namespace or a ClusterIssuer."""

    kind: Literal["Issuer", "ClusterIssuer"]
    name: DnsSubdomain


class IssuedCa(Model):
    """Who signs a kind of certificate: an issuer the stack names, or a self-signed CA of the program."""

    issuer: IssuerRef | None = None
    self_signed: bool = Field(
        False, description="a self-signed root and a CA Issuer of the program's own: for dev and tests"
    )

    @model_validator(mode="after")
    def _one_issuer(self) -> IssuedCa:
        if (self.issuer is not None) == self.self_signed:
            raise ValueError(
                f"name the issuer of the {self._signs()}, issuer: {{kind: Issuer or ClusterIssuer, name}}, or set "
                "selfSigned: true for a CA of the program's own (dev, tests), exactly one of them"
            )
        return self

    def _signs(self) -> str:
        return "certificates"


class PublicTls(IssuedCa):
    """The public listener's certificate: from the stack's issuer, or from a self-signed CA of the program."""

    def _signs(self) -> str:
        return "public certificate"


class CaRotation(Model):
    """A replacement of the internal CA under way: the CA being replaced stays in every bundle beside
    the new one (`issuer`, or `generation` of the program's own) until this is removed."""

    phase: Literal["trust", "issue"] = Field(
        description="trust: every bundle holds both CAs, the previous one still issues; issue: the new CA issues "
        "every certificate again, both stay trusted; remove rotation once every server serves the new ones"
    )
    previous_issuer: IssuerRef | None = Field(
        None, description="with issuer: the issuer of the CA being replaced (selfSigned: the previous generation)"
    )


class InternalTls(Model):
    """The internal CA: it signs the certificate each API serves inside the cluster (to the gateway
    and to the other services), and every client verifies with it. A CA apart from the public one:
    the public hosts' issuer (ACME) issues no certificate for a Service's cluster names."""

    issuer: IssuerRef | None = None
    self_signed: bool = Field(False, description="a self-signed internal CA of the program's own (internal-ca)")
    plain_text: bool = Field(
        False, description="no internal TLS: the APIs, RabbitMQ, MariaDB and memcached speak plain text in the cluster"
    )
    generation: Count = Field(
        1, ge=1, description="selfSigned: the program's CA in use, internal-ca (1), internal-ca-2, ... (a rotation's)"
    )
    rotation: CaRotation | None = Field(
        None, description="a CA rotation under way: its phase (components/infrastructure/ca_rotation.py); unset: none"
    )

    @model_validator(mode="after")
    def _one_choice(self) -> InternalTls:
        if sum((self.issuer is not None, self.self_signed, self.plain_text)) != 1:
            raise ValueError(
                "name the internal CA's issuer, issuer: {kind: Issuer or ClusterIssuer, name}, or set "
                "selfSigned: true for an internal CA of the program's own, or plainText: true to keep the APIs "
                "on http inside the cluster (dev), exactly one of them"
            )
        return self

    @property
    def enabled(self) -> bool:
        return not self.plain_text


class LibvirtTls(IssuedCa):
    """The CA of libvirt's migrations and VNC (VeNCrypt) between nodes: its own, so a control-plane
    certificate is no hypervisor's and the reverse."""

    def _signs(self) -> str:
        return "hypervisors' certificates"


class Tls(Model):
    public: PublicTls | None = None
    internal: InternalTls | None = Field(
        None, description="the internal CA, or plainText; required with a gateway, unset: the APIs serve http"
    )
    libvirt: LibvirtTls | None = None

    @property
    def internal_enabled(self) -> bool:
        """Whether the APIs serve TLS inside the cluster, and their clients verify it."""
        return self.internal is not None and self.internal.enabled


# The CA Issuers the program makes for itself, in the stack's namespace, by the key they serve: the
# mechanism names its roots and Issuers after these (components/mechanism/certificates.py,
# internal_ca.py, components/nodes/libvirt_tls.py). Generations and signers are suffixed
# (internal-ca-2, public-ca-selfsigned).
PUBLIC_CA, INTERNAL_CA, LIBVIRT_CA = "public-ca", "internal-ca", "libvirt-ca"
OWN_ISSUERS = {PUBLIC_CA: "public", INTERNAL_CA: "internal", LIBVIRT_CA: "libvirt"}


def _owner_of(issuer: IssuerRef) -> str | None:
    """Which of the program's own CAs an Issuer of the stack's namespace is, if it is one."""
    if issuer.kind != "Issuer":
        return None
    return next(
        (key for name, key in OWN_ISSUERS.items() if issuer.name == name or issuer.name.startswith(f"{name}-")), None
    )


def _same_issuer(one: IssuedCa | InternalTls | None, other: IssuedCa | InternalTls | None) -> bool:
    return one is not None and other is not None and one.issuer is not None and one.issuer == other.issuer


def problems(settings: Settings) -> Iterator[Problem]:
    """What the front door's settings contradict in the rest of the stack."""
    gateway, public, internal, libvirt = (
        settings.gateway,
        settings.tls.public,
        settings.tls.internal,
        settings.tls.libvirt,
    )
    if gateway is not None and public is None:
        yield problem(
            ("tls", "public"),
            None,
            "the gateway's HTTPS listener needs a certificate: name its issuer, issuer: {kind: ClusterIssuer, "
            "name: ...}, or set selfSigned: true",
        )
    if gateway is None and public is not None:
        yield problem(
            ("tls", "public"),
            public.model_dump(by_alias=True, exclude_defaults=True),
            "issues the certificate of the gateway's listener: set gateway (existing or className) too",
        )
    if gateway is not None and settings.endpoints.scheme != "https":
        yield problem(
            ("endpoints", "scheme"),
            settings.endpoints.scheme,
            "the gateway serves the public hosts over HTTPS only (its listener terminates TLS): the catalog's "
            "public URLs must be https",
        )
    if gateway is not None and gateway.proxies.namespace == settings.namespace and not gateway.proxy_labels():
        yield problem(
            ("gateway", "proxies", "labels"),
            {},
            "the gateway's proxies run in the stack's namespace, where only labels tell them from the cloud's pods: "
            "give their labels",
        )
    if gateway is not None and internal is None:
        yield problem(
            ("tls", "internal"),
            None,
            "the gateway reaches the APIs inside the cluster: name the internal CA, issuer: {kind: ClusterIssuer, "
            "name: ...} or selfSigned: true, or say plainText: true to keep them on http (dev)",
        )
    if _same_issuer(internal, public):
        yield problem(
            ("tls", "internal", "issuer"),
            internal.model_dump(by_alias=True)["issuer"] if internal else None,
            "is the public certificate's issuer: the internal CA must be another one (separate CAs for public and "
            "internal traffic; a public issuer such as ACME signs no Service's cluster names)",
        )
    for key, given in (("public", public), ("internal", internal), ("libvirt", libvirt)):
        owner = _owner_of(given.issuer) if given is not None and given.issuer is not None else None
        if owner is not None and owner != key and given is not None and given.issuer is not None:
            yield problem(
                ("tls", key, "issuer"),
                given.issuer.model_dump(by_alias=True),
                f"is the program's own CA for tls.{owner} ({given.issuer.name}): tls.{key} needs a CA of its own, "
                f"an issuer of yours or selfSigned: true",
            )
    yield from _rotation_problems(settings)
    if libvirt is not None:
        for other, key in ((internal, "internal"), (public, "public")):
            if _same_issuer(libvirt, other):
                yield problem(
                    ("tls", "libvirt", "issuer"),
                    libvirt.model_dump(by_alias=True)["issuer"],
                    f"is tls.{key}'s issuer: libvirt's CA must be a separate one",
                )
        # The nodes' right to ask for their certificates is narrowed by a ValidatingAdmissionPolicy
        # (admissionregistration.k8s.io/v1) to the node its pod's token names (Kubernetes 1.30).
        yield from admission_policy_problems(
            settings.kubernetes_version,
            "tls.libvirt",
            "a ValidatingAdmissionPolicy narrows each compute node's CertificateRequest to its own node, named in "
            "its pod's token",
            "unset tls.libvirt",
        )


def _rotation_problems(settings: Settings) -> Iterator[Problem]:
    """Rotation settings that contradict each other (a phase skipped between two `pulumi up`s is for
    `--against` to show: tools/ca_rotation_view.py)."""
    internal, public = settings.tls.internal, settings.tls.public
    if internal is None:
        return
    if internal.enabled:
        yield from admission_policy_problems(
            settings.kubernetes_version,
            "internal TLS",
            "a ValidatingAdmissionPolicy (admissionregistration.k8s.io/v1) narrows the Job "
            f"{CA_BUNDLE}'s right to create Secrets to its own",
            "tls.internal plainText: true",
        )
    rotation, at = internal.rotation, ("tls", "internal")
    if internal.generation != 1 and not internal.self_signed:
        yield problem((*at, "generation"), internal.generation, "numbers the program's own CAs (selfSigned: true): "
                      "a rotation of the stack's issuer names the previous one in rotation.previousIssuer")  # fmt: skip
    if rotation is None:
        return
    shown = rotation.model_dump(by_alias=True, exclude_none=True)
    if internal.plain_text:
        yield problem((*at, "rotation"), shown, "plain text has no CA to rotate: unset rotation")
    elif internal.self_signed:
        if internal.generation < 2:
            yield problem((*at, "generation"), internal.generation, "is the CA a rotation moves to: 2 or more (the "
                          "previous generation is the one replaced); from internal-ca, set generation: 2")  # fmt: skip
        if rotation.previous_issuer is not None:
            yield problem((*at, "rotation", "previousIssuer"), shown["previousIssuer"], "names the CA a rotation of "
                          "tls.internal.issuer replaces; a rotation of the program's own CA replaces the previous "
                          "generation: unset it")  # fmt: skip
    elif rotation.previous_issuer is None:
        yield problem((*at, "rotation", "previousIssuer"), None, "name the issuer of the CA being replaced, "
                      "previousIssuer: {kind: Issuer or ClusterIssuer, name} (issuer: the new one)")  # fmt: skip
    else:
        previous, new = rotation.previous_issuer, internal.issuer
        if new is not None and previous.name == new.name:
            yield problem((*at, "rotation", "previousIssuer"), shown["previousIssuer"], "is tls.internal.issuer's "
                          "name: a rotation moves from one issuer to another (a CA replaced behind the same issuer "
                          "is in no bundle beside its successor)")  # fmt: skip
        if public is not None and public.issuer == previous:
            yield problem((*at, "rotation", "previousIssuer"), shown["previousIssuer"], "is the public "
                          "certificate's issuer: the internal CA was never that one")  # fmt: skip
