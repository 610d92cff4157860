"""Rules over the whole stack: what waits for what, where agents run, how datapaths update.

Each returns (urn, message) pairs. Dependencies are the URNs the engine waits for before
creating a resource; "waits for" here means reachable through them, transitively.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from policies.k8s import COMPONENT, NAME, PART_OF, K8sObject, mapping, show
from policies.messages import not_allowed
from policies.node_roles import PodRoles, judge
from policies.podspec import PodTemplate
from policies.settings import PackSettings

Found = list[tuple[str, str]]


def _reachable(start: K8sObject, by_urn: dict[str, K8sObject]) -> set[str]:
    seen: set[str] = set()
    todo = list(start.dependencies)
    while todo:
        urn = todo.pop()
        if urn not in seen:
            seen.add(urn)
            todo += by_urn[urn].dependencies if urn in by_urn else ()
    return seen


def _db_sync_jobs(objects: Sequence[K8sObject], service: str) -> list[K8sObject]:
    """A service's schema Job, found by its openstack-helm name or by its labels."""
    return [
        o
        for o in objects
        if o.kind == "Job"
        and o.group == "batch"
        and (o.name == f"{service}-db-sync" or (o.labels.get(NAME) == service and o.labels.get(COMPONENT) == "db-sync"))
    ]


def api_waits_for_db_sync(objects: Sequence[K8sObject], settings: PackSettings) -> Found:
    by_urn = {o.urn: o for o in objects}
    found = []
    for obj in objects:
        if obj.group != "apps" or obj.kind not in ("Deployment", "StatefulSet"):
            continue
        labels = obj.labels
        if (
            labels.get(PART_OF) != "openstack"
            or labels.get(NAME) not in settings.database_services
            or labels.get(COMPONENT) not in settings.api_components
        ):
            continue
        service = str(labels.get(NAME))
        jobs = _db_sync_jobs(objects, service)
        if not jobs:
            problem = f"the stack has no Job {service}-db-sync; required: the schema Job, which its API must wait for"
            found.append((obj.urn, f"{obj.describe()}: {problem}"))
        elif not _reachable(obj, by_urn) & {job.urn for job in jobs}:
            names = ", ".join(job.describe() for job in jobs)
            problem = f"dependencies do not reach {names}, directly or through other resources"
            required = "depends_on it, so the API never serves before its schema is migrated"
            found.append((obj.urn, f"{obj.describe()}: {problem}; required: {required}"))
    return found


def _node_pods(
    objects: Sequence[K8sObject], settings: PackSettings
) -> Iterator[tuple[K8sObject, PodTemplate, PodRoles]]:
    for obj in objects:
        for pod, roles in judge(obj, settings):
            if roles.holds_any and roles.node_pod is not None:
                yield obj, pod, roles


def agents_on_their_nodes(objects: Sequence[K8sObject], settings: PackSettings) -> Found:
    found = []
    for obj, pod, roles in _node_pods(objects, settings):
        assert roles.node_pod is not None
        kind = roles.node_pod.node.value
        if kind not in settings.node_selectors:
            continue  # a kind of node the stack does not pin (compute and network always are)
        required = settings.node_selectors[kind]
        actual = mapping(pod.spec.get("nodeSelector"))
        why = f"{roles.node_pod.name} is a {kind}-node pod"
        if not required:
            found.append((obj.urn, f"{obj.describe()}: policy config nodeSelectors.{kind} is empty, so nothing pins "
                                   f"{kind} agents; required: the stack's nodeSelectors.{kind} ({why})"))  # fmt: skip
        elif any(actual.get(key) != value for key, value in required.items()):
            allowed = f"a selector including {show(required)} (the stack's nodeSelectors.{kind})"
            found.append((obj.urn, not_allowed(obj, "pod", pod.field("nodeSelector"), actual, allowed, why)))
    return found


def vm_safe_updates(objects: Sequence[K8sObject], settings: PackSettings) -> Found:
    if not settings.vm_safe:
        return []
    found = []
    for obj, _pod, roles in _node_pods(objects, settings):
        assert roles.node_pod is not None
        if obj.kind != "DaemonSet" or not roles.node_pod.holds_vms_or_datapath:
            continue
        strategy = mapping(mapping(obj.props.get("spec")).get("updateStrategy")).get("type") or "RollingUpdate"
        if strategy != "OnDelete":
            why = f"{roles.node_pod.name} holds running VMs or the OVS datapath: only an operator may restart it"
            found.append(
                (obj.urn, not_allowed(obj, "DaemonSet", "spec.updateStrategy.type", strategy, "OnDelete", why))
            )
    return found
