"""The lab's Gateway: what an implementation programs from the plan's Gateway API objects, in haproxy's words."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from components.mechanism.certificates import PUBLIC_TLS
from tests.conftest import plan_of
from tests.lab.cloud.gateway import haproxy_config
from tests.lab.cloud.gatewayapi import Backend, Gateway, owners_gateway, plan_gateway, program

GRANT, ROUTE = "ReferenceGrant", "HTTPRoute"


def _objects(stack: str, kind: str) -> list[dict[str, Any]]:
    return [copy.deepcopy(r.revealed) for r in plan_of(stack).custom if r.kind == kind]


def _cluster_gateway(stack: str) -> Gateway:
    existing = plan_of(stack).settings.gateway.existing  # type: ignore[union-attr]
    assert existing is not None
    return owners_gateway(
        existing.name, existing.namespace, existing.section_name or "https", ("openstack", PUBLIC_TLS)
    )


@pytest.mark.parametrize("stack", ["staging", "prod"])
def test_the_stacks_routes_attach_to_the_clusters_gateway_whose_certificate_the_grant_allows(stack: str) -> None:
    gateway = _cluster_gateway(stack)
    assert gateway.stand_in  # the cluster's, played by the lab
    programmed = program(gateway, _objects(stack, ROUTE), _objects(stack, GRANT))
    assert programmed.problems == []
    assert [ln.name for ln in programmed.listeners] == ["https"]
    hosts = {r.name: r.hostnames for r in programmed.routes}
    settings = plan_of(stack).settings
    assert hosts["keystone-route"] == (settings.public_host("keystone"),)
    assert len(hosts) == len(_objects(stack, ROUTE)) == 8
    backends = {b.service: b.port for r in programmed.routes for rule in r.rules for b in rule.backends}
    assert backends["nova-novncproxy"] == 6080 and backends["horizon"] == 8080


def test_without_the_reference_grant_the_listener_is_not_programmed_and_no_route_attaches() -> None:
    programmed = program(_cluster_gateway("prod"), _objects("prod", ROUTE), [])
    assert programmed.listeners == []
    assert programmed.routes == []
    assert (
        "certificate openstack/public-tls not granted by a ReferenceGrant (RefNotPermitted)" in programmed.problems[0]
    )


def test_dev_serves_its_own_gateway_to_its_own_namespace_only() -> None:
    gateway = plan_gateway(_objects("dev", "Gateway"))
    assert gateway is not None and gateway.stand_in == ""
    routes = _objects("dev", ROUTE)
    assert program(gateway, routes, []).problems == []  # its certificate is in its own namespace
    foreign = copy.deepcopy(routes[0])
    foreign["metadata"]["namespace"] = "elsewhere"
    foreign["spec"]["parentRefs"][0]["namespace"] = "openstack"
    programmed = program(gateway, [foreign], [])
    assert programmed.routes == []
    assert programmed.problems == [f"HTTPRoute elsewhere/{foreign['metadata']['name']}: attached to no listener "
                                   "of openstack/public (Accepted False)"]  # fmt: skip


def test_a_route_naming_another_listener_does_not_attach() -> None:
    route = _objects("prod", ROUTE)[0]
    route["spec"]["parentRefs"][0]["sectionName"] = "http"
    programmed = program(_cluster_gateway("prod"), [route], _objects("prod", GRANT))
    assert programmed.routes == [] and "Accepted False" in programmed.problems[0]


def test_backends_of_another_namespace_need_a_grant_and_unimplemented_rules_are_problems() -> None:
    route = _objects("prod", ROUTE)[0]
    route["spec"]["rules"][0]["backendRefs"][0]["namespace"] = "other"
    route["spec"]["rules"][0]["filters"] = [{"type": "RequestHeaderModifier"}]
    programmed = program(_cluster_gateway("prod"), [route], _objects("prod", GRANT))
    assert programmed.routes[0].rules[0].backends == ()  # refused: its requests get 500
    assert any("not granted (500)" in p for p in programmed.problems)
    assert any("['filters'] not implemented" in p for p in programmed.problems)


def _config(stack: str = "prod") -> str:
    programmed = program(_cluster_gateway(stack), _objects(stack, ROUTE), _objects(stack, GRANT))
    addresses = {"keystone-api": "10.96.1.5", "horizon": "10.96.1.6", "nova-novncproxy": "10.96.1.7"}
    return haproxy_config(programmed, lambda b: addresses.get(b.service, "10.96.9.9"), {"https": Path("/s/https.pem")})


def test_haproxy_terminates_tls_on_envoys_port_and_routes_each_host_to_its_service() -> None:
    config = _config()
    assert "    bind 0.0.0.0:10443 ssl crt /s/https.pem alpn h2,http/1.1" in config  # 443 + 10000, as Envoy Gateway
    hosts = [line.split()[-1] for line in config.splitlines() if " var(txn.host) -m str " in line]
    assert sorted(hosts) == sorted(plan_of("prod").settings.public_host(k) for k in (
        "keystone", "glance", "placement", "nova", "neutron", "cinderv3", "horizon", "novncproxy"))  # fmt: skip
    keystone = next(line.split()[1] for line in config.splitlines() if "-m str keystone.cloud.example.com" in line)
    assert f"    use_backend route-openstack-keystone-route-0 if {keystone}" in config
    backend = config.split("backend route-openstack-keystone-route-0\n", 1)[1].split("\n\n", 1)[0]
    assert backend.splitlines()[-1] == "    server keystone-api-0 10.96.1.5:5000 weight 1"
    assert "    server nova-novncproxy-0 10.96.1.7:6080 weight 1" in config
    # No route for the host: Envoy's 404.
    assert "    default_backend no-route" in config
    assert "backend no-route\n    http-request return status 404" in config


def test_haproxy_adds_envoys_edge_headers_and_timeouts_only() -> None:
    config = _config()
    assert "    http-request set-header X-Forwarded-Proto https" in config
    assert "    option forwardfor" in config
    assert "X-Forwarded-Host" not in config and "X-Forwarded-Port" not in config  # Envoy sends neither
    assert "    timeout server 15s" in config  # Envoy's route timeout
    assert "    timeout tunnel 1h" in config  # the console's websocket, once upgraded
    # The host header's port is no part of the match.
    assert "    http-request set-var(txn.host) req.hdr(host),field(1,:),lower" in config


def _backend(config: str, name: str) -> list[str]:
    return config.split(f"backend {name}\n", 1)[1].split("\n\n", 1)[0].splitlines()


def test_a_routes_request_timeout_replaces_envoys_15_s_and_raises_the_idle_hour_where_longer() -> None:
    config = _config()
    # The plan's routes: kolla-ansible's 1 min for an API, 6 h for Glance's image data.
    assert _backend(config, "route-openstack-keystone-route-0")[:2] == [
        "    timeout server 60000ms", "    timeout tunnel 3600000ms"]  # fmt: skip
    assert _backend(config, "route-openstack-glance-route-0")[:2] == [
        "    timeout server 21600000ms", "    timeout tunnel 21600000ms"]  # fmt: skip


@pytest.mark.parametrize(
    ("timeouts", "server", "problem"),
    [
        ({}, None, None),  # Envoy's default: the defaults section's 15 s
        ({"request": "1h30m"}, "    timeout server 5400000ms", None),
        ({"request": "250ms"}, "    timeout server 250ms", None),
        ({"request": "0s"}, "    timeout server 24d", None),  # no timeout
        ({"request": "90"}, None, "timeouts.request '90' is no Gateway API duration"),
        ({"request": "1d"}, None, "timeouts.request '1d' is no Gateway API duration"),
        (
            {"request": "10s", "backendRequest": "5s"},
            "    timeout server 10000ms",
            "['backendRequest'] not implemented",
        ),
    ],
)
def test_a_routes_timeouts_as_the_lab_gateway_takes_them(
    timeouts: dict[str, str], server: str | None, problem: str | None
) -> None:
    route = _objects("prod", ROUTE)[0]
    route["spec"]["rules"][0]["timeouts"] = timeouts
    programmed = program(_cluster_gateway("prod"), [route], _objects("prod", GRANT))
    if problem is None:
        assert programmed.problems == []
    else:
        assert len(programmed.problems) == 1 and problem in programmed.problems[0], programmed.problems
    config = haproxy_config(programmed, lambda b: "10.96.1.5", {"https": Path("/s/https.pem")})
    lines = _backend(config, f"route-openstack-{route['metadata']['name']}-0")
    assert [line for line in lines if line.startswith("    timeout server")] == ([server] if server else [])


def test_paths_are_matched_exact_first_then_the_longest_prefix() -> None:
    route = _objects("prod", ROUTE)[0]
    rule = route["spec"]["rules"][0]
    route["spec"]["rules"] = [
        {**rule, "matches": [{"path": {"type": "PathPrefix", "value": "/"}}]},
        {**rule, "matches": [{"path": {"type": "PathPrefix", "value": "/v3"}}]},
        {**rule, "matches": [{"path": {"type": "Exact", "value": "/healthcheck"}}]},
    ]
    programmed = program(_cluster_gateway("prod"), [route], _objects("prod", GRANT))
    config = haproxy_config(programmed, lambda b: "10.96.1.5", {"https": Path("/s/https.pem")})
    uses = [line.split()[1] for line in config.splitlines() if line.startswith("    use_backend")]
    assert uses == [f"route-openstack-{route['metadata']['name']}-{i}" for i in range(3)]
    assert "    acl path-0-0 path -m str /healthcheck" in config
    assert "    acl path-0-1 path -m str /v3\n    acl path-0-1 path -m beg /v3/" in config
    assert config.count("use_backend") == 3 and " if host-0\n" in config  # "/" needs the host only


def test_a_service_without_an_address_gets_500() -> None:
    routes = [r for r in _objects("prod", ROUTE) if r["metadata"]["name"] == "cinderv3-route"]
    programmed = program(_cluster_gateway("prod"), routes, _objects("prod", GRANT))

    def address(backend: Backend) -> str | None:
        return None

    config = haproxy_config(programmed, address, {"https": Path("/s/https.pem")})
    assert _backend(config, "route-openstack-cinderv3-route-0")[-1] == "    http-request return status 500"
