"""The front door: every listener speaks TLS, and routes lead to the public APIs only.

`gateway-listeners-tls`: where the stack's public URLs are https (`tlsRequired`: staging and
prod), a Gateway (or ListenerSet) listener that is not HTTPS or TLS would serve the cloud, or
whatever a route attaches to it, in plain text; an HTTPS listener without a certificate
serves nothing of its own. `public-routes-only`: an HTTPRoute or GRPCRoute may send requests,
or mirror them, only to a public API's Service at its port (`publicBackends`: the program's own
list, components/infrastructure/public_routes.py); one to MariaDB, RabbitMQ's management API, the metadata API
or any other Service would put it on the public address. TCP, TLS and UDP routes carry no HTTP
API: refused. A listener of the program's Gateway (or ListenerSet) admits routes of its own namespace
only (`allowedRoutes.namespaces.from: Same`, the default), and the Gateway no ListenerSet of another
namespace (`allowedListeners`): a route or listener of another namespace is no object of the program's,
and would reach the public address unjudged. Not seen: routes of the cluster that other stacks or its
owner attach to a shared Gateway (the pack judges the program's objects), and what an implementation's
own policy kinds add.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from policies.k8s import K8sObject, get, items, mapping
from policies.messages import forbidden, missing, not_allowed
from policies.settings import PackSettings

GROUPS = ("gateway.networking.k8s.io", "gateway.networking.x-k8s.io")
LISTENER_KINDS = ("Gateway", "ListenerSet", "XListenerSet")
HTTP_ROUTES = ("HTTPRoute", "GRPCRoute")
OTHER_ROUTES = ("TCPRoute", "TLSRoute", "UDPRoute")
TLS_PROTOCOLS = ("HTTPS", "TLS")


def _ours(obj: K8sObject, kinds: tuple[str, ...]) -> bool:
    return obj.group in GROUPS and obj.kind in kinds


def gateway_listeners_tls(obj: K8sObject, settings: PackSettings) -> list[str]:
    if not settings.tls_required or not _ours(obj, LISTENER_KINDS):
        return []
    found = []
    why = "the stack's public URLs are https (tlsRequired): a listener without TLS serves in plain text"
    for index, listener in enumerate(items(get(obj.props, "spec", "listeners"))):
        listener = mapping(listener)
        field = f"spec.listeners[{index}]"
        protocol = listener.get("protocol")
        if protocol not in TLS_PROTOCOLS:
            found.append(not_allowed(obj, "listener", f"{field}.protocol", protocol, "HTTPS or TLS", why))
        elif protocol == "HTTPS" and not items(get(listener, "tls", "certificateRefs")):
            found.append(missing(obj, "listener", f"{field}.tls.certificateRefs", "the certificate it serves"))
    return found


def _backend_refs(rule: Any, at: str) -> Iterator[tuple[str, Any]]:
    """Every Service a route rule sends to or mirrors to, with the field that names it."""
    for index, ref in enumerate(items(get(rule, "backendRefs"))):
        yield f"{at}.backendRefs[{index}]", ref
        yield from _mirrors(ref, f"{at}.backendRefs[{index}]")
    yield from _mirrors(rule, at)


def _mirrors(holder: Any, at: str) -> Iterator[tuple[str, Any]]:
    for index, applied in enumerate(items(get(holder, "filters"))):
        mirrored = get(applied, "requestMirror", "backendRef")
        if mirrored is not None:
            yield f"{at}.filters[{index}].requestMirror.backendRef", mirrored


def _not_public(obj: K8sObject, ref: Any, settings: PackSettings) -> str | None:
    """Why a backend is no public API of the stack; None when it is one."""
    ref = mapping(ref)
    if ref.get("group", "") != "" or ref.get("kind", "Service") != "Service":
        return f"a {ref.get('kind')} of group {ref.get('group')!r}, not a Service"
    namespace = ref.get("namespace") or obj.namespace or settings.namespace
    if namespace != settings.namespace:
        return f"a Service of namespace {namespace}, not the stack's ({settings.namespace})"
    port = ref.get("port")
    number = int(port) if isinstance(port, int | float) and float(port).is_integer() else port
    if f"{ref.get('name')}:{number}" not in settings.public_backends:
        return f"Service {ref.get('name')} port {number} is no public API of the stack"
    return None


def _admits_others(obj: K8sObject) -> Iterator[str]:
    """Where a Gateway or ListenerSet lets objects of other namespaces onto its listeners."""
    why = "a route or listener of another namespace is none of the program's: it reaches the public address unjudged"
    for index, listener in enumerate(items(get(obj.props, "spec", "listeners"))):
        admitted = get(listener, "allowedRoutes", "namespaces", "from")
        if admitted not in (None, "Same"):
            field = f"spec.listeners[{index}].allowedRoutes.namespaces.from"
            yield not_allowed(obj, "listener", field, admitted, "Same (the default)", why)
    listeners = get(obj.props, "spec", "allowedListeners", "namespaces", "from")
    if listeners not in (None, "None", "Same"):
        yield not_allowed(obj, "gateway", "spec.allowedListeners.namespaces.from", listeners, "None or Same", why)


def public_routes_only(obj: K8sObject, settings: PackSettings) -> list[str]:
    if _ours(obj, LISTENER_KINDS):
        return list(_admits_others(obj))
    if _ours(obj, OTHER_ROUTES):
        why = "a public API is HTTP: what a TCP, TLS or UDP route exposes is none"
        return [forbidden(obj, "route", obj.kind, "HTTPRoute (or GRPCRoute) to a public API", why)]
    if not _ours(obj, HTTP_ROUTES):
        return []
    allowed = "a public API's Service:port: " + (
        ", ".join(settings.public_backends) or "none (the stack routes nothing)"
    )
    found = []
    for index, rule in enumerate(items(get(obj.props, "spec", "rules"))):
        for field, ref in _backend_refs(rule, f"spec.rules[{index}]"):
            refused = _not_public(obj, ref, settings)
            if refused:
                shown = {k: v for k, v in mapping(ref).items() if k in ("group", "kind", "name", "namespace", "port")}
                found.append(not_allowed(obj, "route", field, shown, allowed, refused))
    return found
