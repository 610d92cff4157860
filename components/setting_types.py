"""The value types of the settings model: every string setting is `Text` or a type built on it.

Settings reach shell scripts (environment variables the start scripts loop over), INI files
and Kubernetes objects. `Text` keeps out what could break out of any of them (line breaks and
other control characters, quotes, command substitution); the narrower types below add what
their consumer accepts. A validator raises ValueError with what is allowed; the model adds
the key and the value.
"""

from __future__ import annotations

import re
from typing import Annotated

from pydantic import AfterValidator, BeforeValidator

_UNSAFE = re.compile(r"[\x00-\x1f\x7f'\"`]|\$\(")


def _plain_text(value: str) -> str:
    if _UNSAFE.search(value):
        raise ValueError("must be plain text: no line breaks or other control characters, no quotes (' \" `), no '$('")
    return value


Text = Annotated[str, AfterValidator(_plain_text)]


def _matching(pattern: str, allowed: str) -> AfterValidator:
    compiled = re.compile(pattern)

    def check(value: str) -> str:
        if not compiled.fullmatch(value):
            raise ValueError(allowed)
        return value

    return AfterValidator(check)


DnsLabel = Annotated[
    Text,
    _matching(
        r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?",
        "must be a DNS-1123 label: lower-case letters, digits and '-', at most 63 characters",
    ),
]
DnsName = Annotated[
    Text,
    _matching(
        r"(?=.{1,253}$)[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*",
        "must be a DNS name such as 'cloud.example.com'",
    ),
]
# Linux: at most 15 bytes (IFNAMSIZ - 1), no '/', ':' or whitespace; kept to the usual characters.
InterfaceName = Annotated[
    Text, _matching(r"[A-Za-z0-9_.-]{1,15}", "must be a network interface name (1-15 of a-z A-Z 0-9 . _ -)")
]
# neutron's physical_network (at most 64 characters), written into ml2_conf.ini and
# openvswitch_agent.ini lists as 'physnet:bridge,...' and 'physnet:first:last,...'.
PhysnetName = Annotated[
    Text,
    _matching(
        r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}",
        "must be a physical network name: 1-64 of a-z A-Z 0-9 . _ -, starting with a letter or digit",
    ),
]
# libvirt's CPU model names (virsh cpu-models x86_64), e.g. 'Haswell-noTSX-IBRS', 'EPYC-Rome';
# nova.conf lists them separated by ','.
CpuModel = Annotated[
    Text,
    _matching(
        r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}",
        "must be a libvirt CPU model name such as 'Haswell-noTSX-IBRS' (a-z A-Z 0-9 . _ -)",
    ),
]
MAX_VLAN = 4094  # 0 and 4095 are reserved (IEEE 802.1Q)


def _vlan_range(value: str) -> str:
    allowed = f"must be 'physnet:first:last' with 1 <= first <= last <= {MAX_VLAN}, e.g. 'physnet1:100:199'"
    match = re.fullmatch(r"([^:]+):([0-9]{1,5}):([0-9]{1,5})", value)
    if not match:
        raise ValueError(allowed)
    physnet, first, last = match[1], int(match[2]), int(match[3])
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}", physnet):
        raise ValueError(f"{allowed}; {physnet!r} is no physical network name")
    if not 1 <= first <= last <= MAX_VLAN:
        raise ValueError(allowed)
    return value


VlanRange = Annotated[Text, AfterValidator(_vlan_range)]
_QUANTITY = re.compile(r"^[0-9]+(\.[0-9]+)?(m|k|Ki|Mi|Gi|Ti|Pi|M|G|T|P|E|Ei)?$")


def _quantity(value: str) -> str:
    if not _QUANTITY.match(str(value)):
        raise ValueError("must be a Kubernetes quantity such as '500m', '2', '512Mi' or '10Gi'")
    return str(value)


Quantity = Annotated[
    Text, BeforeValidator(lambda v: str(v) if isinstance(v, int | float) else v), AfterValidator(_quantity)
]
_LABEL_KEY = re.compile(r"^([a-z0-9]([-a-z0-9.]*[a-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$")
_LABEL_VALUE = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?$")


def _label_map(value: dict[str, str]) -> dict[str, str]:
    for key, label in value.items():
        if not _LABEL_KEY.match(key):
            raise ValueError(f"label key {key!r} is not a valid Kubernetes label key")
        if not _LABEL_VALUE.match(str(label)):
            raise ValueError(f"label value {label!r} of {key!r} is not a valid Kubernetes label value")
    return {k: str(v) for k, v in value.items()}


LabelMap = Annotated[dict[Text, Text], AfterValidator(_label_map)]
