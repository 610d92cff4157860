"""The Kubernetes API as nova-compute-maintenance uses it: HTTPS with the pod's ServiceAccount token.

The kolla-toolbox image has no Kubernetes client library, so this is the standard library's
urllib against the API server's REST paths. What it calls, and the RBAC that allows it
(components/maintenance.py):

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

import json
import os
import ssl
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import maintenance_plan as plan

ACCOUNT = Path("/var/run/secrets/kubernetes.io/serviceaccount")
TIMEOUT = 30
EVENTS_NAMESPACE = "default"
COMPONENT = "app.kubernetes.io/component"
PART_OF = "app.kubernetes.io/part-of=openstack"
REPORTER = "nova-compute-maintenance"


class KubeError(RuntimeError):
    def __init__(self, status: int, message: str):
        super().__init__(f"Kubernetes API: {status or 'no answer'}: {message}")
        self.status = status


@dataclass
class Kube:
    base_url: str  # https://<host>:<port>, or a test double's http://127.0.0.1:<port>
    bearer: Callable[[], str]  # reads the ServiceAccount token
    namespace: str  # where the node pods run
    context: ssl.SSLContext | None = None
    reporter: str = REPORTER  # this pod's name, for the Events' reportingInstance

    @classmethod
    def in_cluster(cls, namespace: str, reporter: str = REPORTER) -> Kube:
        """The API server as every pod sees it. The token file is read at each request: the
        kubelet renews bound ServiceAccount tokens before they expire."""
        host, port = os.environ["KUBERNETES_SERVICE_HOST"], os.environ["KUBERNETES_SERVICE_PORT"]
        host = f"[{host}]" if ":" in host else host
        context = ssl.create_default_context(cafile=str(ACCOUNT / "ca.crt"))
        bearer = lambda: (ACCOUNT / "token").read_text().strip()  # noqa: E731
        return cls(f"https://{host}:{port}", bearer, namespace, context, reporter)

    def _call(
        self,
        method: str,
        path: str,
        query: Mapping[str, str] | None = None,
        body: object | None = None,
        content_type: str = "application/json",
    ) -> Any:
        url = self.base_url + path + (f"?{urllib.parse.urlencode(query)}" if query else "")
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(url, data=data, method=method)
        request.add_header("Authorization", f"Bearer {self.bearer()}")
        request.add_header("Accept", "application/json")
        if data is not None:
            request.add_header("Content-Type", content_type)
        try:
            with urllib.request.urlopen(request, timeout=TIMEOUT, context=self.context) as response:
                text = response.read()
        except urllib.error.HTTPError as error:
            raise KubeError(error.code, _message(error.read()) or error.reason) from None
        except (urllib.error.URLError, OSError) as error:
            raise KubeError(0, str(error)) from None
        return json.loads(text) if text else None

    def compute_nodes(self, selector: str) -> list[plan.Node]:
        answer = self._call("GET", "/api/v1/nodes", {"labelSelector": selector})
        return [_node(item) for item in answer.get("items") or []]

    def annotate(self, node: plan.Node, values: Mapping[str, str | None]) -> plan.Node:
        """Set (or with None remove) annotations, and nothing else. The patch names the node's
        resourceVersion, so it fails (409) when the node changed since it was read: the next
        pass reads it again, and an operator's newer annotation is never overwritten."""
        patch = {"metadata": {"resourceVersion": node.resource_version, "annotations": dict(values)}}
        answer = self._call("PATCH", f"/api/v1/nodes/{node.name}", body=patch, content_type=MERGE_PATCH)
        return _node(answer)

    def pods_on(self, node: str) -> list[plan.Pod]:
        """The cloud's pods on a node."""
        query = {"fieldSelector": f"spec.nodeName={node}", "labelSelector": PART_OF}
        answer = self._call("GET", f"/api/v1/namespaces/{self.namespace}/pods", query)
        return [_pod(item) for item in answer.get("items") or []]

    def delete_pod(self, pod: plan.Pod) -> None:
        """Deleted as `kubectl delete pod` does (its grace period); only this uid, never a successor."""
        body = {"kind": "DeleteOptions", "apiVersion": "v1", "preconditions": {"uid": pod.uid}}
        try:
            self._call("DELETE", f"/api/v1/namespaces/{self.namespace}/pods/{pod.name}", body=body)
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
        self._call("POST", f"/api/v1/namespaces/{EVENTS_NAMESPACE}/events", body=body)


MERGE_PATCH = "application/merge-patch+json"


def _message(body: bytes) -> str:
    try:
        return str(json.loads(body).get("message", ""))
    except (ValueError, AttributeError):
        return body.decode(errors="replace")[:300]


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
