"""The Kubernetes API from inside a pod, for the scripts that need it (mounted beside each of them).

The Kolla images have no Kubernetes client library and no kubectl, so this is the standard
library's urllib against the API server's REST paths, found as client-go's rest.InClusterConfig
finds it: the kubelet's KUBERNETES_SERVICE_HOST/PORT variables and the ServiceAccount's mounted
token and CA. The token file is read at each request: the kubelet renews bound ServiceAccount
tokens before they expire, and a long-running pod (nova-compute-maintenance) outlives one.

Writes are optimistic: `replace` sends back the object as read, resourceVersion included, and a
`merge_patch` that names a resourceVersion carries it as a precondition, so the API server
refuses (409 Conflict) a write over a change made since the read instead of overwriting it.

A refusal raises KubeError with the HTTP status and the API's Status message (which names the
object and the verb, never a Secret's data); a script decides whether that ends it.
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
from pathlib import Path
from typing import Any, TypeVar

ACCOUNT = Path("/var/run/secrets/kubernetes.io/serviceaccount")  # where the kubelet mounts it
TIMEOUT = 30
JSON = "application/json"
MERGE_PATCH = "application/merge-patch+json"

Api = TypeVar("Api", bound="KubeApi")


class KubeError(RuntimeError):
    def __init__(self, status: int, reason: str, message: str):
        answer = " ".join(part for part in (str(status or "no answer"), reason) if part)
        super().__init__(f"Kubernetes API: {answer}: {message}")
        self.status = status


@dataclass
class KubeApi:
    base_url: str  # https://<host>:<port>, or a test double's http://127.0.0.1:<port>
    bearer: Callable[[], str]  # the ServiceAccount token, read when a request is made
    namespace: str  # the namespace paths default to: the pod's own unless told otherwise
    context: ssl.SSLContext | None = None

    @classmethod
    def in_cluster(cls: type[Api], account: Path = ACCOUNT, namespace: str | None = None, **fields: Any) -> Api:
        host, port = os.environ["KUBERNETES_SERVICE_HOST"], os.environ["KUBERNETES_SERVICE_PORT"]
        host = f"[{host}]" if ":" in host else host
        context = ssl.create_default_context(cafile=str(account / "ca.crt"))
        own = namespace or (account / "namespace").read_text().strip()
        return cls(f"https://{host}:{port}", lambda: (account / "token").read_text().strip(), own, context, **fields)

    def call(
        self,
        method: str,
        path: str,
        query: Mapping[str, str] | None = None,
        body: object | None = None,
        content_type: str = JSON,
    ) -> Any:
        url = self.base_url + path + (f"?{urllib.parse.urlencode(query)}" if query else "")
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(url, data=data, method=method)
        request.add_header("Authorization", f"Bearer {self.bearer()}")
        request.add_header("Accept", JSON)
        if data is not None:
            request.add_header("Content-Type", content_type)
        try:
            with urllib.request.urlopen(request, timeout=TIMEOUT, context=self.context) as response:
                text = response.read()
        except urllib.error.HTTPError as error:
            raise KubeError(error.code, str(error.reason), _message(error.read())) from None
        except (urllib.error.URLError, OSError) as error:
            raise KubeError(0, "", str(error)) from None
        return json.loads(text) if text else None

    def get(self, path: str, query: Mapping[str, str] | None = None) -> Any:
        return self.call("GET", path, query)

    def replace(self, path: str, obj: Mapping[str, Any]) -> Any:
        """PUT the object as read and changed: its metadata.resourceVersion makes it fail on a concurrent change."""
        return self.call("PUT", path, body=obj)

    def merge_patch(self, path: str, patch: Mapping[str, Any]) -> Any:
        return self.call("PATCH", path, body=patch, content_type=MERGE_PATCH)

    def create(self, path: str, obj: Mapping[str, Any]) -> Any:
        return self.call("POST", path, body=obj)

    def delete(self, path: str, options: Mapping[str, Any] | None = None) -> Any:
        return self.call("DELETE", path, body=options)

    def secret_path(self, name: str, namespace: str | None = None) -> str:
        return f"/api/v1/namespaces/{namespace or self.namespace}/secrets/{name}"


def _message(body: bytes) -> str:
    """The Status object's message, or the start of a body that is not one."""
    try:
        return str(json.loads(body).get("message", ""))
    except (ValueError, AttributeError):
        return body.decode(errors="replace")[:300]
