"""The front door's rules: gateway-listeners-tls (every listener TLS where the public URLs are https)
and public-routes-only (routes lead to the public APIs' Services only), run as the engine runs them."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from components.cloud.stack_config import parse_settings
from components.settings.model import Settings
from policies.report import load_config
from tests.helpers import objects
from tools.plan import Plan
from tools.policy_config import policy_config

from .builders import run_policy

PROD = load_config("prod")
HTTP_STACK = policy_config(parse_settings({"endpoints": {"scheme": "http"}}))
NO_GATEWAY = policy_config(Settings())
CERTIFICATE = {"mode": "Terminate", "certificateRefs": [{"kind": "Secret", "name": "public-tls"}]}


def gateway(*listeners: dict[str, Any], kind: str = "Gateway") -> dict[str, Any]:
    return {
        "apiVersion": "gateway.networking.k8s.io/v1",
        "kind": kind,
        "metadata": {"name": "public", "namespace": "openstack"},
        "spec": {"gatewayClassName": "eg", "listeners": list(listeners)},
    }


def listener(protocol: str, port: int, **extra: Any) -> dict[str, Any]:
    return {"name": protocol.lower(), "protocol": protocol, "port": port, **extra}


def test_the_stacks_with_https_urls_require_tls_listeners() -> None:
    for stack in ("dev", "staging", "prod"):
        assert load_config(stack)["gateway-listeners-tls"]["tlsRequired"] is True, stack


@pytest.mark.parametrize(
    ("listeners", "found"),
    [
        ([listener("HTTP", 80)], 'spec.listeners[0].protocol="HTTP" is not allowed; allowed: HTTPS or TLS'),
        ([listener("HTTPS", 443, tls=CERTIFICATE), listener("TCP", 5432)], 'spec.listeners[1].protocol="TCP"'),
        ([listener("HTTPS", 443, tls={"mode": "Terminate"})], "spec.listeners[0].tls.certificateRefs is not set"),
        ([listener("HTTPS", 443)], "spec.listeners[0].tls.certificateRefs is not set"),
    ],
)
def test_a_listener_without_tls_is_refused_where_the_urls_are_https(listeners: list, found: str) -> None:
    [message] = run_policy("gateway-listeners-tls", gateway(*listeners), PROD)
    assert found in message and message.startswith("Gateway openstack/public")


def test_a_listener_set_is_held_to_the_same() -> None:
    listeners = gateway(listener("HTTP", 8080), kind="ListenerSet")
    assert run_policy("gateway-listeners-tls", listeners, PROD)


@pytest.mark.parametrize(
    "listeners",
    [
        [listener("HTTPS", 443, tls=CERTIFICATE)],
        [listener("TLS", 443, tls={"mode": "Passthrough"}), listener("HTTPS", 8443, tls=CERTIFICATE)],
    ],
)
def test_tls_listeners_pass(listeners: list) -> None:
    assert run_policy("gateway-listeners-tls", gateway(*listeners), PROD) == []


def test_a_stack_with_http_urls_may_have_an_http_listener() -> None:
    assert HTTP_STACK["gateway-listeners-tls"]["tlsRequired"] is False
    assert run_policy("gateway-listeners-tls", gateway(listener("HTTP", 80)), HTTP_STACK) == []


def _route(kind: str = "HTTPRoute", namespace: str = "openstack", **rule: Any) -> dict[str, Any]:
    return {
        "apiVersion": "gateway.networking.k8s.io/v1",
        "kind": kind,
        "metadata": {"name": "extra-route", "namespace": namespace},
        "spec": {"parentRefs": [{"name": "public"}], "hostnames": ["x.cloud.example.com"], "rules": [rule]},
    }


def _to(name: str, port: Any, **extra: Any) -> dict[str, Any]:
    return {"backendRefs": [{"name": name, "port": port, **extra}]}


def test_the_stacks_routes_pass_and_their_backends_are_the_configs(stack_plan: Plan) -> None:
    config = load_config(stack_plan.stack)
    routes = objects(stack_plan, "HTTPRoute")
    backends = {f"{b['name']}:{b['port']}" for r in routes.values() for rule in r.inputs["spec"]["rules"]
                for b in rule["backendRefs"]}  # fmt: skip
    assert sorted(backends) == config["public-routes-only"]["publicBackends"]
    for route in routes.values():
        manifest = {k: route.inputs[k] for k in ("apiVersion", "kind", "metadata", "spec")}
        assert run_policy("public-routes-only", manifest, config) == [], route.k8s_name


@pytest.mark.parametrize(
    ("rule", "why"),
    [
        (_to("mariadb", 3306), "Service mariadb port 3306 is no public API"),
        (_to("rabbitmq", 15672), "Service rabbitmq port 15672 is no public API"),
        (_to("nova-metadata", 8775), "Service nova-metadata port 8775 is no public API"),
        (_to("keystone-api", 5001), "Service keystone-api port 5001 is no public API"),
        (_to("keystone-api", 5000, namespace="kube-system"), "a Service of namespace kube-system"),
        (_to("keystone-api", 5000, group="gateway.envoyproxy.io", kind="Backend"), "not a Service"),
        (
            {
                **_to("keystone-api", 5000),
                "filters": [
                    {"type": "RequestMirror", "requestMirror": {"backendRef": {"name": "mariadb", "port": 3306}}}
                ],
            },
            "spec.rules[0].filters[0].requestMirror.backendRef",
        ),
        (
            {
                "backendRefs": [
                    {
                        "name": "keystone-api",
                        "port": 5000,
                        "filters": [
                            {
                                "type": "RequestMirror",
                                "requestMirror": {"backendRef": {"name": "memcached", "port": 11211}},
                            }
                        ],
                    }
                ]
            },
            "spec.rules[0].backendRefs[0].filters[0].requestMirror.backendRef",
        ),
    ],
)
def test_a_route_to_anything_but_a_public_api_is_refused(rule: dict[str, Any], why: str) -> None:
    [message] = run_policy("public-routes-only", _route(**rule), PROD)
    assert why in message and "allowed: a public API's Service:port: cinder-api:8776" in message


def test_a_grpc_route_is_held_to_the_same_and_other_routes_are_refused() -> None:
    assert run_policy("public-routes-only", _route("GRPCRoute", **_to("mariadb", 3306)), PROD)
    for kind in ("TCPRoute", "TLSRoute", "UDPRoute"):
        manifest = _route(kind, **_to("keystone-api", 5000))
        manifest["apiVersion"] = "gateway.networking.k8s.io/v1alpha2"
        [message] = run_policy("public-routes-only", manifest, PROD)
        assert f"route: {kind} is not allowed" in message


def test_a_route_in_another_namespace_reaches_only_its_own_services() -> None:
    """A backendRef without namespace is the route's own namespace's Service, not the stack's."""
    assert run_policy("public-routes-only", _route(namespace="tenant", **_to("keystone-api", 5000)), PROD)


def test_a_port_the_engine_hands_over_as_a_float_is_the_same_port() -> None:
    assert run_policy("public-routes-only", _route(**_to("keystone-api", 5000.0)), PROD) == []


def test_without_a_gateway_every_route_is_refused() -> None:
    assert NO_GATEWAY["public-routes-only"]["publicBackends"] == []
    [message] = run_policy("public-routes-only", _route(**_to("keystone-api", 5000)), NO_GATEWAY)
    assert "none (the stack routes nothing)" in message


def test_the_rules_leave_other_kinds_alone() -> None:
    service = copy.deepcopy(_route(**_to("mariadb", 3306)))
    service.update(apiVersion="v1", kind="Service")
    assert run_policy("public-routes-only", service, PROD) == []
    assert (
        run_policy("gateway-listeners-tls", {**gateway(listener("HTTP", 80)), "apiVersion": "example.org/v1"}, PROD)
        == []
    )


def test_a_port_that_is_no_whole_number_is_no_public_port() -> None:
    assert run_policy("public-routes-only", _route(**_to("keystone-api", 5000.5)), PROD)


@pytest.mark.parametrize(
    ("allowed", "field"),
    [
        ({"namespaces": {"from": "All"}}, 'spec.listeners[0].allowedRoutes.namespaces.from="All"'),
        ({"namespaces": {"from": "Selector", "selector": {"matchLabels": {"x": "y"}}}}, '"Selector" is not allowed'),
    ],
)
def test_a_listener_that_admits_other_namespaces_routes_is_refused(allowed: dict[str, Any], field: str) -> None:
    manifest = gateway(listener("HTTPS", 443, tls=CERTIFICATE, allowedRoutes=allowed))
    [message] = run_policy("public-routes-only", manifest, PROD)
    assert field in message and "allowed: Same (the default)" in message


def test_a_gateway_that_admits_other_namespaces_listener_sets_is_refused() -> None:
    manifest = gateway(listener("HTTPS", 443, tls=CERTIFICATE))
    manifest["spec"]["allowedListeners"] = {"namespaces": {"from": "All"}}
    [message] = run_policy("public-routes-only", manifest, PROD)
    assert 'spec.allowedListeners.namespaces.from="All" is not allowed; allowed: None or Same' in message
    manifest["spec"]["allowedListeners"] = {"namespaces": {"from": "Same"}}
    same = {"namespaces": {"from": "Same"}, "kinds": [{"kind": "HTTPRoute"}]}
    manifest["spec"]["listeners"][0]["allowedRoutes"] = same
    assert run_policy("public-routes-only", manifest, PROD) == []


def test_the_stacks_gateway_passes(stack_plan: Plan) -> None:
    config = load_config(stack_plan.stack)
    for found in objects(stack_plan, "Gateway").values():
        manifest = {k: found.inputs[k] for k in ("apiVersion", "kind", "metadata", "spec")}
        assert run_policy("public-routes-only", manifest, config) == []


def grant(to: list[dict[str, Any]], from_: list[dict[str, Any]] | None = None, namespace: str = "openstack") -> dict:
    return {
        "apiVersion": "gateway.networking.k8s.io/v1beta1",
        "kind": "ReferenceGrant",
        "metadata": {"name": "public-tls-for-gateway", "namespace": namespace},
        "spec": {
            "from": from_ or [{"group": "gateway.networking.k8s.io", "kind": "Gateway", "namespace": "gateways"}],
            "to": to,
        },
    }


PUBLIC_TLS = {"group": "", "kind": "Secret", "name": "public-tls"}


def test_the_stacks_grants_pass_and_name_the_gateways_namespace(stack_plan: Plan) -> None:
    config = load_config(stack_plan.stack)
    grants = objects(stack_plan, "ReferenceGrant")
    gateway_setting = stack_plan.settings.gateway
    assert bool(grants) is (gateway_setting is not None and gateway_setting.existing is not None)
    for found in grants.values():
        assert config["reference-grants"]["gatewayNamespace"] == "gateways"
        manifest = {k: found.inputs[k] for k in ("apiVersion", "kind", "metadata", "spec")}
        assert run_policy("reference-grants", manifest, config) == []


@pytest.mark.parametrize(
    ("manifest", "found"),
    [
        (grant([{"group": "", "kind": "Service"}]), 'spec.to[0]={"group": "", "kind": "Service"} is not allowed'),
        (grant([{"group": "", "kind": "Service", "name": "mariadb"}]), "another namespace's routes would reach it"),
        (grant([{"group": "", "kind": "Secret"}]), "without a name it grants every Secret"),
        (grant([{"group": "", "kind": "Secret", "name": "internal-ca"}]), "another namespace's objects would read it"),
        (
            grant([PUBLIC_TLS], [{"group": "gateway.networking.k8s.io", "kind": "HTTPRoute", "namespace": "tenant"}]),
            'spec.from[0]={"group": "gateway.networking.k8s.io", "kind": "HTTPRoute", "namespace": "tenant"}',
        ),
        (
            grant([PUBLIC_TLS], [{"group": "gateway.networking.k8s.io", "kind": "Gateway", "namespace": "tenant"}]),
            "allowed: Gateways of namespace gateways",
        ),
        (grant([PUBLIC_TLS], namespace="kube-system"), 'metadata.namespace="kube-system" is not allowed'),
    ],
)
def test_a_grant_beyond_the_public_certificate_for_the_clusters_gateway_is_refused(
    manifest: dict[str, Any], found: str
) -> None:
    [message] = run_policy("reference-grants", manifest, PROD)
    assert found in message and message.startswith("ReferenceGrant ")


def test_without_the_clusters_gateway_no_grant_passes() -> None:
    config = load_config("dev")
    assert config["reference-grants"]["gatewayNamespace"] == ""
    [message] = run_policy("reference-grants", grant([PUBLIC_TLS]), config)
    assert "allowed: none (no Gateway of the cluster)" in message
