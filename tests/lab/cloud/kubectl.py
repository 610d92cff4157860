"""What the scenario does with kubectl, against the lab's API server: an administrator's few verbs.

`kubectl cordon/uncordon` and `kubectl annotate node` are JSON merge patches of the Node, `kubectl
get pods` a list with selectors, `kubectl delete pod` a delete; over HTTPS, verifying the API
server's certificate, with the administrator's token. Standard library only: the scenario runs
in the OpenStack virtualenv.
"""

from __future__ import annotations

import json
import ssl
import urllib.parse
import urllib.request
from dataclasses import dataclass
from typing import Any

MERGE_PATCH = "application/merge-patch+json"


@dataclass(frozen=True)
class Kubectl:
    server: str  # https://kubernetes.default.svc
    token: str
    ca_file: str
    namespace: str

    def _call(self, method: str, path: str, body: Any = None, content_type: str = "application/json") -> Any:
        request = urllib.request.Request(
            self.server + path,
            method=method,
            data=json.dumps(body).encode() if body is not None else None,
            headers={
                "Authorization": f"Bearer {self.token}",
                "Content-Type": content_type,
                "Accept": "application/json",
            },
        )
        context = ssl.create_default_context(cafile=self.ca_file)
        with urllib.request.urlopen(request, context=context, timeout=30) as answer:
            return json.loads(answer.read() or b"null")

    def node(self, name: str) -> dict[str, Any]:
        return dict(self._call("GET", f"/api/v1/nodes/{name}"))

    def cordon(self, name: str, cordoned: bool = True) -> None:
        self._call("PATCH", f"/api/v1/nodes/{name}", {"spec": {"unschedulable": cordoned or None}}, MERGE_PATCH)

    def annotate(self, name: str, annotations: dict[str, str | None]) -> None:
        self._call("PATCH", f"/api/v1/nodes/{name}", {"metadata": {"annotations": annotations}}, MERGE_PATCH)

    def pods(self, node: str | None = None, labels: str = "") -> list[dict[str, Any]]:
        fields = f"spec.nodeName={node}" if node else ""
        query = {k: v for k, v in (("labelSelector", labels), ("fieldSelector", fields)) if v}
        path = f"/api/v1/namespaces/{self.namespace}/pods"
        return list(self._call("GET", path + ("?" + urllib.parse.urlencode(query) if query else ""))["items"])

    def delete_pod(self, name: str) -> None:
        self._call("DELETE", f"/api/v1/namespaces/{self.namespace}/pods/{name}")

    def secret(self, name: str) -> dict[str, Any]:
        return dict(self._call("GET", f"/api/v1/namespaces/{self.namespace}/secrets/{name}"))
