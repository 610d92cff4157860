"""The lab's Gateway honours BackendTLSPolicy as Envoy Gateway does: TLS to the backends a policy targets,
verifying its hostname with its CA only; plain HTTP to the others; nothing to one whose policy is invalid."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from components.mechanism.certificates import PUBLIC_TLS
from tests.conftest import plan_of
from tests.lab.cloud.backendtls import BackendTlsPolicies
from tests.lab.cloud.certmanager import CertManager
from tests.lab.cloud.gateway import backend_tls_of, ca_file_name, haproxy_config, write_files
from tests.lab.cloud.gatewayapi import Programmed, owners_gateway, program

STACK = "staging"  # tls.internal selfSigned: a BackendTLSPolicy per API backend
# The routed backends that serve HTTPS inside the cluster: the APIs, Horizon and the console proxy.
APIS = ("keystone-api", "glance-api", "placement-api", "nova-api", "neutron-server", "cinder-api", "horizon",
        "nova-novncproxy")  # fmt: skip


def _objects(kind: str, stack: str = STACK) -> list[dict[str, Any]]:
    return [copy.deepcopy(r.revealed) for r in plan_of(stack).custom if r.kind == kind]


@cache
def _issued() -> CertManager:
    certs = CertManager(_objects("Certificate") + _objects("Issuer"))
    assert certs.issue_all() == []
    return certs


def _bundle() -> dict[str, str]:
    """What the Job internal-ca-bundle writes into the ConfigMap internal-ca-trust from staging's one trusted CA
    (components/scripts/write_ca_bundle.py): that CA's certificate alone."""
    return {"ca.crt": _issued().secrets[("openstack", "internal-ca-trust")].data["ca.crt"]}


def _lookup(extra: Mapping[tuple[str, str, str], Mapping[str, str]] | None = None) -> Any:
    def lookup(kind: str, namespace: str, name: str) -> Mapping[str, str] | None:
        if extra and (kind, namespace, name) in extra:
            return extra[(kind, namespace, name)]
        if (kind, namespace, name) == ("ConfigMap", "openstack", "internal-ca-trust"):
            return _bundle()
        issued = _issued().secrets.get((namespace, name)) if kind == "Secret" else None
        return issued.data if issued else None

    return lookup


def _program(
    policies: list[dict[str, Any]] | None = None,
    lookup: Any = None,
    port_name: Any = None,
    stack: str = STACK,
) -> Programmed:
    existing = plan_of(stack).settings.gateway.existing  # type: ignore[union-attr]
    assert existing is not None
    gateway = owners_gateway(existing.name, existing.namespace, existing.section_name or "https", ("openstack",
                             PUBLIC_TLS))  # fmt: skip
    resolver = BackendTlsPolicies(
        _objects("BackendTLSPolicy", stack) if policies is None else policies,
        lookup or _lookup(),
        port_name or (lambda namespace, service, port: "api"),  # every plan Service's port is `api`
    )
    return program(gateway, _objects("HTTPRoute", stack), _objects("ReferenceGrant", stack), backend_tls=resolver)


def _without_the_consoles_policy() -> list[dict[str, Any]]:
    """The plan's policies but the console proxy's: a routed backend that no policy targets."""
    policies = _objects("BackendTLSPolicy")
    return [p for p in policies if p["spec"]["targetRefs"][0]["name"] != "nova-novncproxy"]


def _backends(programmed: Programmed) -> dict[str, Any]:
    return {b.service: b for r in programmed.routes for rule in r.rules for b in rule.backends}


def _config(programmed: Programmed) -> str:
    ca_files = {policy: Path("/s") / ca_file_name(policy) for policy in backend_tls_of(programmed)}
    return haproxy_config(programmed, lambda b: "10.96.1.5", {"https": Path("/s/https.pem")}, ca_files=ca_files)


def _server(config: str, service: str) -> str:
    return next(line.strip() for line in config.splitlines() if line.strip().startswith(f"server {service}-0 "))


def test_each_api_backend_is_spoken_to_over_tls_verifying_its_service_name_with_the_internal_ca_only() -> None:
    programmed = _program()
    assert programmed.problems == []
    assert programmed.backend_tls == {f"openstack/{api}-backend-tls": "Accepted" for api in APIS}
    backends = _backends(programmed)
    ca = _bundle()["ca.crt"]
    for api in APIS:
        tls = backends[api].tls
        assert tls is not None and tls.hostname == f"{api}.openstack.svc.cluster.local" and tls.ca == ca
    config = _config(programmed)
    keystone = _server(config, "keystone-api")
    policy_ca = "/s/backend-ca-openstack-keystone-api-backend-tls.pem"
    assert keystone == (
        f"server keystone-api-0 10.96.1.5:5000 weight 1 ssl verify required ca-file {policy_ca} "
        "sni str(keystone-api.openstack.svc.cluster.local) verifyhost keystone-api.openstack.svc.cluster.local"
    )
    assert "    ssl-default-server-options ssl-min-ver TLSv1.2 ssl-max-ver TLSv1.3" in config  # Envoy Gateway's
    # Horizon and the console proxy are verified as the APIs are.
    for name, port in (("horizon", 8080), ("nova-novncproxy", 6080)):
        assert _server(config, name).startswith(f"server {name}-0 10.96.1.5:{port} weight 1 ssl verify required")
    # A backend no policy targets gets plain HTTP, as the spec says.
    untargeted = _program(policies=_without_the_consoles_policy())
    assert _backends(untargeted)["nova-novncproxy"].tls is None
    assert " ssl" not in _server(_config(untargeted), "nova-novncproxy")


def test_a_plain_text_stack_has_no_policy_and_every_backend_is_plain() -> None:
    programmed = _program(stack="prod")
    assert programmed.backend_tls == {} and programmed.problems == []
    assert all(b.tls is None for b in _backends(programmed).values())
    servers = [line for line in _config(programmed).splitlines() if line.startswith("    server ")]
    assert servers and not any(" ssl " in line for line in servers)


def test_a_policy_whose_ca_does_not_exist_fails_closed_the_backend_gets_nothing() -> None:
    def without_bundle(kind: str, namespace: str, name: str) -> Mapping[str, str] | None:
        return None if name == "internal-ca-trust" else _lookup()(kind, namespace, name)

    programmed = _program(policies=_without_the_consoles_policy(), lookup=without_bundle)
    assert "keystone-api" not in _backends(programmed)  # dropped, never sent plain text instead
    status = programmed.backend_tls["openstack/keystone-api-backend-tls"]
    assert status == "Accepted False (NoValidCACertificate): ConfigMap openstack/internal-ca-trust does not exist"
    assert any(p.startswith("HTTPRoute keystone-route: Service openstack/keystone-api gets no traffic (500)")
               for p in programmed.problems)  # fmt: skip
    config = _config(programmed)
    backend = config.split("backend route-openstack-keystone-route-0\n", 1)[1].split("\n\n", 1)[0]
    assert backend.splitlines()[-1] == "    http-request return status 500"
    assert "server keystone-api" not in config and "ca-file" not in config
    assert _backends(programmed)["nova-novncproxy"].tls is None  # what no policy targets still works


@pytest.mark.parametrize(
    ("data", "why"),
    [
        ({"tls.key": "k", "other": "x"}, "has no ca.crt"),
        ({"ca.crt": "not a certificate"}, "'s CA is no PEM"),
    ],
)
def test_a_ca_reference_without_a_usable_ca_fails_closed(data: dict[str, str], why: str) -> None:
    lookup = _lookup({("ConfigMap", "openstack", "internal-ca-trust"): data})
    assert _backends(_program(lookup=lookup)) == {}  # every routed backend's policy names the CA
    programmed = _program(policies=_without_the_consoles_policy(), lookup=lookup)
    assert _backends(programmed).keys() == {"nova-novncproxy"}  # only what no policy targets is served
    assert all(why in status for status in programmed.backend_tls.values()), programmed.backend_tls


def test_a_configmaps_ca_crt_is_trusted_as_the_core_api_says_and_tls_crt_is_envoy_gateways_fallback() -> None:
    ca = _bundle()["ca.crt"]
    policy = _objects("BackendTLSPolicy")[0]
    policy["spec"]["validation"]["caCertificateRefs"] = [{"group": "", "kind": "ConfigMap", "name": "ca"}]
    found = _backends(_program([policy], _lookup({("ConfigMap", "openstack", "ca"): {"ca.crt": ca}})))
    service = policy["spec"]["targetRefs"][0]["name"]
    assert found[service].tls is not None and found[service].tls.ca == ca
    fallback = _backends(_program([policy], _lookup({("ConfigMap", "openstack", "ca"): {"tls.crt": ca, "x": "y"}})))
    assert fallback[service].tls is not None
    other = copy.deepcopy(policy)
    other["spec"]["validation"]["caCertificateRefs"] = [{"group": "", "kind": "ClusterTrustBundle", "name": "ca"}]
    programmed = _program([other])
    assert service not in _backends(programmed)
    assert "InvalidKind" in programmed.backend_tls[f"openstack/{policy['metadata']['name']}"]


def test_what_the_lab_does_not_implement_fails_closed_rather_than_weakening_the_check() -> None:
    policy = _objects("BackendTLSPolicy")[0]
    policy["spec"]["validation"]["subjectAltNames"] = [{"type": "Hostname", "hostname": "other.example.com"}]
    programmed = _program([policy])
    service = policy["spec"]["targetRefs"][0]["name"]
    assert service not in _backends(programmed)
    assert "['subjectAltNames'] not implemented" in programmed.backend_tls[f"openstack/{policy['metadata']['name']}"]


def test_a_section_name_applies_to_its_port_only_and_wins_over_a_policy_for_the_whole_service() -> None:
    keystone = next(p for p in _objects("BackendTLSPolicy") if p["metadata"]["name"] == "keystone-api-backend-tls")
    other_port = copy.deepcopy(keystone)
    other_port["spec"]["targetRefs"][0]["sectionName"] = "metrics"
    assert _backends(_program([other_port]))["keystone-api"].tls is None  # not the route's port: plain
    for_port = copy.deepcopy(keystone)
    for_port["metadata"]["name"] = "z-for-the-port"
    for_port["spec"]["targetRefs"][0]["sectionName"] = "api"
    for_port["spec"]["validation"]["hostname"] = "keystone.example"
    programmed = _program([keystone, for_port])
    tls = _backends(programmed)["keystone-api"].tls
    assert tls is not None and tls.policy == "openstack/z-for-the-port" and tls.hostname == "keystone.example"
    # Two for the same target: the first by namespace/name wins (the lab's objects have no creation time).
    twin = copy.deepcopy(keystone)
    twin["metadata"]["name"] = "a-twin"
    twin["spec"]["validation"]["hostname"] = "twin.example"
    programmed = _program([keystone, twin])
    assert _backends(programmed)["keystone-api"].tls.hostname == "twin.example"  # type: ignore[union-attr]
    assert programmed.backend_tls["openstack/keystone-api-backend-tls"].startswith("Accepted False (Conflicted)")


def test_a_policy_of_another_namespace_does_not_apply() -> None:
    policy = _objects("BackendTLSPolicy")[0]
    policy["metadata"]["namespace"] = "elsewhere"
    programmed = _program([policy])
    assert all(b.tls is None for b in _backends(programmed).values())
    assert programmed.backend_tls == {f"elsewhere/{policy['metadata']['name']}": "targets no backend of an "
                                      "attached route"}  # fmt: skip


def test_the_proxy_files_hold_each_policys_ca_for_haproxy(tmp_path: Path) -> None:
    programmed = _program()
    public = _issued().secrets.get(("openstack", PUBLIC_TLS))
    assert public is not None
    config = write_files(programmed, tmp_path, lambda namespace, name: public.data, lambda b: "10.96.1.5")
    ca = _bundle()["ca.crt"]
    for api in APIS:
        written = tmp_path / ca_file_name(f"openstack/{api}-backend-tls")
        assert written.read_text() == ca
        assert f"ca-file {written} " in config.read_text()
