"""The settings of the cloud's front door: `gateway` (where the public hosts are routed) and `tls`
(who issues the certificate the gateway serves them with).

`gateway` names an existing Gateway of the cluster (`existing`), or a GatewayClass for a
Gateway the program creates (`className`); `gateway.envoyGateway` may install that class's
implementation. `tls.public` names the cert-manager Issuer or ClusterIssuer of the public
certificate, or asks for a self-signed CA of the program's own (dev, tests). Without `gateway`
the program routes nothing: the catalog's public URLs are then someone else's to serve.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Literal

from pydantic import Field, model_validator

from components.setting_model import Model
from components.setting_types import DnsLabel, DnsSubdomain, LabelMap, TaggedChartVersion

if TYPE_CHECKING:
    from components.settings import Problem, Settings

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


class PublicTls(Model):
    """The public listener's certificate: from the stack's issuer, or from a self-signed CA of the program."""

    issuer: IssuerRef | None = None
    self_signed: bool = Field(
        False, description="a self-signed root and a CA Issuer of the program's own: for dev and tests"
    )

    @model_validator(mode="after")
    def _one_issuer(self) -> PublicTls:
        if (self.issuer is not None) == self.self_signed:
            raise ValueError(
                "name the issuer of the public certificate, issuer: {kind: Issuer or ClusterIssuer, name}, or set "
                "selfSigned: true for a CA of the program's own (dev, tests), exactly one of them"
            )
        return self


class Tls(Model):
    public: PublicTls | None = None


def problems(settings: Settings) -> Iterator[Problem]:
    """What the front door's settings contradict in the rest of the stack."""
    from components.settings import problem  # settings.py imports this module for its models

    gateway, public = settings.gateway, settings.tls.public
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
