"""A test double of the Kubernetes API: the few paths nova-compute-maintenance calls, over HTTP.

No API server can run here (it needs etcd and a cluster), so the controller's Kubernetes side is
tested against this: Nodes (list, get, JSON merge patch with the resourceVersion precondition),
Pods (list by node and labels, delete with a uid precondition, and a DaemonSet controller that
starts a successor for each deleted pod), and core/v1 Events (with the API server's rule that an
Event about a cluster-scoped object lives in `default`). It answers as the API server does where
the controller depends on it, and refuses, as RBAC would, any request the ServiceAccount's Roles
and ClusterRoles do not grant (`grants_for`, read from the program's own RBAC objects).

Standard library only: the cloud harness runs it in the OpenStack virtualenv.
"""

from __future__ import annotations

import copy
import threading
import uuid
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from email.message import Message
from typing import Any
from urllib.parse import parse_qs, urlsplit

from tests.doubles.json_http import serve_json
from tests.doubles.merge_patch import MERGE_PATCH, merge_patch
from tests.doubles.rbac import rbac_rules

Manifest = dict[str, Any]
# (namespace, or None for cluster-wide; resource; verb)
Grant = tuple[str | None, str, str]


def grants_for(objects: Iterable[Mapping[str, Any]], namespace: str, account: str) -> set[Grant]:
    """What the ServiceAccount `namespace/account` may do on the core API group, from RBAC objects."""
    return {
        (where, resource, verb)
        for where, rule in rbac_rules(objects, namespace, account)
        if "" in rule.api_groups
        for resource in rule.resources
        for verb in rule.verbs
    }


@dataclass
class FakeKube:
    token: str = "test-token"
    grants: set[Grant] | None = None  # None: everything is allowed
    nodes: dict[str, Manifest] = field(default_factory=dict)
    pods: dict[tuple[str, str], Manifest] = field(default_factory=dict)
    events: list[Manifest] = field(default_factory=list)
    requests: list[tuple[str, str, Any]] = field(default_factory=list)  # (method, path?query, body)
    denied: list[str] = field(default_factory=list)
    # A replacement pod is Ready after this many pod lists (the DaemonSet controller and the kubelet).
    ready_after_lists: int = 1
    url: str = ""
    _starting: dict[tuple[str, str], int] = field(default_factory=dict)  # pod → lists until Ready
    _version: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock)

    # -- the world, as a test sets it up ------------------------------------------------------------

    def _next_version(self) -> str:
        self._version += 1
        return str(self._version)

    def add_node(self, name: str, labels: Mapping[str, str], annotations: Mapping[str, str] | None = None) -> None:
        with self._lock:
            self.nodes[name] = {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {
                    "name": name,
                    "uid": str(uuid.uuid4()),
                    "labels": {"kubernetes.io/hostname": name, **labels},
                    "annotations": dict(annotations or {}),
                    "resourceVersion": self._next_version(),
                },
                "spec": {},
            }

    def update_node(
        self, name: str, unschedulable: bool | None = None, annotations: Mapping[str, str | None] | None = None
    ) -> None:
        """What `kubectl cordon`/`uncordon` and `kubectl annotate [--overwrite]` do (None removes)."""
        with self._lock:
            node = self.nodes[name]
            if unschedulable is not None:
                node["spec"]["unschedulable"] = unschedulable
            node["metadata"] = merge_patch(node["metadata"], {"annotations": dict(annotations or {})})
            node["metadata"]["resourceVersion"] = self._next_version()

    def annotations(self, name: str) -> dict[str, str]:
        return dict(self.nodes[name]["metadata"].get("annotations") or {})

    def add_pod(self, namespace: str, name: str, node: str, labels: Mapping[str, str], ready: bool = True) -> None:
        with self._lock:
            self.pods[(namespace, name)] = _pod(namespace, name, node, labels, ready)

    # -- serving ------------------------------------------------------------------------------------

    @contextmanager
    def serve(self) -> Iterator[FakeKube]:
        def answer(method: str, path: str, body: Any, headers: Message) -> tuple[int, Any]:
            return self.handle(method, path, body, headers.get("Authorization", ""), headers.get("Content-Type"))

        with serve_json(answer) as self.url:
            yield self

    def handle(
        self, method: str, target: str, body: Any, authorization: str, content_type: str | None
    ) -> tuple[int, Any]:
        with self._lock:
            self.requests.append((method, target, body))
            if authorization != f"Bearer {self.token}":
                return 401, _status(401, "Unauthorized")
            url = urlsplit(target)
            query = {k: v[0] for k, v in parse_qs(url.query).items()}
            parts = url.path.strip("/").split("/")
            if parts[:2] != ["api", "v1"]:
                return 404, _status(404, f"{url.path} is not served by this double")
            namespace, resource, name = _route(parts[2:])
            verb = {"GET": "get" if name else "list", "PATCH": "patch", "DELETE": "delete", "POST": "create"}[method]
            if self.grants is not None and not ({(namespace, resource, verb), (None, resource, verb)} & self.grants):
                self.denied.append(f"{verb} {resource}" + (f" in {namespace}" if namespace else ""))
                return 403, _status(403, f"cannot {verb} resource {resource!r}")
            handler = getattr(self, f"_{verb}_{resource}", None)
            if handler is None:
                return 405, _status(405, f"{verb} {resource} is not served by this double")
            return handler(namespace=namespace, name=name, query=query, body=body, content_type=content_type)

    # -- the API ------------------------------------------------------------------------------------

    def _list_nodes(self, query: Mapping[str, str], **_: Any) -> tuple[int, Any]:
        wanted = _selector(query.get("labelSelector", ""))
        items = [n for n in self.nodes.values() if wanted.items() <= n["metadata"]["labels"].items()]
        return 200, {"kind": "NodeList", "apiVersion": "v1", "items": copy.deepcopy(items)}

    def _get_nodes(self, name: str, **_: Any) -> tuple[int, Any]:
        if name not in self.nodes:
            return 404, _status(404, f'nodes "{name}" not found')
        return 200, copy.deepcopy(self.nodes[name])

    def _patch_nodes(self, name: str, body: Any, content_type: str | None, **_: Any) -> tuple[int, Any]:
        if content_type != MERGE_PATCH:
            return 415, _status(415, f"this double takes {MERGE_PATCH} only")
        if name not in self.nodes:
            return 404, _status(404, f'nodes "{name}" not found')
        node = self.nodes[name]
        wanted = (body.get("metadata") or {}).get("resourceVersion")
        if wanted and wanted != node["metadata"]["resourceVersion"]:
            return 409, _status(409, "the object has been modified; please apply your changes to the latest version")
        patched = merge_patch(node, body)
        patched["metadata"]["resourceVersion"] = self._next_version()
        self.nodes[name] = patched
        return 200, copy.deepcopy(patched)

    def _list_pods(self, namespace: str, query: Mapping[str, str], **_: Any) -> tuple[int, Any]:
        fields, wanted = _selector(query.get("fieldSelector", "")), _selector(query.get("labelSelector", ""))
        items = []
        for (ns, _name), pod in self.pods.items():
            if ns != namespace or not wanted.items() <= pod["metadata"]["labels"].items():
                continue
            if "spec.nodeName" in fields and pod["spec"]["nodeName"] != fields["spec.nodeName"]:
                continue
            key = (ns, _name)
            if key in self._starting:
                self._starting[key] -= 1
                if self._starting[key] <= 0:
                    del self._starting[key]
                    pod["status"]["conditions"] = [{"type": "Ready", "status": "True"}]
            items.append(copy.deepcopy(pod))
        return 200, {"kind": "PodList", "apiVersion": "v1", "items": items}

    def _delete_pods(self, namespace: str, name: str, body: Any, **_: Any) -> tuple[int, Any]:
        pod = self.pods.get((namespace, name))
        if pod is None:
            return 404, _status(404, f'pods "{name}" not found')
        expected = ((body or {}).get("preconditions") or {}).get("uid")
        if expected and expected != pod["metadata"]["uid"]:
            return 409, _status(409, "Precondition failed: UID in precondition does not match")
        del self.pods[(namespace, name)]
        # Its DaemonSet starts a new pod on the node, from the template it has now.
        successor = f"{name.rsplit('-', 1)[0]}-{uuid.uuid4().hex[:5]}"
        labels = pod["metadata"]["labels"]
        self.pods[(namespace, successor)] = _pod(namespace, successor, pod["spec"]["nodeName"], labels, ready=False)
        self._starting[(namespace, successor)] = self.ready_after_lists
        return 200, pod

    def _create_events(self, namespace: str, body: Any, **_: Any) -> tuple[int, Any]:
        involved = body.get("involvedObject") or {}
        # kubernetes pkg/apis/core/validation/events.go, legacyValidateEvent (no eventTime set).
        if not involved.get("namespace") and namespace not in ("", "default"):
            return 422, _status(422, 'involvedObject.namespace: Invalid value: "": does not match event.namespace')
        if involved.get("namespace") and involved["namespace"] != namespace:
            return 422, _status(422, "involvedObject.namespace: does not match event.namespace")
        event = copy.deepcopy(body)
        event["metadata"]["name"] = event["metadata"].pop("generateName", "") + uuid.uuid4().hex[:10]
        self.events.append(event)
        return 201, event


def _route(parts: list[str]) -> tuple[str | None, str, str | None]:
    """(namespace, resource, name) of /api/v1/<...>."""
    if parts and parts[0] == "namespaces" and len(parts) >= 3:
        return parts[1], parts[2], parts[3] if len(parts) > 3 else None
    return None, parts[0] if parts else "", parts[1] if len(parts) > 1 else None


def _selector(text: str) -> dict[str, str]:
    """Equality-based selectors only (key=value,...), which is all the controller sends."""
    return dict(term.split("=", 1) for term in text.split(",") if term)


def _pod(namespace: str, name: str, node: str, labels: Mapping[str, str], ready: bool) -> Manifest:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "uid": str(uuid.uuid4()), "labels": dict(labels)},
        "spec": {"nodeName": node},
        "status": {"conditions": [{"type": "Ready", "status": "True" if ready else "False"}]},
    }


def _status(code: int, message: str) -> Manifest:
    return {"kind": "Status", "apiVersion": "v1", "status": "Failure", "message": message, "code": code}
