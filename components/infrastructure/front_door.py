"""The cloud's front door: an HTTPRoute per public host, on a Gateway that terminates TLS.

With `gateway.className` the program creates the Gateway `public` in the stack's namespace: one
HTTPS listener on 443 serving the Secret `public-tls` (components/mechanism/certificates.py), admitting
HTTPRoutes of its own namespace only. With `gateway.existing` the routes attach to the cluster's
Gateway (and its listener `sectionName`), and a ReferenceGrant lets that Gateway's namespace use
`public-tls`, which its owner names in the HTTPS listener's certificateRefs (README, "Public
endpoints and certificates"). Each route sends its host, every path, to the service's Service.

openstack-helm (values_overrides/<chart>/gateway.yaml) adds the same routes as extra objects per
chart, `<service>-route` to the API's Service, on a Gateway `gateway-default` in
`envoy-gateway-system` that its test deployment creates with plain HTTP and an optional wildcard
HTTPS listener. Here the routes come from the one list of public hosts, so a host the catalog
advertises always has its route, and the listener is HTTPS only.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from components.infrastructure import ca_rotation, envoy_gateway
from components.infrastructure.credentials import Credentials
from components.infrastructure.public_routes import PublicRoute
from components.mechanism import certificates, internal_tls
from components.mechanism.meta import metadata
from components.settings.gateway import Gateway
from components.settings.model import Settings

GROUP = "gateway.networking.k8s.io"
GATEWAY = "public"  # the Gateway the program creates, in the stack's namespace
LISTENER = "https"
HTTPS_PORT = 443


def parent_ref(settings: Settings, gateway: Gateway) -> dict[str, str]:
    """Where the routes attach: the program's Gateway and its listener, or the stack's existing one."""
    if gateway.existing is None:
        return {"group": GROUP, "kind": "Gateway", "name": GATEWAY, "namespace": settings.namespace,
                "sectionName": LISTENER}  # fmt: skip
    ref = {"group": GROUP, "kind": "Gateway", "name": gateway.existing.name, "namespace": gateway.existing.namespace}
    if gateway.existing.section_name:
        ref["sectionName"] = gateway.existing.section_name
    return ref


def route_spec(route: PublicRoute, parent: dict[str, str]) -> dict[str, Any]:
    """Every path of the host to the backend, with how long the gateway waits for its answer.

    Without `timeouts.request` the implementation's default holds, and Envoy's is 15 s: an API
    call that waits on a busy database or on an API reloading its renewed certificate (uWSGI's
    graceful reload, components/mechanism/oslo.py) gets a 504 from the gateway while the API would still
    answer. The routes take kolla-ansible's haproxy timeouts instead: 1 min for an API
    (haproxy_server_timeout), 6 h for Glance's image data. A console's websocket is bounded only
    until the upgrade's answer (Envoy applies route timeouts to the upgrade request alone), then
    by the stream's idle timeout, which Envoy Gateway keeps at 1 h or the request timeout if longer."""
    return {
        "parentRefs": [parent],
        "hostnames": [route.hostname],
        "rules": [
            {
                "matches": [{"path": {"type": "PathPrefix", "value": "/"}}],
                "backendRefs": [{"group": "", "kind": "Service", "name": route.backend, "port": route.port}],
                "timeouts": {"request": route.request_timeout},
            }
        ],
    }


def backend_tls_spec(settings: Settings, backend: str) -> dict[str, Any]:
    """The gateway speaks TLS to an API that serves it, verifying the internal CA and the
    Service's name. BackendTLSPolicy is standard since Gateway API v1.4, and the one CA reference
    every implementation must read is a ConfigMap whose `ca.crt` holds a single certificate (a Secret,
    or a bundle of several, is implementation-specific). So the policy lists one ConfigMap per trusted
    CA, which the bundle Job writes (components/scripts/write_ca_bundle.py): during a rotation, both."""
    refs = [{"group": "", "kind": "ConfigMap", "name": name} for name in ca_rotation.trust_config_maps(settings)]
    return {
        "targetRefs": [{"group": "", "kind": "Service", "name": backend}],
        "validation": {"caCertificateRefs": refs, "hostname": settings.service_host(backend)},
    }


def gateway_spec(class_name: str) -> dict[str, Any]:
    """One HTTPS listener for every public host (their routes carry the names), TLS ending here."""
    return {
        "gatewayClassName": class_name,
        "listeners": [
            {
                "name": LISTENER,
                "protocol": "HTTPS",
                "port": HTTPS_PORT,
                "tls": {
                    "mode": "Terminate",
                    "certificateRefs": [{"group": "", "kind": "Secret", "name": certificates.PUBLIC_TLS}],
                },
                # The cloud's HTTPRoutes only: nothing else in the namespace gets onto its public address.
                "allowedRoutes": {"namespaces": {"from": "Same"}, "kinds": [{"group": GROUP, "kind": "HTTPRoute"}]},
            }
        ],
    }


def tls_backends(settings: Settings, routes: Iterable[PublicRoute]) -> set[str]:
    """The Services behind public routes that serve TLS inside the cluster: each gets a BackendTLSPolicy."""
    return {r.backend for r in routes if internal_tls.serves_tls(settings, r.backend)}


def plain_backends(settings: Settings, routes: Sequence[PublicRoute]) -> set[str]:
    """The Services behind public routes that the gateway reaches in plain HTTP (no BackendTLSPolicy)."""
    return {r.backend for r in routes} - tls_backends(settings, routes)


class FrontDoor(pulumi.ComponentResource):
    """The gateway's objects for `routes`, the stack's public hosts (services.public_routes)."""

    def __init__(
        self,
        settings: Settings,
        credentials: Credentials,
        routes: Sequence[PublicRoute],
        opts: pulumi.ResourceOptions | None = None,
    ):
        super().__init__("openstack:infra:FrontDoor", "front-door", None, opts)
        gateway, public = settings.gateway, settings.tls.public
        assert gateway is not None and public is not None, "settings refuse a gateway without tls.public"
        ns = settings.namespace
        certificates.public_certificate(ns, public, sorted({r.hostname for r in routes}), self)
        installed = envoy_gateway.install(settings, gateway, credentials, self)
        after = pulumi.ResourceOptions(parent=self, depends_on=installed)
        if gateway.class_name is not None:
            spec = gateway_spec(gateway.class_name)
            self._custom("Gateway", GATEWAY, ns, spec, after, api_version="gateway.networking.k8s.io/v1")
        elif gateway.existing is not None and gateway.existing.namespace != ns:
            # A Gateway may name a Secret of another namespace only where a grant there allows it.
            grant = {
                "from": [{"group": GROUP, "kind": "Gateway", "namespace": gateway.existing.namespace}],
                "to": [{"group": "", "kind": "Secret", "name": certificates.PUBLIC_TLS}],
            }
            # v1beta1: ReferenceGrant's only version up to Gateway API v1.4 (Envoy Gateway v1.7 ships
            # v1.4.1), still served by v1.6.
            name = f"{certificates.PUBLIC_TLS}-for-gateway"
            self._custom("ReferenceGrant", name, ns, grant, after, api_version="gateway.networking.k8s.io/v1beta1")
        parent = parent_ref(settings, gateway)
        for backend in sorted(tls_backends(settings, routes)):
            spec = backend_tls_spec(settings, backend)
            name = f"{backend}-backend-tls"
            self._custom("BackendTLSPolicy", name, ns, spec, after, api_version="gateway.networking.k8s.io/v1")
        for route in routes:
            spec = route_spec(route, parent)
            self._custom("HTTPRoute", route.route_name, ns, spec, after, api_version="gateway.networking.k8s.io/v1")
        self.register_outputs({})

    def _custom(
        self, kind: str, name: str, namespace: str, spec: dict[str, Any], opts: pulumi.ResourceOptions, api_version: str
    ) -> pulumi.Resource:
        return k8s.apiextensions.CustomResource(
            name,
            api_version=api_version,
            kind=kind,
            metadata=metadata(name, namespace, "gateway", kind.lower()),
            spec=spec,
            opts=opts,
        )
