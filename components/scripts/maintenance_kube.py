"""The Kubernetes API as nova-compute-maintenance uses it, on the scripts' shared client (kube_api.py).

What it calls, and the RBAC that allows it (components/maintenance.py):

- GET    /api/v1/nodes?labelSelector=...                  ClusterRole: nodes list
- PATCH  /api/v1/nodes/<node>  (merge patch, annotations) ClusterRole: nodes patch
- GET    /api/v1/namespaces/<ns>/pods?fieldSelector=...    Role in <ns>: pods list
- DELETE /api/v1/namespaces/<ns>/pods/<pod>                 Role in <ns>: pods delete
- POST   /api/v1/namespaces/default/events                  Role in default: events create

Events about a Node (a cluster-scoped object) must be in the namespace `default`: the API
server refuses a core/v1 Event whose involvedObject has no namespace in any other
(kubernetes pkg/apis/core/validation/events.go, legacyValidateEvent).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import maintenance_plan as plan
from kube_api import KubeApi, KubeError

__all__ = ["Kube", "KubeError"]

EVENTS_NAMESPACE = "default"
COMPONENT = "app.kubernetes.io/component"
PART_OF = "app.kubernetes.io/part-of=openstack"
REPORTER = "nova-compute-maintenance"


@dataclass
class Kube(KubeApi):
    """The calls above on the shared client (kube_api.py); `namespace` is where the node pods run."""

    reporter: str = REPORTER  # this pod's name, for the Events' reportingInstance

    def compute_nodes(self, selector: str) -> list[plan.Node]:
        answer = self.get("/api/v1/nodes", {"labelSelector": selector})
        return [_node(item) for item in answer.get("items") or []]

    def annotate(self, node: plan.Node, values: Mapping[str, str | None]) -> plan.Node:
        """Set (or with None remove) annotations, and nothing else. The patch names the node's
        resourceVersion, so it fails (409) when the node changed since it was read: the next
        pass reads it again, and an operator's newer annotation is never overwritten."""
        patch = {"metadata": {"resourceVersion": node.resource_version, "annotations": dict(values)}}
        answer = self.merge_patch(f"/api/v1/nodes/{node.name}", patch)
        return _node(answer)

    def pods_on(self, node: str) -> list[plan.Pod]:
        """The cloud's pods on a node."""
        query = {"fieldSelector": f"spec.nodeName={node}", "labelSelector": PART_OF}
        answer = self.get(f"/api/v1/namespaces/{self.namespace}/pods", query)
        return [_pod(item) for item in answer.get("items") or []]

    def delete_pod(self, pod: plan.Pod) -> None:
        """Deleted as `kubectl delete pod` does (its grace period); only this uid, never a successor."""
        body = {"kind": "DeleteOptions", "apiVersion": "v1", "preconditions": {"uid": pod.uid}}
        try:
            self.delete(f"/api/v1/namespaces/{self.namespace}/pods/{pod.name}", body)
        except KubeError as error:
            if error.status not in (404, 409):  # gone already, or another pod now has its name
                raise

    def record(self, node: plan.Node, event: plan.Event) -> None:
        """A Kubernetes Event about the node: `kubectl describe node` shows it."""
        now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        body = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"generateName": f"{node.name}.", "namespace": EVENTS_NAMESPACE},
            "involvedObject": {"apiVersion": "v1", "kind": "Node", "name": node.name, "uid": node.uid},
            "reason": event.reason,
            "message": event.message[:1024],
            "type": "Warning" if event.warning else "Normal",
            "source": {"component": REPORTER},
            "reportingComponent": REPORTER,
            "reportingInstance": self.reporter,
            "firstTimestamp": now,
            "lastTimestamp": now,
            "count": 1,
        }
        self.create(f"/api/v1/namespaces/{EVENTS_NAMESPACE}/events", body)


def _node(item: Mapping[str, Any]) -> plan.Node:
    meta = item.get("metadata") or {}
    return plan.Node(
        name=meta["name"],
        uid=meta.get("uid", ""),
        unschedulable=bool((item.get("spec") or {}).get("unschedulable")),
        annotations=dict(meta.get("annotations") or {}),
        resource_version=meta.get("resourceVersion", ""),
        hostname=(meta.get("labels") or {}).get("kubernetes.io/hostname", ""),
    )


def _pod(item: Mapping[str, Any]) -> plan.Pod:
    meta = item.get("metadata") or {}
    conditions = (item.get("status") or {}).get("conditions") or []
    return plan.Pod(
        name=meta["name"],
        uid=meta.get("uid", ""),
        component=(meta.get("labels") or {}).get(COMPONENT, ""),
        ready=any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions),
        deleting=bool(meta.get("deletionTimestamp")),
    )
