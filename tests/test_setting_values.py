"""Every mistake in a setting is an error naming the key, the value and what is allowed.

One table per kind of mistake, each case checked like test_settings.MALFORMED.
"""

from __future__ import annotations

import typing
from typing import Any

import pytest
from pydantic import BaseModel

from components.setting_types import Text
from components.settings import Settings, SettingsError

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


def _check(raw: dict[str, Any], key: str, allowed: str) -> None:
    with pytest.raises(SettingsError) as caught:
        Settings.parse(raw)
    found = [p for p in caught.value.problems if p.startswith(key)]
    assert found, caught.value.problems
    assert any(allowed in p and " (got " in p for p in found), found


@pytest.mark.parametrize(("raw", "key", "allowed"), SCRIPT_VALUES, ids=[c[1] + "-" + c[2][:16] for c in SCRIPT_VALUES])
def test_values_for_scripts_and_config_files(raw: dict[str, Any], key: str, allowed: str) -> None:
    _check(raw, key, allowed)


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
