"""The front door's settings: `gateway` and `tls`, refused with the key and what is allowed."""

from __future__ import annotations

import json
from typing import Any

import pytest

from components.cloud.stack_config import parse_settings, settings_from_config
from components.settings.model import SettingsError

# A Gateway of the cluster's own Envoy Gateway: where it runs the proxies, said (its default namespace).
CREATED = {"className": "envoy-gateway", "proxies": {"namespace": "envoy-gateway-system"}}
EXISTING = {"existing": {"name": "public", "namespace": "gateways"}}
PLAIN: dict[str, Any] = {"internal": {"plainText": True}}
PUBLIC_ISSUER: dict[str, Any] = {"kind": "ClusterIssuer", "name": "letsencrypt"}
SELF_SIGNED: dict[str, Any] = {"public": {"selfSigned": True}, **PLAIN}
ISSUER: dict[str, Any] = {"public": {"issuer": PUBLIC_ISSUER}, **PLAIN}
INTERNAL_ISSUER: dict[str, Any] = {"issuer": {"kind": "ClusterIssuer", "name": "internal-ca"}}

# (settings, the key the error must name, a fragment of what it must say is allowed)
REFUSED: list[tuple[dict[str, Any], str, str]] = [
    # `gateway: {}` is unset (Pulumi.yaml's default): a gateway of only proxies names no Gateway.
    ({"gateway": {"proxies": {"namespace": "gw"}}, "tls": SELF_SIGNED}, "openstack:gateway", "exactly one of them"),
    ({"gateway": {**CREATED, **EXISTING}, "tls": SELF_SIGNED}, "openstack:gateway", "existing ({name, namespace"),
    # The program's own CA Issuers serve one key each: naming another's mixes public, internal or libvirt trust.
    (
        {"gateway": CREATED, "tls": {"public": {"issuer": {"kind": "Issuer", "name": "internal-ca"}}, **PLAIN}},
        "openstack:tls.public.issuer",
        "program's own CA for tls.internal",
    ),
    (
        {
            "gateway": CREATED,
            "tls": {"public": {"selfSigned": True}, "internal": {"issuer": {"kind": "Issuer", "name": "public-ca"}}},
        },
        "openstack:tls.internal.issuer",
        "program's own CA for tls.public",
    ),
    (
        {
            "gateway": CREATED,
            "tls": {
                "public": {"selfSigned": True},
                "internal": {"issuer": {"kind": "Issuer", "name": "libvirt-ca-selfsigned"}},
            },
        },
        "openstack:tls.internal.issuer",
        "program's own CA for tls.libvirt",
    ),
    # Another implementation's class, its proxies left at Envoy Gateway's default: they would be unreachable.
    ({"gateway": {"className": "cilium"}, "tls": SELF_SIGNED}, "openstack:gateway", "set proxies ({namespace, labels}"),
    (
        {"gateway": {**EXISTING, "envoyGateway": {"install": True}}, "tls": SELF_SIGNED},
        "openstack:gateway",
        "set install: false",
    ),
    (
        {"gateway": {**CREATED, "envoyGateway": {"chartVersion": "1.9.0"}}, "tls": SELF_SIGNED},
        "openstack:gateway.envoyGateway.chartVersion",
        "'v' and one exact SemVer release",
    ),
    (
        {"gateway": {**CREATED, "envoyGateway": {"chartVersion": "latest"}}, "tls": SELF_SIGNED},
        "openstack:gateway.envoyGateway.chartVersion",
        "such as 'v1.9.0'",
    ),
    ({"gateway": {"className": "Envoy_Gateway"}, "tls": SELF_SIGNED}, "openstack:gateway.className", "object name"),
    (
        {"gateway": {"existing": {"name": "public"}}, "tls": SELF_SIGNED},
        "openstack:gateway.existing.namespace",
        "required",
    ),
    (
        {"gateway": {"existing": {"name": "public", "namespace": "gw", "sectionName": "HTTPS"}}, "tls": SELF_SIGNED},
        "openstack:gateway.existing.sectionName",
        "object name",
    ),
    ({"gateway": {**CREATED, "port": 443}, "tls": SELF_SIGNED}, "openstack:gateway.port", "unknown setting"),
    ({"gateway": CREATED}, "openstack:tls.public", "name its issuer"),
    ({"tls": SELF_SIGNED}, "openstack:tls.public", "set gateway (existing or className) too"),
    ({"gateway": CREATED, "tls": {"public": {}}}, "openstack:tls.public", "exactly one of them"),
    (
        {"gateway": CREATED, "tls": {"public": {**ISSUER["public"], "selfSigned": True}}},
        "openstack:tls.public",
        "issuer: {kind: Issuer or ClusterIssuer, name}",
    ),
    (
        {"gateway": CREATED, "tls": {"public": {"issuer": {"kind": "Acme", "name": "x"}}}},
        "openstack:tls.public.issuer.kind",
        "'Issuer' or 'ClusterIssuer'",
    ),
    (
        {"gateway": CREATED, "tls": {"public": {"issuer": {"kind": "Issuer"}}}},
        "openstack:tls.public.issuer.name",
        "required",
    ),
    ({"gateway": CREATED, "tls": {**SELF_SIGNED, "internal": {}}}, "openstack:tls.internal", "exactly one of them"),
    (
        {"gateway": CREATED, "tls": {**SELF_SIGNED, "internal": {**INTERNAL_ISSUER, "plainText": True}}},
        "openstack:tls.internal",
        "plainText: true to keep the APIs on http",
    ),
    ({"gateway": CREATED, "tls": {"public": {"selfSigned": True}}}, "openstack:tls.internal", "name the internal CA"),
    (
        {"gateway": CREATED, "tls": {**ISSUER, "internal": {"issuer": ISSUER["public"]["issuer"]}}},
        "openstack:tls.internal.issuer",
        "the internal CA must be another one",
    ),
    (
        {"gateway": CREATED, "tls": {**ISSUER, "internal": INTERNAL_ISSUER, "libvirt": INTERNAL_ISSUER}},
        "openstack:tls.libvirt.issuer",
        "tls.internal's issuer: libvirt's CA must be a separate one",
    ),
    (
        {"gateway": CREATED, "tls": {**ISSUER, "libvirt": {"issuer": ISSUER["public"]["issuer"]}}},
        "openstack:tls.libvirt.issuer",
        "tls.public's issuer",
    ),
    ({"gateway": CREATED, "tls": {**SELF_SIGNED, "libvirt": {}}}, "openstack:tls.libvirt", "hypervisors' certif"),
    (
        {"gateway": CREATED, "tls": {**SELF_SIGNED, "libvirt": {"selfSigned": True}}, "kubernetesVersion": "1.29"},
        "openstack:kubernetesVersion",
        "tls.libvirt needs Kubernetes 1.30 or later",
    ),
    (
        {"gateway": CREATED, "tls": SELF_SIGNED, "endpoints": {"scheme": "http"}},
        "openstack:endpoints.scheme",
        "must be https",
    ),
    (
        {"gateway": {**CREATED, "proxies": {"namespace": "openstack"}}, "tls": SELF_SIGNED},
        "openstack:gateway.proxies.labels",
        "give their labels",
    ),
    (
        {"gateway": {**CREATED, "proxies": {"labels": {"bad key!": "x"}}}, "tls": SELF_SIGNED},
        "openstack:gateway.proxies.labels.bad key!",
        "label key",
    ),
]


@pytest.mark.parametrize(("raw", "key", "allowed"), REFUSED, ids=[f"{r[1]}-{r[2][:16]}" for r in REFUSED])
def test_front_door_settings_name_the_key_and_what_is_allowed(raw: dict[str, Any], key: str, allowed: str) -> None:
    with pytest.raises(SettingsError) as caught:
        parse_settings(raw)
    assert [p for p in caught.value.problems if p.startswith(f"{key}:") and allowed in p], caught.value.problems


@pytest.mark.parametrize(
    "raw",
    [
        {},
        {"gateway": CREATED, "tls": SELF_SIGNED},
        {"gateway": {**CREATED, "envoyGateway": {"install": True}}, "tls": ISSUER},
        {"gateway": {**EXISTING, "proxies": {"namespace": "openstack", "labels": {"gateway": "x"}}}, "tls": ISSUER},
        {"gateway": {"existing": {**EXISTING["existing"], "sectionName": "https"}}, "tls": ISSUER},
        {"gateway": CREATED, "tls": {**ISSUER, "internal": INTERNAL_ISSUER}},
        {"gateway": CREATED, "tls": {**ISSUER, "internal": {"selfSigned": True}}},
        # Internal TLS without a front door: the APIs' clients inside the cluster verify them all the same.
        {"tls": {"internal": {"selfSigned": True}}},
        # libvirt's CA of its own, without or with a front door and an internal CA of other issuers.
        {"tls": {"libvirt": {"selfSigned": True}}},
        {
            "gateway": CREATED,
            "tls": {
                **ISSUER,
                "internal": INTERNAL_ISSUER,
                "libvirt": {"issuer": {"kind": "ClusterIssuer", "name": "hypervisors"}},
            },
        },
    ],
)
def test_a_gateway_with_an_issuer_is_accepted(raw: dict[str, Any]) -> None:
    settings = parse_settings(raw)
    assert (settings.gateway is None) == ("gateway" not in raw)


def test_the_installed_gateway_keeps_the_pinned_chart_version_when_given_in_part() -> None:
    settings = parse_settings({"gateway": {**CREATED, "envoyGateway": {"install": True}}, "tls": SELF_SIGNED})
    assert settings.gateway is not None
    assert settings.gateway.envoy_gateway.chart_version == "v1.9.0"
    assert settings.gateway.proxies.namespace == "envoy-gateway-system"


def test_the_stack_file_gives_gateway_and_tls_as_objects() -> None:
    """The engine hands an object setting over as JSON text; an optional one (`gateway`, None by
    default) is an object too, not text that the model would refuse."""
    config = {
        "openstack:gateway": json.dumps({"existing": {"name": "public", "namespace": "gateways"}}),
        "openstack:tls": json.dumps(ISSUER),
    }
    settings = settings_from_config(config)
    assert settings.gateway is not None and settings.gateway.existing is not None
    assert settings.gateway.existing.namespace == "gateways"
    assert settings.tls.public is not None and settings.tls.public.issuer is not None
    assert settings.tls.public.issuer.kind == "ClusterIssuer"


@pytest.mark.parametrize(
    ("internal", "enabled"),
    [(None, False), ({"plainText": True}, False), ({"selfSigned": True}, True), (INTERNAL_ISSUER, True)],
)
def test_internal_tls_is_on_exactly_when_a_ca_is_named(internal: dict[str, Any] | None, enabled: bool) -> None:
    tls = {**ISSUER, "internal": internal} if internal else {"public": ISSUER["public"]}
    raw = {"gateway": CREATED, "tls": tls} if internal else {}
    assert parse_settings(raw).tls.internal_enabled is enabled
