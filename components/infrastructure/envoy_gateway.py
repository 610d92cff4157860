"""Envoy Gateway from its Helm chart, for the Gateway the program creates (`gateway.envoyGateway.install`).

Installed like the operators (components/infrastructure/operator_chart.py: helm.v4.Chart, pinned, every CRD
retained), into `gateway.proxies.namespace`, where it also runs the proxies of every Gateway
(its default deploy mode). helm.v4.Chart skips Helm hooks (pulumi-kubernetes issue #3284), and
the chart makes its control plane's TLS with one: the certgen Job (pre-install), which writes
the Secrets `envoy-gateway`, `envoy`, `envoy-rate-limit` (a CA's certificates) and
`envoy-oidc-hmac`. So the program makes them, as Envoy Gateway's guide "Control Plane
Authentication Using Custom Certificates" does with cert-manager (certgen leaves Secrets that
exist alone): a self-signed CA in that namespace, the three certificates, and a generated HMAC
key. The chart's topology injector webhook is a hook too (its CA bundle is certgen's to patch):
it is off.
"""

from __future__ import annotations

import pulumi
import pulumi_kubernetes as k8s

from components.infrastructure.credentials import Credentials
from components.infrastructure.operator_chart import operator_chart
from components.mechanism import certificates, kube
from components.mechanism.meta import labels
from components.settings.gateway import Gateway
from components.settings.model import Settings

CHART = "oci://docker.io/envoyproxy/gateway-helm"
CONTROLLER = "gateway.envoyproxy.io/gatewayclass-controller"  # its GatewayClasses' controllerName
CA = "envoy-gateway-ca"
CONTROLLER_SERVICE = "envoy-gateway"  # the control plane's Service (and Deployment), the chart's name
HMAC_SECRET = "envoy-oidc-hmac"
# The usages of the guide's certificates: what certgen's certificates carry.
USAGES = ["digital signature", "data encipherment", "key encipherment", "content commitment"]


def _control_plane_tls(
    settings: Settings,
    namespace: str,
    credentials: Credentials,
    parent: pulumi.Resource,
    after: list[pulumi.Resource],
) -> list[pulumi.Resource]:
    ca = certificates.self_signed_ca(CA, namespace, parent, after)
    service = f"{CONTROLLER_SERVICE}.{namespace}"
    names = {
        # The controller's xDS server, by every name of its Service.
        CONTROLLER_SERVICE: (
            CONTROLLER_SERVICE,
            service,
            f"{service}.svc",
            f"{service}.svc.{settings.endpoints.cluster_domain}",
        ),
        # The proxies' and the rate limiter's client certificates, for whatever name their pods get.
        "envoy": (f"*.{namespace}",),
        "envoy-rate-limit": (f"*.{namespace}",),
    }
    made = []
    for secret, dns_names in names.items():
        spec = {
            "commonName": CONTROLLER_SERVICE if secret == CONTROLLER_SERVICE else "*",
            "dnsNames": list(dns_names),
            "secretName": secret,
            "usages": USAGES,
            "issuerRef": ca,
        }
        made.append(
            certificates.cert_manager("Certificate", secret, namespace, spec, parent, wait=True, depends_on=after)
        )
    # Envoy Gateway refuses to start without it (internal/gatewayapi/runner, hmac): the key of its OIDC cookies.
    hmac = {"hmac-secret": credentials.password(f"{namespace}-{HMAC_SECRET}")}
    made.append(kube.secret(HMAC_SECRET, namespace, "gateway", hmac, parent, depends_on=after))
    return made


def install(
    settings: Settings, gateway: Gateway, credentials: Credentials, parent: pulumi.Resource
) -> list[pulumi.Resource]:
    """Envoy Gateway and the GatewayClass `className`: what the program's Gateway must wait for."""
    if not gateway.envoy_gateway.install or gateway.class_name is None:
        return []
    namespace = gateway.proxies.namespace
    before: list[pulumi.Resource] = []
    if namespace != settings.namespace:
        before.append(
            k8s.core.v1.Namespace(
                namespace,
                metadata={"name": namespace, "labels": labels("gateway", "namespace")},
                opts=pulumi.ResourceOptions(parent=parent),
            )
        )
    before += _control_plane_tls(settings, namespace, credentials, parent, list(before))
    values = {"topologyInjector": {"enabled": False}, "kubernetesClusterDomain": settings.endpoints.cluster_domain}
    chart = operator_chart("envoy-gateway", CHART, gateway.envoy_gateway, namespace, parent, values, before)
    assert chart is not None
    gateway_class = k8s.apiextensions.CustomResource(
        gateway.class_name,
        api_version="gateway.networking.k8s.io/v1",
        kind="GatewayClass",
        metadata={"name": gateway.class_name, "labels": labels("gateway", "gatewayclass")},
        spec={"controllerName": CONTROLLER},
        opts=pulumi.ResourceOptions(parent=parent, depends_on=[chart]),
    )
    return [chart, gateway_class]
