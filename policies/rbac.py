"""RBAC: no grant that hands over the cluster, its nodes or its Secrets.

A Role or binding is as much a privilege as a privileged container: `cluster-admin`, wildcard
verbs or resources, `escalate`, `bind` and `impersonate` (which get around RBAC itself),
`nodes/proxy` (the kubelet's API: exec in any pod of the node), `pods/exec` and `pods/attach`
(a shell in a pod, with its Secrets), reading or writing every Secret of a namespace, and naming
a Secret that holds a private key: a CA's (its Issuer's Secret, `caIssuers`), a certificate's
(`*-internal-tls`, `*-client-tls`, `public-tls`, the console proxy's), or Rook's admin key
(policies/tls_names.py); whoever reads one can sign as the CA or be the server. The program grants
none of them: its Roles name the Secrets they rotate (resourceNames), and the
maintenance controller may read nodes and patch them (narrowed by a ValidatingAdmissionPolicy,
components/nodes/maintenance.py), list and delete pods, and create events.

The operators' released RBAC needs some of them (the RabbitMQ Cluster Operator reads Secrets of
every namespace and execs into its pods; mariadb-operator lists the namespace's Secrets), so in
objects of charts and manifests those are advice (third-party-chart-hygiene); what no operator
of the program needs (cluster-admin, a binding to everyone, wildcard verbs, escalate, bind,
impersonate, nodes/proxy, an aggregated ClusterRole, a key's Secret by name) is refused there too.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from policies.k8s import K8sObject, get, items, mapping, show
from policies.messages import forbidden, not_allowed
from policies.settings import PackSettings
from policies.tls_names import key_secret

GROUP = "rbac.authorization.k8s.io"
ROLES, BINDINGS = ("Role", "ClusterRole"), ("RoleBinding", "ClusterRoleBinding")
# ClusterRoles of Kubernetes that hold Secrets or exec (admin, edit) or everything (cluster-admin).
BROAD_ROLES = {"cluster-admin": "every right in the cluster", "admin": "every Secret and exec into every pod",
               "edit": "every Secret and exec into every pod"}  # fmt: skip
EVERYONE = {"system:authenticated": "every authenticated user", "system:unauthenticated": "every anonymous client",
            "system:anonymous": "anonymous requests"}  # fmt: skip
RBAC_ITSELF = {"escalate": "grants rights the holder does not have", "bind": "binds roles the holder does not hold",
               "impersonate": "acts as another user, group or ServiceAccount"}  # fmt: skip
# Subresources that run commands in, or read the screen of, a pod or a node's pods.
EXEC = {"nodes/proxy": "the kubelet's API: exec into every pod of a node", "pods/exec": "a shell in a pod",
        "pods/attach": "the console of a pod"}  # fmt: skip
READS = ("get", "list", "watch", "update", "patch", "delete", "deletecollection", "*")  # all but create


@dataclass(frozen=True)
class Finding:
    message: str
    severe: bool  # refused in charts too: no operator of the program needs it


def _core(groups: list[object]) -> bool:
    return "" in groups or "*" in groups


def _matches(granted: str, resource: str) -> bool:
    """RBAC's resource match (ResourceMatches): exact, '*', or '*/<subresource>'."""
    return granted in ("*", resource) or ("/" in resource and granted == "*/" + resource.split("/", 1)[1])


def _key_secrets(obj: K8sObject, at: str, names: list[object], settings: PackSettings) -> Iterator[Finding]:
    for position, name in enumerate(names):
        held = key_secret(str(name), settings)
        if held:
            why = f"Secret {name} holds {held}: only cert-manager and the pods that serve it touch it"
            yield Finding(not_allowed(obj, at, f"{at}.resourceNames[{position}]", name,
                                      "Secrets that hold no private key", why), True)  # fmt: skip


def _rule(obj: K8sObject, index: int, rule: object, settings: PackSettings) -> Iterator[Finding]:
    at = f"rules[{index}]"
    groups, resources, verbs = items(get(rule, "apiGroups")), items(get(rule, "resources")), items(get(rule, "verbs"))
    names = items(get(rule, "resourceNames"))
    for position, verb in enumerate(verbs):
        if verb == "*":
            yield Finding(not_allowed(obj, at, f"{at}.verbs[{position}]", verb, "the verbs it needs, named",
                                      "every verb, escalate, bind and impersonate among them"), True)  # fmt: skip
        elif verb in RBAC_ITSELF:
            yield Finding(not_allowed(obj, at, f"{at}.verbs[{position}]", verb, "verbs that do not get around RBAC",
                                      f"{verb} {RBAC_ITSELF[verb]}"), True)  # fmt: skip
    for position, resource in enumerate(resources):
        field = f"{at}.resources[{position}]"
        if resource == "*":
            covers = "every resource of the group" + (", Secrets and pods/exec among them" if _core(groups) else "")
            yield Finding(not_allowed(obj, at, field, resource, "the resources it needs, named", covers),
                          _core(groups))  # fmt: skip
            continue
        subresource = next((s for s in EXEC if _matches(resource, s)), None)
        if subresource is not None and _core(groups) and verbs:
            yield Finding(not_allowed(obj, at, field, resource, "no exec, attach or node proxy", EXEC[subresource]),
                          subresource == "nodes/proxy")  # fmt: skip
        elif resource == "secrets" and _core(groups) and not names and any(v in READS for v in verbs):
            verbs_shown = ", ".join(str(v) for v in verbs if v in READS)
            why = f"{verbs_shown} on every Secret of the {'cluster' if obj.kind == 'ClusterRole' else 'namespace'}"
            yield Finding(not_allowed(obj, at, field, resource, "Secrets named in resourceNames (or create only)",
                                      why), False)  # fmt: skip
    if _core(groups) and any(_matches(str(r), "secrets") for r in resources):
        yield from _key_secrets(obj, at, names, settings)


def _binding(obj: K8sObject) -> Iterator[Finding]:
    ref = mapping(get(obj.props, "roleRef"))
    name = ref.get("name")
    if ref.get("kind") == "ClusterRole" and name in BROAD_ROLES:
        yield Finding(not_allowed(obj, "binding", "roleRef.name", name, "a role of the rights it needs",
                                  f"{name} holds {BROAD_ROLES[name]}"), name == "cluster-admin")  # fmt: skip
    for index, subject in enumerate(items(get(obj.props, "subjects"))):
        who = get(subject, "name")
        if who in EVERYONE:
            yield Finding(not_allowed(obj, "binding", f"subjects[{index}].name", who, "the program's ServiceAccounts",
                                      f"it names {EVERYONE[str(who)]}"), True)  # fmt: skip


def findings(obj: K8sObject, settings: PackSettings) -> list[Finding]:
    if obj.group != GROUP:
        return []
    if obj.kind in BINDINGS:
        return list(_binding(obj))
    if obj.kind not in ROLES:
        return []
    found = [
        finding
        for index, rule in enumerate(items(get(obj.props, "rules")))
        for finding in _rule(obj, index, rule, settings)
    ]
    if get(obj.props, "aggregationRule") is not None:
        why = (
            f"its rules are those of every ClusterRole its selectors match ({show(get(obj.props, 'aggregationRule'))})"
        )
        found.append(Finding(forbidden(obj, "role", "aggregationRule", "rules written in the role", why), True))
    return found


def rbac_grants(obj: K8sObject, settings: PackSettings) -> list[str]:
    """The program's own RBAC: every finding; a chart's: those no operator needs."""
    return [f.message for f in findings(obj, settings) if f.severe or not obj.from_chart]


def rbac_advice(obj: K8sObject, settings: PackSettings) -> list[str]:
    """What a chart's RBAC grants that the program would not: advice (third-party-chart-hygiene)."""
    return [f.message for f in findings(obj, settings) if not f.severe] if obj.from_chart else []
