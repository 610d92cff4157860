"""A stand-in for the Kubernetes API's Secret endpoint, for a pod's script that uses its token.

No API server can run here (it needs etcd and the control plane's binaries), so this is the
test double: it serves what such a script uses, GET and PUT (update) of
`/api/v1/namespaces/<ns>/secrets/<name>`, over HTTPS with a certificate the script must
verify against the CA it is given, as the API server answers them:

- 401 without the ServiceAccount's bearer token;
- 403 for a verb or Secret that the plan's Role does not allow (its rules, resourceNames
  included, are what this serves by), so a script that succeeds here needs no more rights;
- 404 for a Secret that does not exist; 400 for data that is not base64;
- 409 Conflict for an update whose metadata.resourceVersion is not the current one, and a
  new resourceVersion after each update (optimistic concurrency).

`ServiceAccount.files` is what the kubelet mounts at /var/run/secrets/kubernetes.io/serviceaccount
(token, ca.crt, namespace); `environment` what it sets (KUBERNETES_SERVICE_HOST/PORT).
"""

from __future__ import annotations

import base64
import binascii
import copy
import json
import re
import secrets
import ssl
import subprocess
import threading
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

_SECRET_PATH = re.compile(r"^/api/v1/namespaces/(?P<ns>[^/]+)/secrets/(?P<name>[^/?]+)$")
_VERBS = {"GET": "get", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}


@dataclass
class Call:
    method: str
    name: str
    status: int
    resource_version: str | None = None  # what an update carried


@dataclass
class FakeSecretApi:
    namespace: str
    token: str
    rules: Sequence[Mapping[str, Any]]  # the Role's rules, as the plan declares them
    secrets: dict[str, dict[str, Any]] = field(default_factory=dict)
    calls: list[Call] = field(default_factory=list)
    # A writer that changes the Secret after each GET, as another client would in between.
    concurrent_writer: bool = False
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _version: int = 0

    def add(self, name: str, data: Mapping[str, str], labels: Mapping[str, str] | None = None) -> None:
        """A Secret as the API server stores it: data base64-encoded, with a resourceVersion."""
        self.secrets[name] = {
            "apiVersion": "v1",
            "kind": "Secret",
            "type": "Opaque",
            "metadata": {
                "name": name,
                "namespace": self.namespace,
                "labels": dict(labels or {}),
                "resourceVersion": self._next_version(),
                "managedFields": [{"manager": "pulumi-kubernetes", "operation": "Apply"}],
            },
            "data": {k: base64.b64encode(v.encode()).decode() for k, v in data.items()},
        }

    def data(self, name: str) -> dict[str, str]:
        return {k: base64.b64decode(v).decode() for k, v in self.secrets[name].get("data", {}).items()}

    def _next_version(self) -> str:
        self._version += 1
        return str(self._version)

    def allowed(self, verb: str, name: str) -> bool:
        return any(
            "" in rule.get("apiGroups", [])
            and "secrets" in rule.get("resources", [])
            and verb in rule.get("verbs", [])
            and (not rule.get("resourceNames") or name in rule["resourceNames"])
            for rule in self.rules
        )

    def handle(self, method: str, path: str, authorization: str, body: bytes) -> tuple[int, dict[str, Any]]:
        match = _SECRET_PATH.match(path)
        if not match:
            return 404, _status(404, "NotFound", f"no route {path}")
        name = match["name"]
        with self._lock:
            status, answer, version = self._handle(method, match["ns"], name, authorization, body)
            self.calls.append(Call(method, name, status, version))
            return status, answer

    def _handle(
        self, method: str, namespace: str, name: str, authorization: str, body: bytes
    ) -> tuple[int, dict[str, Any], str | None]:
        if authorization != f"Bearer {self.token}":
            return 401, _status(401, "Unauthorized", "Unauthorized"), None
        verb = _VERBS.get(method, method.lower())
        if namespace != self.namespace or not self.allowed(verb, name):
            message = f'secrets "{name}" is forbidden: cannot {verb} resource "secrets" in namespace "{namespace}"'
            return 403, _status(403, "Forbidden", message), None
        if name not in self.secrets:
            return 404, _status(404, "NotFound", f'secrets "{name}" not found'), None
        stored = self.secrets[name]
        if method == "GET":
            answer = copy.deepcopy(stored)
            if self.concurrent_writer:
                stored["metadata"]["resourceVersion"] = self._next_version()
            return 200, answer, None
        if method != "PUT":
            return 405, _status(405, "MethodNotAllowed", method), None
        update = json.loads(body)
        version = (update.get("metadata") or {}).get("resourceVersion")
        if update.get("metadata", {}).get("name") != name:
            return 400, _status(400, "BadRequest", "the name of the object does not match the URL"), version
        if version != stored["metadata"]["resourceVersion"]:
            message = (
                f'Operation cannot be fulfilled on secrets "{name}": the object has been modified; '
                "please apply your changes to the latest version and try again"
            )
            return 409, _status(409, "Conflict", message), version
        try:
            for value in (update.get("data") or {}).values():
                base64.b64decode(value, validate=True)
        except (binascii.Error, ValueError):
            return 400, _status(400, "BadRequest", "data: illegal base64 data"), version
        stored["data"] = dict(update.get("data") or {})
        for key in ("labels", "annotations"):
            stored["metadata"][key] = dict(update["metadata"].get(key) or {})
        stored["metadata"]["resourceVersion"] = self._next_version()
        return 200, copy.deepcopy(stored), version


def _status(code: int, reason: str, message: str) -> dict[str, Any]:
    return {"kind": "Status", "apiVersion": "v1", "status": "Failure", "message": message, "reason": reason} | {
        "code": code
    }


@dataclass(frozen=True)
class ServiceAccount:
    files: Path  # token, ca.crt, namespace: the kubelet's mount
    environment: dict[str, str]  # KUBERNETES_SERVICE_HOST and _PORT


def _certificate(directory: Path) -> tuple[Path, Path]:
    key, cert = directory / "apiserver.key", directory / "apiserver.crt"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=kubernetes",
         "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost", "-keyout", str(key), "-out", str(cert)],
        check=True, capture_output=True,
    )  # fmt: skip
    return key, cert


@contextmanager
def serve(api: FakeSecretApi, directory: Path) -> Iterator[ServiceAccount]:
    """Serve `api` on 127.0.0.1 over HTTPS; yields the ServiceAccount files and environment of a pod."""
    directory.mkdir(parents=True, exist_ok=True)
    key, cert = _certificate(directory)

    class Handler(BaseHTTPRequestHandler):
        def _answer(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            status, answer = api.handle(self.command, self.path, self.headers.get("Authorization", ""), body)
            payload = json.dumps(answer).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        do_GET = do_PUT = do_PATCH = do_DELETE = _answer  # noqa: N815

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    account = directory / "serviceaccount"
    account.mkdir(exist_ok=True)
    (account / "token").write_text(api.token)
    (account / "ca.crt").write_text(cert.read_text())
    (account / "namespace").write_text(api.namespace)
    try:
        port = str(server.server_address[1])
        yield ServiceAccount(account, {"KUBERNETES_SERVICE_HOST": "127.0.0.1", "KUBERNETES_SERVICE_PORT": port})
    finally:
        server.shutdown()
        server.server_close()


def new_token() -> str:
    return secrets.token_urlsafe(32)
