"""Every mistake in a setting is an error naming the key, the value and what is allowed.

One table per kind of mistake, each case checked like test_settings.MALFORMED.
"""

from __future__ import annotations

import typing
from typing import Any

import pytest
from pydantic import BaseModel

from components.cloud.stack_config import parse_settings
from components.settings.model import Settings, SettingsError
from components.settings.value_types import Text

Case = tuple[dict[str, Any], str, str]  # (settings, the key the error names, a fragment of what is allowed)

VLAN = {"tenantNetworkType": "vlan"}
CUSTOM_CPU = {"name": "g", "cpuMode": "custom"}

# Values that are written into shell scripts' environment, INI files and libvirt's configs.
SCRIPT_VALUES: list[Case] = [
    (
        {"neutron": {"bridgeMappings": {"physnet1": "br-ex", "physnet2": "br-ex"}}},
        "openstack:neutron.bridgeMappings",
        "one bridge per physical network; mapped more than once: br-ex",
    ),
    ({"neutron": {"bridgeMappings": {"physnet1": "br-int"}}}, "openstack:neutron.bridgeMappings", "br-int belongs"),
    ({"neutron": {"bridgeMappings": {"phys:net": "br-ex"}}}, "openstack:neutron.bridgeMappings.phys:net", "physical"),
    ({"neutron": {"bridgeMappings": {"a,b": "br-ex"}}}, "openstack:neutron.bridgeMappings.a,b", "a-z A-Z 0-9 . _ -"),
    ({"neutron": {"bridgeMappings": {"phys net": "br-ex"}}}, "openstack:neutron.bridgeMappings.phys net", "1-64"),
    ({"neutron": {**VLAN, "vlanRanges": ["physnet1:0:99"]}}, "openstack:neutron.vlanRanges.0", "1 <= first"),
    ({"neutron": {**VLAN, "vlanRanges": ["physnet1:100:4095"]}}, "openstack:neutron.vlanRanges.0", "<= 4094"),
    ({"neutron": {**VLAN, "vlanRanges": ["physnet1:200:100"]}}, "openstack:neutron.vlanRanges.0", "first <= last"),
    ({"neutron": {**VLAN, "vlanRanges": ["physnet1:a:b"]}}, "openstack:neutron.vlanRanges.0", "physnet:first:last"),
    ({"neutron": {**VLAN, "vlanRanges": ["physnet1:100"]}}, "openstack:neutron.vlanRanges.0", "physnet:first:last"),
    (
        {"neutron": {**VLAN, "bridgeMappings": {"a,b": "br-ex"}, "vlanRanges": ["a,b:1:2"]}},
        "openstack:neutron.vlanRanges.0",
        "no physical network name",
    ),
    (
        {"compute": {"nodeGroups": [{**CUSTOM_CPU, "cpuModels": ["Haswell,Broadwell"]}]}},
        "openstack:compute.nodeGroups.0.cpuModels.0",
        "libvirt CPU model name",
    ),
    (
        {"compute": {"nodeGroups": [{**CUSTOM_CPU, "cpuModels": ["Skylake Server"]}]}},
        "openstack:compute.nodeGroups.0.cpuModels.0",
        "'Haswell-noTSX-IBRS'",
    ),
    ({"images": {"registry": "quay.io/kolla\nnext"}}, "openstack:images.registry", "no line breaks"),
    ({"images": {"tag": "2026.1$(reboot)"}}, "openstack:images.tag", "no '$('"),
    ({"operators": {"mariadb": {"chartVersion": '26.6.0"'}}}, "openstack:operators.mariadb.chartVersion", "quotes"),
    (
        {"cinder": {"backend": "nfs", "nfsShares": ["nfs:/export'$(id)'"]}},
        "openstack:cinder.nfsShares.0",
        "plain text",
    ),
    (
        {"images": {"overrides": {"keystone": "example.org/keystone:1`id`"}}},
        "openstack:images.overrides.keystone",
        "quotes (' \" `)",
    ),
    ({"compute": {"nodeGroups": [{**CUSTOM_CPU, "cpuModels": ["Haswell\tx"]}]}}, "openstack:compute", "control"),
]


DIGEST = "sha256:" + "0123456789abcdef" * 4
LONG_LABEL = "a" * 64  # one more than a DNS label or a label name may have

# Values Kubernetes refuses, or reads as something else than meant.
KUBERNETES_VALUES: list[Case] = [
    ({"storage": {"mariadbSize": "10"}}, "openstack:storage.mariadbSize", "a size with a unit"),
    ({"storage": {"glanceSize": 500}}, "openstack:storage.glanceSize", "binary ('512Mi', '10Gi')"),
    ({"storage": {"rabbitmqSize": "512m"}}, "openstack:storage.rabbitmqSize", "'m' thousandths of a byte"),
    ({"cinder": {"lvmSize": "0Gi"}}, "openstack:cinder.lvmSize", "more than 0"),
    ({"resources": {"default": {"requestsMemory": "256"}}}, "openstack:resources.default.requestsMemory", "unit"),
    ({"resources": {"default": {"limitsCpu": "2Gi"}}}, "openstack:resources.default.limitsCpu", "CPU cores"),
    ({"resources": {"default": {"requestsCpu": "0"}}}, "openstack:resources.default.requestsCpu", "more than 0"),
    (
        {"resources": {"default": {"requestsMemory": "2Gi"}}},
        "openstack:resources.default.requestsMemory",
        "default's memory request (2Gi) must be at most its limit (1Gi)",
    ),
    (
        {"resources": {"default": {"limitsCpu": "1"}, "keystone-api": {"requestsCpu": "1500m"}}},
        "openstack:resources.keystone-api.requestsCpu",
        "keystone-api's cpu request (1500m) must be at most its limit (1)",
    ),
    (
        {"resources": {"default": {"requestsCpu": "2", "limitsCpu": "4"}, "nova-api": {"limitsCpu": "1"}}},
        "openstack:resources.nova-api.limitsCpu",
        "nova-api's cpu request (2) must be at most its limit (1)",
    ),
    (
        {"resources": {"mariadb": {"requestsMemory": "4Gi", "limitsMemory": "2Gi"}}},
        "openstack:resources.mariadb.requestsMemory",
        "takes what it does not set from resources.default",
    ),
    ({"nodeSelectors": {"compute": {"a..b/key": "x"}}}, "openstack:nodeSelectors.compute.a..b/key", "label key"),
    ({"nodeSelectors": {"network": {"example.-com/k": "x"}}}, "openstack:nodeSelectors.network", "DNS subdomain"),
    ({"nodeSelectors": {"storage": {f"{LONG_LABEL}.com/k": "x"}}}, "openstack:nodeSelectors.storage", "label key"),
    ({"nodeSelectors": {"controlPlane": {"a." * 127 + "a/k": "x"}}}, "openstack:nodeSelectors.controlPlane", "prefix"),
    ({"storage": {"storageClass": "Fast_SSD"}}, "openstack:storage.storageClass", "Kubernetes object name"),
    ({"endpoints": {"domain": f"{LONG_LABEL}.example.com"}}, "openstack:endpoints.domain", "63 characters each"),
    ({"endpoints": {"hosts": {"keystone": f"id.{LONG_LABEL}.org"}}}, "openstack:endpoints.hosts.keystone", "DNS"),
    ({"endpoints": {"clusterDomain": f"cluster.{LONG_LABEL}"}}, "openstack:endpoints.clusterDomain", "DNS name"),
    ({"images": {"registry": "https://quay.io/kolla"}}, "openstack:images.registry", "no scheme"),
    ({"images": {"registry": "quay.io/kolla/"}}, "openstack:images.registry", "trailing '/'"),
    ({"images": {"registry": "quay.io/OpenStack.Kolla"}}, "openstack:images.registry", "lower-case path"),
    ({"images": {"tag": "latest"}}, "openstack:images.tag", "pin a release tag or a digest"),
    ({"images": {"tag": "2026.1/noble"}}, "openstack:images.tag", "image tag"),
    ({"images": {"overrides": {"keystone": "example.org/keystone:"}}}, "openstack:images.overrides.keystone", "tag"),
    ({"images": {"overrides": {"glance-api": "r.io/glance-api@sha256:abc"}}}, "openstack:images.overrides", "64"),
    ({"images": {"overrides": {"nova-api": "example.org/Nova-API:1.0"}}}, "openstack:images.overrides", "lower-case"),
    ({"images": {"overrides": {"horizon": "example.org//horizon:1"}}}, "openstack:images.overrides", "image reference"),
    (
        {"images": {"overrides": {"keystone": f"example.org/keystone:latest@{DIGEST}"}}},
        "openstack:images.overrides.keystone",
        "'latest' names whatever was pushed last",
    ),
]


def _check(raw: dict[str, Any], key: str, allowed: str) -> None:
    with pytest.raises(SettingsError) as caught:
        parse_settings(raw)
    found = [p for p in caught.value.problems if p.startswith(key)]
    assert found, caught.value.problems
    assert any(allowed in p and " (got " in p for p in found), found


@pytest.mark.parametrize(("raw", "key", "allowed"), SCRIPT_VALUES, ids=[c[1] + "-" + c[2][:16] for c in SCRIPT_VALUES])
def test_values_for_scripts_and_config_files(raw: dict[str, Any], key: str, allowed: str) -> None:
    _check(raw, key, allowed)


@pytest.mark.parametrize(
    ("raw", "key", "allowed"), KUBERNETES_VALUES, ids=[c[1] + "-" + c[2][:16] for c in KUBERNETES_VALUES]
)
def test_kubernetes_values(raw: dict[str, Any], key: str, allowed: str) -> None:
    _check(raw, key, allowed)


@pytest.mark.parametrize(
    "raw",
    [
        {"storage": {"mariadbSize": "500G", "storageClass": "a" * 64}},  # a class name has no limit per label
        {"resources": {"default": {"requestsCpu": "2", "limitsCpu": "2", "limitsMemory": "2Gi"}}},
        {"resources": {"default": {"requestsCpu": 0.5, "limitsCpu": 4}}},  # CPU without a unit is cores
        {"nodeSelectors": {"compute": {"node-role.kubernetes.io/compute": "", "kubernetes.io/arch": "amd64"}}},
        {"images": {"registry": "registry.local:5000/kolla", "overrides": {"keystone": f"r.io/k/keystone@{DIGEST}"}}},
    ],
)
def test_kubernetes_values_that_are_fine(raw: dict[str, Any]) -> None:
    parse_settings(raw)


def test_a_workloads_resources_take_what_they_do_not_set_from_default() -> None:
    settings = parse_settings({"resources": {"default": {"limitsMemory": "4Gi"}, "mariadb": {"requestsCpu": "1"}}})
    mariadb = settings.resources_of("mariadb")
    assert (mariadb.requests_cpu, mariadb.limits_memory, mariadb.requests_memory) == ("1", "4Gi", "256Mi")


def _strings_without_text(annotation: Any, where: str) -> list[str]:
    """Places where the model takes a bare `str`, not `Text` (or a type built on it)."""
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if annotation is str:
        return [where]
    if origin is typing.Annotated:
        base, *metadata = args
        if base is str:
            text_checks = typing.get_args(Text)[1:]
            return [] if any(m in text_checks for m in metadata) else [where]
        return _strings_without_text(base, where)
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [
            found
            for name, info in annotation.model_fields.items()
            for found in _strings_without_text(
                typing.Annotated[(info.annotation, *info.metadata)] if info.metadata else info.annotation,
                f"{where}.{name}",
            )
        ]
    return [found for arg in args for found in _strings_without_text(arg, where)]


def test_every_string_setting_is_plain_text() -> None:
    assert _strings_without_text(Settings, "Settings") == []
