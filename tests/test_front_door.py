"""The front door of every stack: a route per public host the catalog advertises, to the Service
behind it, on a Gateway that serves a certificate of exactly those hosts.

The Gateway API's and cert-manager's objects are custom resources the offline plan cannot
validate against a cluster, so each is checked against the projects' own CRDs (tests/fixtures:
Gateway API v1.4.1's standard channel, which Envoy Gateway v1.7 ships, and cert-manager v1.21.1;
the schema of the version used, descriptions removed).
"""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import jsonschema
import pytest
import yaml

from components.mechanism.inifile import parse_ini
from tests.conftest import plan_of
from tests.helpers import containers, horizon_settings, objects, pod_template, unknown_fields
from tools.plan import Plan
from tools.runtime import Registration, run_program, stack_config

FIXTURES = Path(__file__).parent / "fixtures"
CRDS = {
    "Gateway": "gateway-api/gateway.networking.k8s.io_gateways.yaml",
    "GatewayClass": "gateway-api/gateway.networking.k8s.io_gatewayclasses.yaml",
    "HTTPRoute": "gateway-api/gateway.networking.k8s.io_httproutes.yaml",
    "ReferenceGrant": "gateway-api/gateway.networking.k8s.io_referencegrants.yaml",
    "Certificate": "cert-manager/cert-manager.io_certificates.yaml",
    "Issuer": "cert-manager/cert-manager.io_issuers.yaml",
}
EXISTING = {"existing": {"name": "shared", "namespace": "gateways", "sectionName": "websecure"}}
ISSUER = {"public": {"issuer": {"kind": "Issuer", "name": "acme"}}, "internal": {"plainText": True}}


@cache
def _crd(kind: str) -> tuple[str, dict[str, Any]]:
    crd = yaml.safe_load((FIXTURES / CRDS[kind]).read_text())
    [version] = crd["spec"]["versions"]
    return f"{crd['spec']['group']}/{version['name']}", version["schema"]["openAPIV3Schema"]


def _check_against_the_crd(r: Registration) -> None:
    api_version, schema = _crd(str(r.kind))
    manifest = {k: r.inputs[k] for k in ("apiVersion", "kind", "metadata", "spec")}
    assert manifest["apiVersion"] == api_version, r.k8s_name
    assert unknown_fields(manifest, schema) == [], r.k8s_name
    jsonschema.validate(manifest, schema)


def _files(plan: Plan, service: str) -> dict[str, str]:
    return plan.by_name(f"{service}-etc", "Secret").revealed["stringData"]


def _env(r: Registration, name: str) -> str:
    return next(e["value"] for c in containers(r) for e in c.get("env", []) if e["name"] == name)


def advertised_hosts(plan: Plan) -> set[str]:
    """Every public host the cloud tells its users of, read from what the plan registers and renders:
    the catalog's public URLs (ks-service Jobs, keystone-bootstrap), the console's base URL, Horizon's host."""
    urls = [_env(plan.by_name("keystone-bootstrap", "Job"), "OS_BOOTSTRAP_PUBLIC_URL")]
    for name, job in objects(plan, "Job").items():
        if name.endswith("-ks-service"):
            urls += [entry.split(",")[2] for entry in _env(job, "CATALOG").split(";")]
    urls.append(parse_ini(_files(plan, "nova")["nova.conf"])["vnc"]["novncproxy_base_url"])
    namespace = horizon_settings(_files(plan, "horizon")["local_settings.py"])
    urls += namespace["CSRF_TRUSTED_ORIGINS"]
    assert all(urlsplit(url).scheme == "https" for url in urls), urls
    return {urlsplit(url).hostname or "" for url in urls}


def test_every_advertised_host_has_a_route_to_the_service_behind_it(stack_plan: Plan) -> None:
    routes = objects(stack_plan, "HTTPRoute")
    hosts = {host: route for route in routes.values() for host in route.inputs["spec"]["hostnames"]}
    assert set(hosts) == advertised_hosts(stack_plan)
    assert len(hosts) == len(routes)  # one host per route
    services, workloads = objects(stack_plan, "Service"), objects(stack_plan, "Deployment")
    for route in routes.values():
        [rule] = route.inputs["spec"]["rules"]
        assert rule["matches"] == [{"path": {"type": "PathPrefix", "value": "/"}}]
        [backend] = rule["backendRefs"]
        assert (backend["group"], backend["kind"]) == ("", "Service")
        service = services[backend["name"]].inputs["spec"]
        assert backend["port"] in [p["port"] for p in service["ports"]], route.k8s_name
        # The Service selects the pods of a workload of the plan that listens on that port.
        [workload] = [
            w
            for w in workloads.values()
            if service["selector"].items() <= pod_template(w)["metadata"]["labels"].items()
        ]
        ports = [p["containerPort"] for c in containers(workload) for p in c.get("ports", [])]
        assert backend["port"] in ports, route.k8s_name
        _check_against_the_crd(route)


def test_every_route_waits_as_kolla_ansibles_haproxy_does_not_envoys_15_s(stack_plan: Plan) -> None:
    """An API gets a minute (haproxy_server_timeout), Glance's image data six hours
    (haproxy_glance_api_server_timeout); Envoy's default 15 s would cut them short with a 504."""
    waits = {
        route.inputs["spec"]["rules"][0]["backendRefs"][0]["name"]: route.inputs["spec"]["rules"][0]["timeouts"]
        for route in objects(stack_plan, "HTTPRoute").values()
    }
    assert waits.pop("glance-api") == {"request": "6h"}
    assert waits and all(timeouts == {"request": "60s"} for timeouts in waits.values()), waits


def test_the_certificate_names_exactly_the_routed_hosts(stack_plan: Plan) -> None:
    hosts = {h for route in objects(stack_plan, "HTTPRoute").values() for h in route.inputs["spec"]["hostnames"]}
    certificate = stack_plan.by_name("public-tls", "Certificate")
    spec = certificate.inputs["spec"]
    assert sorted(spec["dnsNames"]) == sorted(hosts)
    assert spec["secretName"] == "public-tls"
    assert spec["privateKey"]["rotationPolicy"] == "Always"
    _check_against_the_crd(certificate)


def test_dev_creates_its_gateway_with_an_https_listener_serving_the_certificate() -> None:
    plan = plan_of("dev")
    gateway = plan.by_name("public", "Gateway")
    assert gateway.namespace == plan.settings.namespace
    [listener] = gateway.inputs["spec"]["listeners"]
    assert (listener["protocol"], listener["port"]) == ("HTTPS", 443)
    assert listener["tls"]["mode"] == "Terminate"
    assert listener["tls"]["certificateRefs"] == [{"group": "", "kind": "Secret", "name": "public-tls"}]
    assert listener["allowedRoutes"]["namespaces"] == {"from": "Same"}
    assert gateway.inputs["spec"]["gatewayClassName"] == "envoy-gateway"
    for route in objects(plan, "HTTPRoute").values():
        assert route.inputs["spec"]["parentRefs"] == [
            {"group": "gateway.networking.k8s.io", "kind": "Gateway", "name": "public",
             "namespace": plan.settings.namespace, "sectionName": listener["name"]}
        ]  # fmt: skip
    _check_against_the_crd(gateway)
    assert not objects(plan, "ReferenceGrant")


def test_dev_issues_the_certificate_from_its_own_self_signed_ca() -> None:
    plan = plan_of("dev")
    issuers = {name: r.inputs["spec"] for name, r in objects(plan, "Issuer").items() if r.namespace == "openstack"}
    certificate = plan.by_name("public-tls", "Certificate").inputs["spec"]
    assert certificate["issuerRef"] == {"group": "cert-manager.io", "kind": "Issuer", "name": "public-ca"}
    assert issuers["public-ca"] == {"ca": {"secretName": "public-ca"}}
    root = plan.by_name("public-ca", "Certificate").inputs["spec"]
    assert root["isCA"] is True and root["secretName"] == "public-ca"
    assert issuers[root["issuerRef"]["name"]] == {"selfSigned": {}}
    for name in ("public-ca", root["issuerRef"]["name"]):
        _check_against_the_crd(plan.by_name(name, "Issuer"))


def test_dev_installs_envoy_gateway_with_the_tls_its_certgen_hook_would_make() -> None:
    """helm.v4.Chart skips the chart's certgen hook: the Secrets it writes come from cert-manager."""
    plan = plan_of("dev")
    namespace = plan.settings.gateway.proxies.namespace  # type: ignore[union-attr]
    [chart] = [r for r in plan.registrations if r.type == "kubernetes:helm.sh/v4:Chart" and r.name == "envoy-gateway"]
    assert chart.inputs["chart"] == "oci://docker.io/envoyproxy/gateway-helm"
    assert chart.inputs["version"] == "v1.9.0"
    assert chart.inputs["namespace"] == namespace
    made = {(r.kind, r.k8s_name) for r in plan.custom if r.namespace == namespace}
    secrets = {name for kind, name in made if kind == "Certificate"} | {n for k, n in made if k == "Secret"}
    assert {"envoy-gateway", "envoy", "envoy-rate-limit", "envoy-oidc-hmac"} <= secrets
    controller = plan.by_name("envoy-gateway", "Certificate").inputs["spec"]
    assert f"envoy-gateway.{namespace}.svc.{plan.settings.endpoints.cluster_domain}" in controller["dnsNames"]
    # The chart starts the controller only once those Secrets can exist (cert-manager reports Ready).
    waited = {u for u in plan.dependencies.get(chart.urn, [])}
    for name in ("envoy-gateway", "envoy", "envoy-rate-limit"):
        certificate = plan.by_name(name, "Certificate")
        assert certificate.urn in waited
        assert certificate.inputs["metadata"]["annotations"]["pulumi.com/waitFor"] == "condition=Ready"
    assert plan.by_name("envoy-oidc-hmac", "Secret").urn in waited
    gateway_class = plan.by_name("envoy-gateway", "GatewayClass")
    assert gateway_class.inputs["spec"] == {"controllerName": "gateway.envoyproxy.io/gatewayclass-controller"}
    _check_against_the_crd(gateway_class)
    assert gateway_class.urn in plan.dependencies[plan.by_name("public", "Gateway").urn]


@pytest.mark.parametrize("stack", ["staging", "prod"])
def test_staging_and_prod_attach_to_the_clusters_gateway_and_name_their_issuer(stack: str) -> None:
    plan = plan_of(stack)
    gateway = plan.settings.gateway
    assert gateway is not None and gateway.existing is not None and plan.settings.tls.public is not None
    assert not objects(plan, "Gateway") and not objects(plan, "GatewayClass")
    # No Issuer for the public certificate (the cluster's ClusterIssuer signs it); staging's only Issuers
    # are its self-signed internal CA's (tls.internal.selfSigned), whose names are no public issuer's.
    internal, libvirt = plan.settings.tls.internal, plan.settings.tls.libvirt
    own_ca = {"internal-ca-selfsigned", "internal-ca"} if internal is not None and internal.self_signed else set()
    # and prod's libvirt CA (tls.libvirt.selfSigned), as private.
    own_ca |= {"libvirt-ca-selfsigned", "libvirt-ca"} if libvirt is not None and libvirt.self_signed else set()
    assert set(objects(plan, "Issuer")) == own_ca
    for route in objects(plan, "HTTPRoute").values():
        [parent] = route.inputs["spec"]["parentRefs"]
        assert parent["name"] == gateway.existing.name and parent["namespace"] == gateway.existing.namespace
        assert parent["sectionName"] == gateway.existing.section_name
    issuer = plan.settings.tls.public.issuer
    assert issuer is not None and issuer.kind == "ClusterIssuer"
    assert plan.by_name("public-tls", "Certificate").inputs["spec"]["issuerRef"] == {
        "group": "cert-manager.io", "kind": "ClusterIssuer", "name": issuer.name
    }  # fmt: skip
    grant = plan.by_name("public-tls-for-gateway", "ReferenceGrant")
    assert grant.inputs["spec"] == {
        "from": [{"group": "gateway.networking.k8s.io", "kind": "Gateway", "namespace": gateway.existing.namespace}],
        "to": [{"group": "", "kind": "Secret", "name": "public-tls"}],
    }
    _check_against_the_crd(grant)


def test_a_gateway_in_the_stacks_namespace_needs_no_grant_and_a_route_without_a_listener_names_none() -> None:
    existing = {"existing": {"name": "shared", "namespace": "openstack"}}
    plan = plan_of("prod", gateway=existing, tls=ISSUER)
    assert not objects(plan, "ReferenceGrant")
    [parent] = plan.by_name("keystone-route", "HTTPRoute").inputs["spec"]["parentRefs"]
    assert "sectionName" not in parent and parent["namespace"] == "openstack"
    assert plan.by_name("public-tls", "Certificate").inputs["spec"]["issuerRef"]["kind"] == "Issuer"


def test_without_a_gateway_nothing_is_routed_or_issued() -> None:
    config = {k: v for k, v in stack_config("prod").items() if k not in ("openstack:gateway", "openstack:tls")}
    kinds = {r.kind for r in run_program(config, "prod")}
    assert "Deployment" in kinds
    assert not kinds & {"Gateway", "HTTPRoute", "Certificate", "Issuer", "ReferenceGrant"}


def test_routes_follow_the_hosts_a_stack_gives() -> None:
    plan = plan_of("prod", endpoints={"domain": "cloud.example.com", "hosts": {"nova": "compute.example.org"}})
    assert plan.by_name("nova-route", "HTTPRoute").inputs["spec"]["hostnames"] == ["compute.example.org"]
    assert "compute.example.org" in plan.by_name("public-tls", "Certificate").inputs["spec"]["dnsNames"]
    assert "nova.cloud.example.com" not in plan.by_name("public-tls", "Certificate").inputs["spec"]["dnsNames"]


def test_a_service_turned_off_has_no_route() -> None:
    plan = plan_of("prod", services={"cinder": False, "horizon": False})
    names = set(objects(plan, "HTTPRoute"))
    assert "cinderv3-route" not in names and "horizon-route" not in names
    assert "keystone-route" in names and "novncproxy-route" in names


def test_horizon_knows_it_is_behind_tls_and_the_console_url_is_the_routes(stack_plan: Plan) -> None:
    hosts = {r.k8s_name: r.inputs["spec"]["hostnames"][0] for r in objects(stack_plan, "HTTPRoute").values()}
    namespace = horizon_settings(_files(stack_plan, "horizon")["local_settings.py"])
    assert namespace["SECURE_PROXY_SSL_HEADER"] == ("HTTP_X_FORWARDED_PROTO", "https")
    assert namespace["CSRF_COOKIE_SECURE"] is namespace["SESSION_COOKIE_SECURE"] is True
    assert namespace["CSRF_TRUSTED_ORIGINS"] == [f"https://{hosts['horizon-route']}"]
    assert hosts["horizon-route"] in namespace["ALLOWED_HOSTS"]
    vnc = parse_ini(_files(stack_plan, "nova")["nova.conf"])["vnc"]
    assert vnc["novncproxy_base_url"] == f"https://{hosts['novncproxy-route']}/vnc_lite.html"


def test_every_routed_api_builds_its_links_from_the_forwarded_headers(stack_plan: Plan) -> None:
    """oslo.middleware's HTTPProxyToWSGI (in every API's pipeline) reads X-Forwarded-Proto and Host
    only with enable_proxy_headers_parsing; without it version documents and `next` links say http."""
    services = {
        r.inputs["spec"]["rules"][0]["backendRefs"][0]["name"] for r in objects(stack_plan, "HTTPRoute").values()
    }
    apis = {name.split("-")[0] for name in services} - {"horizon"}
    assert {"keystone", "glance", "placement", "nova", "neutron"} <= apis
    for service in apis:
        parsed = [parse_ini(text) for name, text in _files(stack_plan, service).items() if name.endswith(".conf")]
        middleware = [c["oslo_middleware"] for c in parsed if c.has_section("oslo_middleware")]
        assert any(m.get("enable_proxy_headers_parsing") == "true" for m in middleware), service
