"""The lab's Kubernetes API: a stand-in for kube-apiserver, backed by the lab's own nodes, pods and Secrets.

No API server can run here (it needs etcd and the control plane's binaries), so the pods of the
plan that call the API (nova-compute-maintenance, the key rotation CronJobs) and the scenario
(as an administrator with kubectl would) talk to this, over HTTPS at the `kubernetes` Service's
address, with the token the kubelet mounts for their ServiceAccount. It answers as the API
server does where its clients depend on it, and it is the cluster's state, not a copy:

- Nodes: list (label selectors), get, JSON merge patch with the resourceVersion precondition;
  what is patched is what the lab's scheduler reads (a cordon keeps new pods off the node).
- Pods: list (label and `spec.nodeName` field selectors), get, delete (with a uid precondition):
  the kubelet stops the pod, its DaemonSet or ReplicaSet starts a successor (tests/lab/cloud/deploy.py).
- Secrets: get, create (POST) and update (PUT) with optimistic concurrency; a write reaches the
  volumes of the pods that mount the Secret as the kubelet's sync would (files replaced, subPath
  mounts not).
- Events: create, with the API server's rule for events of cluster-scoped objects (`default`).
- ConfigMaps and custom resources (`/apis/<group>/<version>/...`, e.g. Rook's CephCluster): get, of
  what a stand-in put there (put_object): what an operator wrote, status included. Custom resources
  a controller acts on (cert-manager's CertificateRequests) are also created and deleted by clients;
  the controller's stand-in (`controllers`) then writes the status, after the create has answered.

Every request is authorised by the plan's own RBAC (Roles, ClusterRoles and their bindings,
`resourceNames` included): a 403 here is a 403 on a cluster. Tokens are the ServiceAccounts'
(issued when the kubelet mounts one) and one administrator's (the scenario's kubectl).
"""

from __future__ import annotations

import base64
import binascii
import copy
import json
import secrets
import ssl
import subprocess
import threading
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import parse_qs, urlsplit

from tests.doubles.merge_patch import MERGE_PATCH, merge_patch
from tests.doubles.rbac import rbac_rules
from tests.lab.cloud.netns import enter_netns

Manifest = dict[str, Any]
ADMIN = ("", "cluster-admin")  # the administrator's subject: a user, not a ServiceAccount
_VERBS = {"GET": "get", "PUT": "update", "PATCH": "patch", "DELETE": "delete", "POST": "create"}


class LabWorld(Protocol):
    """What the API serves, as the lab has it."""

    def api_nodes(self) -> list[Manifest]: ...
    def api_patch_node(self, name: str, patched: Manifest) -> None: ...
    def api_pods(self, namespace: str) -> list[Manifest]: ...
    def api_delete_pod(self, namespace: str, name: str) -> bool: ...
    def api_update_secret(self, namespace: str, name: str, data: Mapping[str, str]) -> None: ...


def status(code: int, reason: str, message: str) -> Manifest:
    return {"kind": "Status", "apiVersion": "v1", "status": "Failure", "message": message, "reason": reason,
            "code": code}  # fmt: skip


def _selector(text: str) -> dict[str, str]:
    """Equality-based selectors (key=value,...); set-based ones are refused, not misread."""
    terms = [t for t in text.split(",") if t]
    if any("=" not in t or "!=" in t for t in terms):
        raise ValueError(f"selector {text!r}: only key=value terms are implemented by the lab's API")
    return dict(t.replace("==", "=").split("=", 1) for t in terms)


def _replace_refused(resource: str, name: str, metadata: Manifest, stored: Manifest) -> tuple[int, Manifest] | None:
    """Why the API server refuses an update of `stored` with `metadata`: another name than the URL's, or a
    resourceVersion that is not the stored one (optimistic concurrency); None when it takes it."""
    if metadata.get("name") != name:
        return 400, status(400, "BadRequest", "the name of the object does not match the URL")
    if metadata.get("resourceVersion") != stored["metadata"]["resourceVersion"]:
        return 409, status(409, "Conflict", f'Operation cannot be fulfilled on {resource} "{name}": the object has '
                                            "been modified; please apply your changes to the latest version and "
                                            "try again")  # fmt: skip
    return None


@dataclass
class LabApiServer:
    world: LabWorld
    rbac_objects: list[Manifest]
    state: Path
    addresses: tuple[str, ...]  # IP addresses the certificate names (the Service's, the node's)
    domain: str = "cluster.local"
    tokens: dict[str, tuple[str, str]] = field(default_factory=dict)  # token → (namespace, account)
    secrets_: dict[tuple[str, str], Manifest] = field(default_factory=dict)  # (ns, name) → Secret
    # (API group, resource, namespace, name) → a ConfigMap or custom resource, as its writer made it
    objects_: dict[tuple[str, str, str, str], Manifest] = field(default_factory=dict)
    # (API group, resource) served from objects_: ConfigMaps, and the custom resources of installed CRDs
    kinds: set[tuple[str, str]] = field(default_factory=lambda: {("", "configmaps")})
    # (API group, resource) → what its controller makes of a created object (the object with its status)
    controllers: dict[tuple[str, str], Callable[[Manifest], Manifest]] = field(default_factory=dict)
    events: list[Manifest] = field(default_factory=list)
    requests: list[tuple[str, str, str, int]] = field(default_factory=list)  # (who, verb, path, status)
    denied: list[str] = field(default_factory=list)
    _versions: dict[str, int] = field(default_factory=dict)
    _version: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _server: ThreadingHTTPServer | None = None
    log: Callable[[str], None] = print

    # -- identity ----------------------------------------------------------------------------------

    @property
    def ca(self) -> Path:
        return self.state / "apiserver.crt"

    def issue(self, namespace: str, account: str) -> dict[str, str]:
        """The files the kubelet mounts for a pod of this ServiceAccount (kube-api-access)."""
        token = next((t for t, who in self.tokens.items() if who == (namespace, account)), None)
        if token is None:
            token = secrets.token_urlsafe(32)
            self.tokens[token] = (namespace, account)
        return {"token": token, "ca.crt": self.ca.read_text(), "namespace": namespace}

    def admin_token(self) -> str:
        return self.issue(*ADMIN)["token"]

    def add_secret(self, namespace: str, manifest: Manifest) -> None:
        stored = copy.deepcopy(manifest)
        stored.setdefault("metadata", {})["namespace"] = namespace
        stored["metadata"]["resourceVersion"] = self._next_version()
        string_data = stored.pop("stringData", None) or {}
        stored["data"] = {
            **dict(manifest.get("data") or {}),
            **{k: base64.b64encode(v.encode()).decode() for k, v in string_data.items()},
        }
        self.secrets_[(namespace, manifest["metadata"]["name"])] = stored

    def remove_secret(self, namespace: str, name: str) -> None:
        self.secrets_.pop((namespace, name), None)

    def install_crd(self, group: str, resource: str) -> None:
        """Serve a custom resource (what installing its CRD does): a get of one not there is then a 404."""
        self.kinds.add((group, resource))

    def put_object(self, group: str, resource: str, manifest: Manifest) -> None:
        """Create or replace a namespaced object served by `get` (an operator stand-in's write)."""
        if (group, resource) not in self.kinds:
            raise ValueError(f"{resource}.{group} is not served: install its CRD first")
        stored = copy.deepcopy(manifest)
        stored["metadata"]["resourceVersion"] = self._next_version()
        metadata = stored["metadata"]
        self.objects_[(group, resource, metadata["namespace"], metadata["name"])] = stored

    def get_object(self, group: str, resource: str, namespace: str, name: str) -> Manifest | None:
        found = self.objects_.get((group, resource, namespace, name))
        return copy.deepcopy(found) if found is not None else None

    def _next_version(self) -> str:
        self._version += 1
        return str(self._version)

    def _allowed(
        self, who: tuple[str, str], verb: str, group: str, resource: str, namespace: str | None, name: str | None
    ) -> bool:
        if who == ADMIN:
            return True
        rules = rbac_rules(self.rbac_objects, *who)
        return any(
            (where is None or where == namespace) and rule.allows(group, resource, verb, name) for where, rule in rules
        )

    # -- serving -----------------------------------------------------------------------------------

    def start(self, netns_path: str, port: int) -> None:
        self.state.mkdir(parents=True, exist_ok=True)
        self._certificate()
        ready = threading.Event()
        failure: list[BaseException] = []
        threading.Thread(target=self._serve, args=(netns_path, port, ready, failure), daemon=True).start()
        ready.wait(30)
        if failure:
            raise RuntimeError(f"the lab's API server did not start: {failure[0]}")

    def _serve(self, netns_path: str, port: int, ready: threading.Event, failure: list[BaseException]) -> None:
        api = self
        try:
            enter_netns(netns_path)  # the API server runs on the control-plane node's network

            class Handler(BaseHTTPRequestHandler):
                def _answer(self) -> None:
                    length = int(self.headers.get("Content-Length") or 0)
                    body = json.loads(self.rfile.read(length)) if length else None
                    code, reply = api.handle(
                        self.command, self.path, body, self.headers.get("Authorization", ""),
                        self.headers.get("Content-Type"),
                    )  # fmt: skip
                    data = json.dumps(reply).encode()
                    self.send_response(code)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)

                do_GET = do_PUT = do_PATCH = do_DELETE = do_POST = _answer  # noqa: N815

                def log_message(self, format: str, *args: Any) -> None:
                    pass

            server = ThreadingHTTPServer(("0.0.0.0", port), Handler)
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            context.load_cert_chain(self.ca, self.state / "apiserver.key")
            server.socket = context.wrap_socket(server.socket, server_side=True)
            self._server = server
        except BaseException as error:  # reported by start()
            failure.append(error)
            ready.set()
            return
        ready.set()
        server.serve_forever(0.2)

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()

    def _certificate(self) -> None:
        names = ["kubernetes", "kubernetes.default", "kubernetes.default.svc", f"kubernetes.default.svc.{self.domain}"]
        alt = ",".join([*(f"DNS:{n}" for n in names), *(f"IP:{a}" for a in self.addresses)])
        subprocess.run(
            ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=kube-apiserver",
             "-addext", f"subjectAltName={alt}", "-keyout", str(self.state / "apiserver.key"), "-out", str(self.ca)],
            check=True, capture_output=True,
        )  # fmt: skip

    # -- the API -----------------------------------------------------------------------------------

    def handle(
        self, method: str, target: str, body: Any, authorization: str, content_type: str | None
    ) -> tuple[int, Manifest]:
        who = self.tokens.get(authorization.removeprefix("Bearer ")) if authorization.startswith("Bearer ") else None
        url = urlsplit(target)
        query = {k: v[0] for k, v in parse_qs(url.query).items()}
        parts = url.path.strip("/").split("/")
        with self._lock:
            code, reply = self._handle(who, method, parts, query, body, content_type)
            self.requests.append((":".join(who) if who else "anonymous", method, url.path, code))
        return code, reply

    def _handle(
        self, who: tuple[str, str] | None, method: str, parts: list[str], query: Mapping[str, str], body: Any,
        content_type: str | None,
    ) -> tuple[int, Manifest]:  # fmt: skip
        if who is None:
            return 401, status(401, "Unauthorized", "Unauthorized")
        # The core group under /api/v1, the others under /apis/<group>/<version> (RBAC names the group).
        if parts[:2] == ["api", "v1"]:
            group, rest = "", parts[2:]
        elif parts[:1] == ["apis"] and len(parts) >= 3:
            group, rest = parts[1], parts[3:]
        else:
            return 404, status(404, "NotFound", f"/{'/'.join(parts)} is not served by the lab's API")
        namespace = None
        if rest[:1] == ["namespaces"] and len(rest) >= 3:
            namespace, rest = rest[1], rest[2:]
        resource, name = rest[0] if rest else "", rest[1] if len(rest) > 1 else None
        verb = _VERBS[method] if name or method != "GET" else "list"
        if not self._allowed(who, verb, group, resource, namespace, name):
            subject = f"system:serviceaccount:{who[0]}:{who[1]}"
            self.denied.append(f"{subject} {verb} {resource}" + (f"/{name}" if name else "") + (
                f" in {namespace}" if namespace else ""))  # fmt: skip
            message = f'{resource} is forbidden: User "{subject}" cannot {verb} resource "{resource}"'
            return 403, status(403, "Forbidden", message)
        handler = getattr(self, f"_{verb}_{resource}", None) if group == "" else None
        if verb == "get" and namespace and name and (group, resource) in self.kinds:
            found = self.get_object(group, resource, namespace, name)
            kind = f"{resource}.{group}" if group else resource
            return (200, found) if found else (404, status(404, "NotFound", f'{kind} "{name}" not found'))
        if verb in ("create", "delete") and namespace and (group, resource) in self.controllers:
            return self._controlled(verb, group, resource, namespace, name, body)
        if handler is None:
            return 405, status(405, "MethodNotAllowed", f"{verb} {resource} is not served by the lab's API")
        try:
            return handler(namespace=namespace, name=name, query=query, body=body, content_type=content_type)
        except ValueError as error:
            return 400, status(400, "BadRequest", str(error))

    # custom resources a controller acts on

    def _controlled(
        self, verb: str, group: str, resource: str, namespace: str, name: str | None, body: Any
    ) -> tuple[int, Manifest]:
        kind = f"{resource}.{group}"
        if verb == "delete":
            found = self.objects_.pop((group, resource, namespace, name or ""), None)
            return (200, found) if found else (404, status(404, "NotFound", f'{kind} "{name}" not found'))
        metadata = (body or {}).get("metadata") or {}
        wanted = metadata.get("name", "")
        if name is not None or not wanted:
            return 400, status(400, "BadRequest", f"create {kind}: POST to the collection with metadata.name")
        if (group, resource, namespace, wanted) in self.objects_:
            return 409, status(409, "AlreadyExists", f'{kind} "{wanted}" already exists')
        created = copy.deepcopy(body)
        created["metadata"] = {**metadata, "namespace": namespace, "uid": str(uuid.uuid4()),
                               "resourceVersion": self._next_version()}  # fmt: skip
        created.pop("status", None)
        self.objects_[(group, resource, namespace, wanted)] = created
        # The controller works after the answer, as cert-manager's does when it sees the new object.
        threading.Thread(target=self._control, args=(group, resource, copy.deepcopy(created)), daemon=True).start()
        return 201, copy.deepcopy(created)

    def _control(self, group: str, resource: str, created: Manifest) -> None:
        done = self.controllers[(group, resource)](created)
        meta = created["metadata"]
        with self._lock:
            key = (group, resource, meta["namespace"], meta["name"])
            if self.objects_.get(key, {}).get("metadata", {}).get("uid") == meta["uid"]:  # not deleted meanwhile
                done["metadata"]["resourceVersion"] = self._next_version()
                self.objects_[key] = done

    # nodes

    def _node(self, node: Manifest) -> Manifest:
        name = node["name"]
        spec: Manifest = {}
        if node["unschedulable"]:
            spec["unschedulable"] = True
        if node["taints"]:
            spec["taints"] = node["taints"]
        return {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {
                "name": name,
                "uid": str(uuid.uuid5(uuid.NAMESPACE_DNS, name)),
                "labels": node["labels"],
                "annotations": node["annotations"],
                "resourceVersion": str(self._versions.setdefault(f"node/{name}", 1)),
            },
            "spec": spec,
            "status": {"addresses": [{"type": "InternalIP", "address": node["address"]},
                                     {"type": "Hostname", "address": name}]},
        }  # fmt: skip

    def _list_nodes(self, query: Mapping[str, str], **_: Any) -> tuple[int, Manifest]:
        wanted = _selector(query.get("labelSelector", ""))
        items = [self._node(n) for n in self.world.api_nodes()]
        items = [n for n in items if wanted.items() <= n["metadata"]["labels"].items()]
        return 200, {"kind": "NodeList", "apiVersion": "v1", "items": items}

    def _get_nodes(self, name: str, **_: Any) -> tuple[int, Manifest]:
        found = [self._node(n) for n in self.world.api_nodes() if n["name"] == name]
        return (200, found[0]) if found else (404, status(404, "NotFound", f'nodes "{name}" not found'))

    def _patch_nodes(self, name: str, body: Any, content_type: str | None, **_: Any) -> tuple[int, Manifest]:
        if content_type != MERGE_PATCH:
            return 415, status(415, "UnsupportedMediaType", f"the lab's API takes {MERGE_PATCH} only")
        code, node = self._get_nodes(name)
        if code != 200:
            return code, node
        wanted = (body.get("metadata") or {}).get("resourceVersion")
        if wanted and wanted != node["metadata"]["resourceVersion"]:
            return 409, status(409, "Conflict", "the object has been modified; please apply your changes to the "
                                                "latest version and try again")  # fmt: skip
        patched = merge_patch(node, body)
        if patched["metadata"].get("name") != name or patched["metadata"].get("labels") is None:
            return 422, status(422, "Invalid", "metadata.name and metadata.labels must stay")
        self.world.api_patch_node(name, patched)
        self._versions[f"node/{name}"] = self._versions.get(f"node/{name}", 1) + 1
        return self._get_nodes(name)

    # pods

    def _list_pods(self, namespace: str, query: Mapping[str, str], **_: Any) -> tuple[int, Manifest]:
        fields, wanted = _selector(query.get("fieldSelector", "")), _selector(query.get("labelSelector", ""))
        if set(fields) - {"spec.nodeName"}:
            raise ValueError(f"field selector {query['fieldSelector']!r}: only spec.nodeName is implemented")
        items = [
            p for p in self.world.api_pods(namespace)
            if wanted.items() <= p["metadata"]["labels"].items()
            and fields.get("spec.nodeName", p["spec"]["nodeName"]) == p["spec"]["nodeName"]
        ]  # fmt: skip
        return 200, {"kind": "PodList", "apiVersion": "v1", "items": items}

    def _get_pods(self, namespace: str, name: str, **_: Any) -> tuple[int, Manifest]:
        found = [p for p in self.world.api_pods(namespace) if p["metadata"]["name"] == name]
        return (200, found[0]) if found else (404, status(404, "NotFound", f'pods "{name}" not found'))

    def _delete_pods(self, namespace: str, name: str, body: Any, **_: Any) -> tuple[int, Manifest]:
        code, pod = self._get_pods(namespace, name)
        if code != 200:
            return code, pod
        expected = ((body or {}).get("preconditions") or {}).get("uid")
        if expected and expected != pod["metadata"]["uid"]:
            return 409, status(409, "Conflict", "Precondition failed: UID in precondition does not match")
        # Deletion is graceful: the answer comes at once, the kubelet stops the pod in its own time.
        threading.Thread(target=self.world.api_delete_pod, args=(namespace, name), daemon=True).start()
        return 200, pod

    # secrets

    def _get_secrets(self, namespace: str, name: str, **_: Any) -> tuple[int, Manifest]:
        stored = self.secrets_.get((namespace, name))
        if stored is None:
            return 404, status(404, "NotFound", f'secrets "{name}" not found')
        return 200, copy.deepcopy(stored)

    def _update_secrets(self, namespace: str, name: str, body: Any, **_: Any) -> tuple[int, Manifest]:
        stored = self.secrets_.get((namespace, name))
        if stored is None:
            return 404, status(404, "NotFound", f'secrets "{name}" not found')
        metadata = body.get("metadata") or {}
        refused = _replace_refused("secrets", name, metadata, stored)
        if refused is not None:
            return refused
        try:
            decoded = {k: base64.b64decode(v, validate=True).decode() for k, v in (body.get("data") or {}).items()}
        except (binascii.Error, ValueError):
            return 400, status(400, "BadRequest", "data: illegal base64 data")
        stored["data"] = dict(body.get("data") or {})
        for key in ("labels", "annotations"):
            stored["metadata"][key] = dict(metadata.get(key) or {})
        stored["metadata"]["ownerReferences"] = list(metadata.get("ownerReferences") or [])
        stored["metadata"]["resourceVersion"] = self._next_version()
        self.world.api_update_secret(namespace, name, decoded)
        return 200, copy.deepcopy(stored)

    def _create_secrets(self, namespace: str, name: str | None, body: Any, **_: Any) -> tuple[int, Manifest]:
        metadata = (body or {}).get("metadata") or {}
        name = name or metadata.get("name")
        if not name or metadata.get("namespace", namespace) != namespace:
            return 400, status(400, "BadRequest", "metadata.name is required, in the namespace of the URL")
        if (namespace, name) in self.secrets_:
            return 409, status(409, "AlreadyExists", f'secrets "{name}" already exists')
        try:
            decoded = {k: base64.b64decode(v, validate=True).decode() for k, v in (body.get("data") or {}).items()}
        except (binascii.Error, ValueError):
            return 400, status(400, "BadRequest", "data: illegal base64 data")
        stored = {**copy.deepcopy(body), "type": body.get("type") or "Opaque"}
        stored["metadata"] = {**metadata, "name": name, "namespace": namespace, "resourceVersion": self._next_version()}
        self.secrets_[(namespace, name)] = stored
        self.world.api_update_secret(namespace, name, decoded)
        return 201, copy.deepcopy(stored)

    # configmaps: stored as their writers send them (the CA bundle Job's), served by the generic get

    def _create_configmaps(self, namespace: str, name: str | None, body: Any, **_: Any) -> tuple[int, Manifest]:
        metadata = (body or {}).get("metadata") or {}
        name = name or metadata.get("name")
        if not name or metadata.get("namespace", namespace) != namespace:
            return 400, status(400, "BadRequest", "metadata.name is required, in the namespace of the URL")
        if ("", "configmaps", namespace, name) in self.objects_:
            return 409, status(409, "AlreadyExists", f'configmaps "{name}" already exists')
        stored = copy.deepcopy(body)
        stored["metadata"] = {**metadata, "name": name, "namespace": namespace, "resourceVersion": self._next_version()}
        self.objects_[("", "configmaps", namespace, name)] = stored
        return 201, copy.deepcopy(stored)

    def _update_configmaps(self, namespace: str, name: str, body: Any, **_: Any) -> tuple[int, Manifest]:
        stored = self.objects_.get(("", "configmaps", namespace, name))
        if stored is None:
            return 404, status(404, "NotFound", f'configmaps "{name}" not found')
        metadata = body.get("metadata") or {}
        refused = _replace_refused("configmaps", name, metadata, stored)
        if refused is not None:
            return refused
        updated = copy.deepcopy(body)
        updated["metadata"] = {**metadata, "namespace": namespace, "resourceVersion": self._next_version()}
        self.objects_[("", "configmaps", namespace, name)] = updated
        return 200, copy.deepcopy(updated)

    # events

    def _create_events(self, namespace: str, body: Any, **_: Any) -> tuple[int, Manifest]:
        involved = body.get("involvedObject") or {}
        # kubernetes pkg/apis/core/validation/events.go, legacyValidateEvent (no eventTime set).
        if not involved.get("namespace") and namespace not in ("", "default"):
            return 422, status(422, "Invalid", 'involvedObject.namespace: Invalid value: "": does not match '
                                               "event.namespace")  # fmt: skip
        if involved.get("namespace") and involved["namespace"] != namespace:
            return 422, status(422, "Invalid", "involvedObject.namespace: does not match event.namespace")
        event = copy.deepcopy(body)
        event["metadata"]["name"] = event["metadata"].pop("generateName", "") + uuid.uuid4().hex[:10]
        self.events.append(event)
        return 201, event
