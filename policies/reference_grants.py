"""What another namespace may use of the stack's (reference-grants).

A Gateway API ReferenceGrant in a namespace lets objects of other namespaces refer to its objects:
routes there to its Services, Gateways there to its Secrets. The program needs one only where its
routes attach to the cluster's Gateway (`gateway.existing`, in `gatewayNamespace`): that Gateway's
listener serves the public certificate, Secret `public-tls`, of the stack's namespace
(components/infrastructure/front_door.py). So a grant of the program is in the stack's namespace, from
Gateways of `gatewayNamespace`, to that Secret by name. A grant without `name` covers every object of
its kind; one to a Service lets another namespace's routes reach it past `public-routes-only`, which
judges the program's routes only; one to another Secret, or from another namespace, lets a Gateway
there serve or read it.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from policies.k8s import K8sObject, get, items, mapping
from policies.messages import not_allowed
from policies.settings import PackSettings
from policies.tls_names import PUBLIC_CERTIFICATE

GROUPS = ("gateway.networking.k8s.io", "gateway.networking.x-k8s.io")
GATEWAY_GROUP = "gateway.networking.k8s.io"


def _shown(ref: Any) -> dict[str, Any]:
    return {k: v for k, v in mapping(ref).items() if k in ("group", "kind", "name", "namespace")}


def _to(obj: K8sObject) -> Iterator[str]:
    allowed = f"Secret {PUBLIC_CERTIFICATE} by name (core group), the public certificate the cluster's Gateway serves"
    for index, ref in enumerate(items(get(obj.props, "spec", "to"))):
        ref = mapping(ref)
        if (ref.get("group"), ref.get("kind"), ref.get("name")) == ("", "Secret", PUBLIC_CERTIFICATE):
            continue
        if ref.get("name") is None:
            why = f"without a name it grants every {ref.get('kind')} of the stack's namespace"
        elif ref.get("kind") == "Service":
            why = "another namespace's routes would reach it, and public-routes-only judges only the program's routes"
        else:
            why = "another namespace's objects would read it"
        yield not_allowed(obj, "grant", f"spec.to[{index}]", _shown(ref), allowed, why)


def _from(obj: K8sObject, settings: PackSettings) -> Iterator[str]:
    gateways = settings.gateway_namespace
    allowed = f"Gateways of namespace {gateways} (gateway.existing)" if gateways else "none (no Gateway of the cluster)"
    for index, ref in enumerate(items(get(obj.props, "spec", "from"))):
        ref = mapping(ref)
        granted = (ref.get("group"), ref.get("kind"), ref.get("namespace"))
        if gateways and granted == (GATEWAY_GROUP, "Gateway", gateways):
            continue
        why = "only the cluster's Gateway the routes attach to serves the stack's certificate"
        yield not_allowed(obj, "grant", f"spec.from[{index}]", _shown(ref), allowed, why)


def reference_grants(obj: K8sObject, settings: PackSettings) -> list[str]:
    if obj.group not in GROUPS or obj.kind != "ReferenceGrant":
        return []
    if obj.namespace not in (None, settings.namespace):
        why = "the program grants the use of its own namespace's objects only"
        return [not_allowed(obj, "grant", "metadata.namespace", obj.namespace, settings.namespace, why)]
    return [*_to(obj), *_from(obj, settings)]
