"""The value types of the settings model: every string setting is `Text` or a type built on it.

Settings reach shell scripts (environment variables the start scripts loop over), INI files
and Kubernetes objects. `Text` keeps out what could break out of any of them (line breaks and
other control characters, quotes, command substitution); the narrower types below add what
their consumer accepts. A validator raises ValueError with what is allowed; the model adds
the key and the value.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Annotated

from pydantic import AfterValidator, BeforeValidator

from components.settings import cron
from components.settings.memory import value_of
from components.settings.problems import Problem, problem

# Of `kubernetesVersion`: the first minor version where admissionregistration.k8s.io/v1
# ValidatingAdmissionPolicy is GA (1.30); the settings that narrow a right with one need it.
MIN_ADMISSION_POLICY_MINOR = 30


def admission_policy_problems(kubernetes_version: str, who: str, narrows: str, otherwise: str) -> Iterator[Problem]:
    """A problem of `kubernetesVersion` where the cluster is older than ValidatingAdmissionPolicy:
    `who` needs it because `narrows`, and `otherwise` is the setting that does without."""
    if int(kubernetes_version.split(".")[1]) >= MIN_ADMISSION_POLICY_MINOR:
        return
    least = f"1.{MIN_ADMISSION_POLICY_MINOR}"
    yield problem(("kubernetesVersion",), kubernetes_version, f"{who} needs Kubernetes {least} or later: {narrows}; "
                  f"set kubernetesVersion to the cluster's ({least} or later), or {otherwise}")  # fmt: skip


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
_LABEL = r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?"
# A host name: labels of at most 63 characters, 253 in all (RFC 1123).
DnsName = Annotated[
    Text,
    _matching(
        rf"(?=.{{1,253}}$){_LABEL}(\.{_LABEL})*",
        "must be a DNS name such as 'cloud.example.com': labels of lower-case letters, digits and '-', "
        "at most 63 characters each, 253 in all",
    ),
]
# A Kubernetes object name such as a storage class's (IsDNS1123Subdomain: no limit per label).
DnsSubdomain = Annotated[
    Text,
    _matching(
        r"(?=.{1,253}$)[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*",
        "must be a Kubernetes object name (a DNS subdomain): lower-case letters, digits, '-' and '.', "
        "starting and ending with a letter or digit, at most 253 characters",
    ),
]
# cinder's [DEFAULT] cluster: services and volumes are named '<cluster>@<backend>#<pool>', so neither
# separator may appear in it (cinder/volume/volume_utils.py extract_host splits on them).
CinderClusterName = Annotated[
    Text,
    _matching(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,62}", "must be 1-63 of a-z A-Z 0-9 . _ -, starting with a letter or digit"),
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


def _number(value: object) -> object:
    return str(value) if isinstance(value, int | float) and not isinstance(value, bool) else value


def _cpu(value: str) -> str:
    allowed = "must be CPU cores such as '2' or '0.5', or millicores such as '500m', more than 0"
    if not re.fullmatch(r"[0-9]+(\.[0-9]+)?m?", value) or value_of(value) <= 0:
        raise ValueError(allowed)
    return value


def _size(value: str) -> str:
    allowed = (
        "must be a size with a unit, binary ('512Mi', '10Gi') or decimal ('500M', '10G'), more than 0; "
        "a bare number is bytes and 'm' thousandths of a byte"
    )
    if not re.fullmatch(r"[0-9]+(\.[0-9]+)?(k|M|G|T|P|E|Ki|Mi|Gi|Ti|Pi|Ei)", value) or value_of(value) < 1:
        raise ValueError(allowed)
    return value


CpuQuantity = Annotated[Text, BeforeValidator(_number), AfterValidator(_cpu)]
ByteQuantity = Annotated[Text, BeforeValidator(_number), AfterValidator(_size)]

# Label keys: an optional prefix, a DNS subdomain of labels of at most 63 characters (253 in
# all), then '/' and a name of at most 63 characters; values: at most 63, or empty.
_LABEL_NAME = r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?"
LabelKey = Annotated[
    Text,
    _matching(
        rf"((?=[^/]{{1,253}}/){_LABEL}(\.{_LABEL})*/)?{_LABEL_NAME}",
        "must be a Kubernetes label key: an optional DNS subdomain prefix and '/', then a name of at most "
        "63 of a-z A-Z 0-9 - _ . starting and ending with a letter or digit",
    ),
]
LabelValue = Annotated[
    Text,
    _matching(
        rf"({_LABEL_NAME})?",
        "must be a Kubernetes label value: at most 63 of a-z A-Z 0-9 - _ . starting and ending with a letter or "
        "digit (quote true, false and numbers)",
    ),
]
LabelMap = dict[LabelKey, LabelValue]

# Image references as container runtimes parse them (github.com/distribution/reference).
_PATH_COMPONENT = r"[a-z0-9]+((\.|_|__|-+)[a-z0-9]+)*"
_DOMAIN_COMPONENT = r"([a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])"
_DOMAIN = rf"({_DOMAIN_COMPONENT}(\.{_DOMAIN_COMPONENT})*|\[[0-9A-Fa-f:.]+\])(:[0-9]+)?"
_NAME = rf"(?P<domain>{_DOMAIN}/)?{_PATH_COMPONENT}(/{_PATH_COMPONENT})*"
_TAG = r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}"
_DIGEST = r"(?P<algorithm>[A-Za-z][A-Za-z0-9]*([-_+.][A-Za-z][A-Za-z0-9]*)*):(?P<hex>[0-9a-fA-F]+)"
_REFERENCE = re.compile(rf"(?P<name>{_NAME})(:(?P<tag>{_TAG}))?(@(?P<digest>{_DIGEST}))?")
_NO_LATEST = "'latest' names whatever was pushed last: pin a release tag or a digest"


def _registry(value: str) -> str:
    if not re.fullmatch(_NAME, value):
        raise ValueError(
            "must be a registry and repository path such as 'quay.io/openstack.kolla' or "
            "'registry.local:5000/kolla': no scheme, tag or trailing '/', lower-case path"
        )
    return value


def _tag(value: str) -> str:
    if not re.fullmatch(_TAG, value):
        raise ValueError("must be an image tag: 1-128 of a-z A-Z 0-9 _ . -, not starting with '.' or '-'")
    if value == "latest":
        raise ValueError(_NO_LATEST)
    return value


def _reference(value: str) -> str:
    allowed = "must be an image reference pinned with ':<tag>' or '@<digest>', e.g. 'registry.local/keystone:2026.1'"
    match = _REFERENCE.fullmatch(value)
    if not match or len(match["name"]) > 255:
        raise ValueError(f"{allowed} (registry, then a lower-case repository path)")
    if not match["tag"] and not match["digest"]:
        raise ValueError(f"{allowed}; this one is not pinned")
    if match["tag"] == "latest":
        raise ValueError(_NO_LATEST)
    digits = len(match["hex"] or "")
    if match["digest"] and (digits < 32 or (match["algorithm"] == "sha256" and digits != 64)):
        raise ValueError(f"{allowed}; a digest has at least 32 hexadecimal digits, a sha256 one 64")
    return value


ImageRegistry = Annotated[Text, AfterValidator(_registry)]
ImageTag = Annotated[Text, AfterValidator(_tag)]
ImageReference = Annotated[Text, AfterValidator(_reference)]


def _cron_schedule(value: str) -> str:
    cron.parse(value)  # raises ValueError with what is wrong and the syntax
    return value


# A CronJob's (or mariadb-operator Backup's) schedule, checked as Kubernetes parses it (components/settings/cron.py).
CronSchedule = Annotated[Text, AfterValidator(_cron_schedule)]

# Go's time.ParseDuration, which reads metav1.Duration fields such as a Backup's maxRetention:
# a sequence of numbers with units ns, us (µs), ms, s, m, h; no days.
_GO_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "μs": 1e-6, "ms": 1e-3, "s": 1, "m": 60, "h": 3600}
_GO_DURATION = re.compile(r"(?:([0-9]+(?:\.[0-9]*)?|\.[0-9]+)(ns|us|µs|μs|ms|s|m|h))+")


def duration_seconds(value: str) -> float:
    """The seconds a Go duration such as '168h' or '1h30m' stands for."""
    return sum(float(n) * _GO_UNITS[unit] for n, unit in re.findall(r"([0-9.]+)(ns|us|µs|μs|ms|s|m|h)", value))


def _duration(value: str) -> str:
    if not _GO_DURATION.fullmatch(value) or duration_seconds(value) <= 0:
        raise ValueError("must be a duration as Go writes it, more than 0, such as '168h' or '720h' (units h, m, s)")
    return value


Duration = Annotated[Text, AfterValidator(_duration)]
# AWS's naming rules for general purpose buckets, which S3-compatible stores follow (the
# prefixes and suffixes are reserved for AWS's own access points and aliases).
_BUCKET_RESERVED_PREFIXES = ("xn--", "sthree-", "amzn-s3-demo-")
_BUCKET_RESERVED_SUFFIXES = ("-s3alias", "--ol-s3", ".mrap", "--x-s3", "--table-s3")


def _bucket(value: str) -> str:
    rules = "must be an S3 bucket name: 3-63 of a-z 0-9 . -, starting and ending with a letter or digit"
    if not re.fullmatch(r"(?=.{3,63}$)[a-z0-9][a-z0-9.-]*[a-z0-9]", value):
        raise ValueError(rules)
    if ".." in value:
        raise ValueError(f"{rules}, without two periods in a row")
    if ".-" in value or "-." in value:
        raise ValueError(f"{rules}, without a period next to a hyphen (no DNS name has one)")
    if re.fullmatch(r"[0-9]+(\.[0-9]+){3}", value):
        raise ValueError(f"{rules}, not an IP address")
    reserved = [p for p in _BUCKET_RESERVED_PREFIXES if value.startswith(p)]
    reserved += [s for s in _BUCKET_RESERVED_SUFFIXES if value.endswith(s)]
    if reserved:
        raise ValueError(f"{rules}; {reserved[0]!r} is reserved by AWS")
    return value


S3Bucket = Annotated[Text, AfterValidator(_bucket)]
MAX_PORT = 65535


def _endpoint(value: str) -> str:
    allowed = (
        "must be a host name and optional port (1-65535) without scheme, such as 's3.us-east-1.amazonaws.com' or "
        "'minio.storage.svc:9000'"
    )
    match = re.fullmatch(rf"{_LABEL}(\.{_LABEL})*(:(?P<port>[0-9]{{1,5}}))?", value)
    if not match or (match["port"] is not None and not 1 <= int(match["port"]) <= MAX_PORT):
        raise ValueError(allowed)
    return value


# An S3 endpoint as mariadb-operator takes it: a host and optional port, without scheme.
S3Endpoint = Annotated[Text, AfterValidator(_endpoint)]


def _count(value: object) -> object:
    # JSON's true is no number, though Python's bool is an int: `replicas: true` is a mistake.
    if isinstance(value, bool):
        raise ValueError("must be a whole number, not true or false")
    return value


# How many of something: replicas, MiB, CPUs, days.
Count = Annotated[int, BeforeValidator(_count)]


def _nodes_at_once(value: object) -> object:
    allowed = "must be a number of nodes, 1 or more, or a percentage of them from '1%' to '100%' such as '25%'"
    if isinstance(value, bool) or not isinstance(value, int | str) or (isinstance(value, int) and value < 1):
        raise ValueError(allowed)
    if isinstance(value, str) and not re.fullmatch(r"(100|[1-9][0-9]?)%", value):
        raise ValueError(allowed)
    return value


# How many nodes a DaemonSet's rolling update takes pods away from at once (its maxUnavailable): a
# number, or a percentage of the nodes that run it, which Kubernetes rounds up (at least one node).
NodesAtOnce = Annotated[int | Text, BeforeValidator(_nodes_at_once)]
# A Helm chart's version: SemVer 2 (Helm refuses a chart whose version is not), one exact release;
# the chart is pulled by it (a range or 'latest' would pull whatever was published last).
ChartVersion = Annotated[
    Text,
    _matching(
        r"(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)(-[0-9A-Za-z.-]+)?(\+[0-9A-Za-z.-]+)?",
        "must be a chart version: one exact SemVer release such as '26.6.0' or '26.7.0-rc.1' (no range, "
        "no 'latest', no leading 'v')",
    ),
]
# A chart published under its project's release tag, 'v' and SemVer (Envoy Gateway's gateway-helm:
# `helm install ... --version v1.7.0`); Helm reads the 'v', and the tag is the one name it has.
TaggedChartVersion = Annotated[
    Text,
    _matching(
        r"v(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)(-[0-9A-Za-z.-]+)?",
        "must be a chart version as the project tags its releases: 'v' and one exact SemVer release such as "
        "'v1.9.0' (no range, no 'latest')",
    ),
]
