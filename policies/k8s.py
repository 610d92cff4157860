"""A Kubernetes object as the rules see it, whoever hands it over.

The engine hands the pack read-only proxies (Mapping/Sequence, not dict/list) that
raise when a value is unknown during preview; the offline plan and manifest files hand
over plain dicts. The accessors here work on both and touch only the keys a rule asks
for, so an unknown value elsewhere (a config checksum, say) never stops a rule.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

# Objects rendered from these charts or read from these manifests (an operator's release
# manifest) were written by a third party, not by this program.
CHART_TYPES = ("kubernetes:helm.sh/v3:Chart", "kubernetes:helm.sh/v4:Chart", "kubernetes:yaml/v2:ConfigFile")
PART_OF = "app.kubernetes.io/part-of"
NAME = "app.kubernetes.io/name"
COMPONENT = "app.kubernetes.io/component"
EMPTY: Mapping[str, Any] = {}
CORE_VERSION = re.compile(r"v\d+((alpha|beta)\d+)?")  # an apiVersion without a group
PATCH = "Patch"  # the suffix of pulumi-kubernetes' patch types


def get(value: Any, *path: str | int) -> Any:
    """The value at `path` (keys and list indexes), or None where the path does not exist."""
    for step in path:
        if isinstance(step, int):
            if not is_list(value) or not -len(value) <= step < len(value):
                return None
            value = value[step]
        elif isinstance(value, Mapping):
            value = value.get(step)
        else:
            return None
    return value


def is_list(value: Any) -> bool:
    return isinstance(value, Sequence) and not isinstance(value, str | bytes)


def items(value: Any) -> list[Any]:
    """A list field as a list; anything else (missing, wrong type) as an empty one."""
    return list(value) if is_list(value) else []


def mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else EMPTY


def show(value: Any) -> str:
    """A value as it would read in a manifest: true, 0, "/etc" (numbers arrive as floats)."""
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, Mapping):
        value = dict(value)
    elif is_list(value):
        value = list(value)
    try:
        return json.dumps(value)
    except TypeError:
        return repr(value)


def type_token(api_version: str, kind: str) -> str:
    """pulumi-kubernetes' type token for a manifest's apiVersion and kind ('v1' is 'core/v1')."""
    group_version = api_version if "/" in api_version else f"core/{api_version}"
    return f"kubernetes:{group_version}:{kind}"


def qualified_types(urn: str) -> list[str]:
    """The type chain of a URN: its ancestors' types then its own (parent$child$...)."""
    parts = urn.split("::")
    return parts[2].split("$") if len(parts) >= 4 else []


@dataclass(frozen=True)
class K8sObject:
    urn: str
    type: str  # pulumi type token, e.g. kubernetes:apps/v1:DaemonSet
    props: Mapping[str, Any]  # inputs in Kubernetes wire format
    dependencies: tuple[str, ...] = ()  # URNs the engine waits for before creating it
    within: str = ""  # for an item of a list (lists.py): which item of which list, e.g. "item 0 of PodList x"

    @property
    def type_kind(self) -> str:
        """The kind in the type token: DaemonSet, or DaemonSetPatch for a patch of one."""
        return self.type.rsplit(":", 1)[-1]

    @property
    def patch(self) -> bool:
        """A pulumi-kubernetes *Patch resource (server-side apply of a partial object onto an
        existing one), e.g. kubernetes:apps/v1:DaemonSetPatch or a CustomResourcePatch."""
        return self.type.startswith("kubernetes:") and self.type_kind.endswith(PATCH) and self.type_kind != PATCH

    @property
    def kind(self) -> str:
        """The kind the object is judged as: a DaemonSetPatch is judged as the DaemonSet it patches."""
        return self.type_kind.removesuffix(PATCH) if self.patch else self.type_kind

    @property
    def group(self) -> str:
        """API group ('core' for the legacy group), e.g. apps, batch. A CustomResource of
        apiVersion v1 has the type kubernetes:v1:<Kind>; it is in the core group too."""
        parts = self.type.split(":")
        if len(parts) != 3:
            return ""
        if "/" in parts[1]:
            return parts[1].split("/")[0]
        return "core" if CORE_VERSION.fullmatch(parts[1]) else parts[1]

    @property
    def name(self) -> str:
        return str(get(self.props, "metadata", "name") or self.urn.rsplit("::", 1)[-1])

    @property
    def namespace(self) -> str | None:
        namespace = get(self.props, "metadata", "namespace")
        return str(namespace) if namespace is not None else None

    @property
    def labels(self) -> Mapping[str, Any]:
        return mapping(get(self.props, "metadata", "labels"))

    @property
    def from_chart(self) -> bool:
        """Rendered by a Helm chart or read from a manifest the program installs (a Chart or
        ConfigFile is among its URN's ancestors)."""
        return any(t in CHART_TYPES for t in qualified_types(self.urn)[:-1])

    def describe(self) -> str:
        where = f"{self.namespace}/{self.name}" if self.namespace else self.name
        return f"{self.type_kind} {where}" + (f" ({self.within})" if self.within else "")
