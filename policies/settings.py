"""What the pack needs to know about a stack, as policy config properties.

Pulumi hands each policy only its own config (`--policy-pack-config` file, one object
per policy), so every policy declares the properties it reads and each stack's JSON file
repeats the shared ones per policy (tools/policy_config.py writes them from the settings).
Defaults mirror the program's settings defaults (components/settings/model.py), so the pack
without config judges a default stack.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from components.tables.catalog import api_components, database_services
from components.tables.roles import Topology

_STRING_MAP = {"type": "object", "additionalProperties": {"type": "string"}}
_STRINGS = {"type": "array", "items": {"type": "string"}}

# JSON Schema of every property a policy may read; each policy's configSchema is a subset.
PROPERTIES: dict[str, dict[str, Any]] = {
    "namespace": {
        "type": "string",
        "description": "The stack's namespace; node roles are granted only to workloads in it.",
        "default": "openstack",
    },
    "hypervisorIsolation": {
        "type": "string",
        "enum": [t.value for t in Topology],
        "description": "The stack's compute-node topology; it decides which node pods may exist.",
        "default": Topology.POD_PER_SERVICE.value,
    },
    "imageRegistry": {
        "type": "string",
        "description": "Registry and path of the Kolla images (images.registry in the stack).",
        "default": "quay.io/openstack.kolla",
    },
    "imageOverrides": {
        **_STRING_MAP,
        "description": "Kolla image name → full image reference (images.overrides in the stack).",
        "default": {},
    },
    "vmSafe": {
        "type": "boolean",
        "description": "compute.vmSafe: libvirt and OVS DaemonSets must update only OnDelete.",
        "default": False,
    },
    "nodeSelectors": {
        # Keyed by node kind (components/tables/roles.py NodeKind, plus controlPlane).
        "type": "object",
        "additionalProperties": _STRING_MAP,
        "description": "The stack's nodeSelectors by node kind; node pods must carry their kind's selector.",
        "default": {
            "controlPlane": {"openstack-control-plane": "enabled"},
            "network": {"openstack-network-node": "enabled"},
            "compute": {"openstack-compute-node": "enabled"},
            "storage": {"openstack-storage-node": "enabled"},
        },
    },
    "apiComponents": {
        **_STRINGS,
        "description": "app.kubernetes.io/component values of OpenStack API workloads.",
        "default": list(api_components()),
    },
    "databaseServices": {
        **_STRINGS,
        "description": "app.kubernetes.io/name values of the OpenStack services with a schema (db-sync Job).",
        # memcached's component is also "server"; it is no OpenStack service and has no schema.
        "default": list(database_services()),
    },
    "tlsRequired": {
        "type": "boolean",
        "description": "The stack's public URLs are https (endpoints.scheme): every Gateway listener is HTTPS or TLS.",
        "default": True,
    },
    "publicBackends": {
        **_STRINGS,
        "description": "'<Service>:<port>' of every public API of the stack: what an HTTPRoute may send requests to.",
        # A stack of default settings has no gateway, and so no route (components/settings/gateway.py).
        "default": [],
    },
    "caIssuers": {
        "type": "object",
        "additionalProperties": {"type": "string", "enum": ["internal", "libvirt", "public"]},
        "description": "'<Kind>/<name>' of each issuer of the stack's CAs (tls.internal, tls.libvirt, tls.public) -> "
        "which CA it is: what a Certificate from it may name, and whose key its Issuer's Secret holds.",
        # A stack of default settings has no CA: no internal TLS, no libvirt TLS, no gateway.
        "default": {},
    },
    "gatewayNamespace": {
        "type": "string",
        "description": "The namespace of the cluster's Gateway the routes attach to (gateway.existing), whose Gateways "
        "a ReferenceGrant may let read the public certificate; empty: the stack's own Gateway, or none.",
        "default": "",
    },
    "cephPools": {
        **_STRINGS,
        "description": "The stack's Ceph pools (ceph.pools): the only pools a CephClient's caps may name.",
        "default": [],
    },
    "requiredRequests": {
        **_STRINGS,
        "description": "Resource requests every container sets.",
        "default": ["cpu", "memory"],
    },
    # CPU limits throttle latency-sensitive APIs without protecting the node; memory limits do.
    "requiredLimits": {**_STRINGS, "description": "Resource limits every container sets.", "default": ["memory"]},
}
ENFORCEMENT_LEVELS = ("advisory", "mandatory", "remediate", "disabled")


class ConfigError(ValueError):
    """A policy config that does not fit the pack's schema; the message names the property."""


@dataclass(frozen=True)
class PackSettings:
    namespace: str
    topology: Topology
    image_registry: str
    image_overrides: Mapping[str, str]
    vm_safe: bool
    node_selectors: Mapping[str, Mapping[str, str]]
    api_components: tuple[str, ...]
    database_services: tuple[str, ...]
    required_requests: tuple[str, ...]
    required_limits: tuple[str, ...]
    tls_required: bool = True
    public_backends: tuple[str, ...] = ()
    ca_issuers: Mapping[str, str] = field(default_factory=dict)
    gateway_namespace: str = ""
    ceph_pools: tuple[str, ...] = ()

    @classmethod
    def from_config(cls, config: Mapping[str, Any] | None = None, policy: str = "policy") -> PackSettings:
        """Settings from one policy's config, defaults filled in; ConfigError on a bad value."""
        given = dict(config or {})
        given.pop("enforcementLevel", None)
        for key, value in given.items():
            check_property(policy, key, value)
        value = {key: given.get(key, spec["default"]) for key, spec in PROPERTIES.items()}
        return cls(
            namespace=value["namespace"],
            topology=Topology(value["hypervisorIsolation"]),
            image_registry=value["imageRegistry"].rstrip("/"),
            image_overrides=dict(value["imageOverrides"]),
            vm_safe=value["vmSafe"],
            # A stack that sets one kind of node keeps the defaults of the others, as the program does.
            node_selectors={
                kind: dict(labels)
                for kind, labels in {**PROPERTIES["nodeSelectors"]["default"], **value["nodeSelectors"]}.items()
            },
            api_components=tuple(value["apiComponents"]),
            database_services=tuple(value["databaseServices"]),
            required_requests=tuple(value["requiredRequests"]),
            required_limits=tuple(value["requiredLimits"]),
            tls_required=value["tlsRequired"],
            public_backends=tuple(value["publicBackends"]),
            ca_issuers=dict(value["caIssuers"]),
            gateway_namespace=value["gatewayNamespace"],
            ceph_pools=tuple(value["cephPools"]),
        )


def schema(properties: tuple[str, ...]) -> dict[str, dict[str, Any]]:
    return {name: PROPERTIES[name] for name in properties}


def check_property(policy: str, key: str, value: Any) -> None:
    spec = PROPERTIES.get(key)
    if spec is None:
        raise ConfigError(f"{policy}: unknown config property {key!r}; known: {', '.join(PROPERTIES)}")
    problem = _type_problem(spec, value)
    if problem:
        raise ConfigError(f"{policy}.{key}: {problem} (got {value!r})")


def _type_problem(spec: Mapping[str, Any], value: Any) -> str | None:
    """The subset of JSON Schema the pack's own schemas use: type, enum, items, properties."""
    kind = spec["type"]
    if kind == "string":
        if not isinstance(value, str):
            return "must be a string"
        if "enum" in spec and value not in spec["enum"]:
            return f"allowed: {', '.join(spec['enum'])}"
    elif kind == "boolean" and not isinstance(value, bool):
        return "must be true or false"
    elif kind == "array":
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            return "must be a list of strings"
    elif kind == "object":
        if not isinstance(value, dict):
            return "must be an object"
        fixed = spec.get("properties")
        for key, inner in value.items():
            inner_spec = fixed.get(key) if fixed else spec["additionalProperties"]
            if inner_spec is None:
                return f"unknown key {key!r}; allowed: {', '.join(fixed or {})}"
            problem = _type_problem(inner_spec, inner)
            if problem:
                return f"{key}: {problem}"
    return None
