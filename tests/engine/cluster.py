"""A real Kubernetes API server for the user's commands: etcd and kube-apiserver on loopback.

Both are the real programs (tests/engine/build_go_tools.sh builds kube-apiserver from
k8s.io/kubernetes; etcd is Debian's etcd-server), with RBAC on and every admission plugin the
API server enables by default, so what `pulumi preview` sends is validated and admitted as a
cluster would. What is not here: a kubelet, a scheduler's nodes, a network plugin, a container
runtime. Nothing runs a pod, so `pulumi up` would wait forever for the first Job; the preview's
server-side dry run is what these tests use.

The CustomResourceDefinitions are those the operators and cert-manager install (tests/fixtures,
read from each project's release), applied as a cluster that runs them has them.
"""

from __future__ import annotations

import json
import ssl
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from tests.lab.realenv.servers import free_port
from tests.real import pki

READY_SECONDS = 90
HOST = "127.0.0.1"


class ApiError(RuntimeError):
    def __init__(self, code: int, message: str):
        super().__init__(message)
        self.code = code


@dataclass(frozen=True)
class ApiServer:
    url: str
    kubeconfig: Path
    ca: Path
    client_cert: Path
    client_key: Path

    def _context(self) -> ssl.SSLContext:
        context = ssl.create_default_context(cafile=str(self.ca))
        context.load_cert_chain(str(self.client_cert), str(self.client_key))
        return context

    def request(self, method: str, path: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(self.url + path, data=data, method=method)
        request.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(request, context=self._context(), timeout=30) as answer:
                return dict(json.loads(answer.read() or b"{}"))
        except urllib.error.HTTPError as error:
            status = json.loads(error.read() or b"{}")
            raise ApiError(error.code, f"{method} {path}: {error.code} {status.get('message', status)}") from None

    def ready(self) -> bool:
        try:
            request = urllib.request.Request(self.url + "/readyz")
            with urllib.request.urlopen(request, context=self._context(), timeout=5) as answer:
                return bool(answer.status == 200)
        except (urllib.error.URLError, OSError):
            return False

    def apply_crds(self, paths: list[Path]) -> list[str]:
        """Create each CustomResourceDefinition and wait until the API server serves it."""
        names = []
        for path in paths:
            for crd in yaml.safe_load_all(path.read_text()):
                if crd and crd.get("kind") == "CustomResourceDefinition":
                    crd.get("metadata", {}).pop("creationTimestamp", None)
                    self.request("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", crd)
                    names.append(crd["metadata"]["name"])
        deadline = time.monotonic() + 60
        for name in names:
            while True:
                crd = self.request("GET", f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{name}")
                conditions = {c["type"]: c["status"] for c in crd.get("status", {}).get("conditions", [])}
                if conditions.get("Established") == "True":
                    break
                if time.monotonic() > deadline:
                    raise TimeoutError(f"CustomResourceDefinition {name} not established: {conditions}")
                time.sleep(0.2)
        return names


def _pki(directory: Path) -> None:
    """A CA, the API server's serving certificate, an admin client (system:masters), the SA key."""
    directory.mkdir(parents=True, exist_ok=True)
    ca = pki.make_ca("openstack-on-k8s-engine-ca")
    (directory / "ca.crt").write_bytes(pki.pem(ca[0]))
    admin = x509.Name(
        [
            x509.NameAttribute(NameOID.ORGANIZATION_NAME, "system:masters"),
            x509.NameAttribute(NameOID.COMMON_NAME, "admin"),
        ]
    )
    issued = {
        "apiserver": pki.leaf(ca, ["localhost"], ips=(HOST,)),
        "admin": pki.leaf(ca, [], subject=admin, usage=ExtendedKeyUsageOID.CLIENT_AUTH),
    }
    for name, files in issued.items():
        (directory / f"{name}.crt").write_bytes(files["tls.crt"])
        (directory / f"{name}.key").write_bytes(files["tls.key"])
    key = rsa.generate_private_key(65537, 2048)
    pkcs8 = serialization.PrivateFormat.PKCS8
    (directory / "sa.key").write_bytes(
        key.private_bytes(serialization.Encoding.PEM, pkcs8, serialization.NoEncryption())
    )


def _kubeconfig(path: Path, url: str, pki: Path) -> None:
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "engine", "cluster": {"server": url, "certificate-authority": str(pki / "ca.crt")}}],
        "users": [
            {
                "name": "admin",
                "user": {"client-certificate": str(pki / "admin.crt"), "client-key": str(pki / "admin.key")},
            }
        ],
        "contexts": [{"name": "engine", "context": {"cluster": "engine", "user": "admin"}}],
        "current-context": "engine",
    }
    path.write_text(yaml.safe_dump(config))


@contextmanager
def api_server(workdir: Path, kube_bin: Path, etcd: str = "etcd") -> Iterator[ApiServer]:
    """etcd and kube-apiserver on loopback ports of their own, stopped on exit."""
    pki = workdir / "pki"
    _pki(pki)
    client, peer, secure = free_port(), free_port(), free_port()
    processes: list[subprocess.Popen[bytes]] = []
    logs = workdir / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    try:
        processes.append(
            subprocess.Popen(
                [
                    etcd, "--name", "engine", "--data-dir", str(workdir / "etcd"),
                    "--listen-client-urls", f"http://{HOST}:{client}", "--advertise-client-urls", f"http://{HOST}:{client}",
                    "--listen-peer-urls", f"http://{HOST}:{peer}", "--initial-advertise-peer-urls", f"http://{HOST}:{peer}",
                    "--initial-cluster", f"engine=http://{HOST}:{peer}",
                ],
                stdout=(logs / "etcd.log").open("wb"), stderr=subprocess.STDOUT,
            )
        )  # fmt: skip
        processes.append(
            subprocess.Popen(
                [
                    str(kube_bin / "kube-apiserver"), f"--etcd-servers=http://{HOST}:{client}",
                    f"--bind-address={HOST}", f"--advertise-address={HOST}", f"--secure-port={secure}",
                    f"--tls-cert-file={pki / 'apiserver.crt'}", f"--tls-private-key-file={pki / 'apiserver.key'}",
                    f"--client-ca-file={pki / 'ca.crt'}", "--authorization-mode=Node,RBAC",
                    f"--service-account-key-file={pki / 'sa.key'}",
                    f"--service-account-signing-key-file={pki / 'sa.key'}",
                    "--service-account-issuer=https://kubernetes.default.svc",
                    "--service-cluster-ip-range=10.96.0.0/16", "--endpoint-reconciler-type=none",
                ],
                stdout=(logs / "kube-apiserver.log").open("wb"), stderr=subprocess.STDOUT,
            )
        )  # fmt: skip
        url = f"https://{HOST}:{secure}"
        server = ApiServer(url, workdir / "kubeconfig", pki / "ca.crt", pki / "admin.crt", pki / "admin.key")
        _kubeconfig(server.kubeconfig, url, pki)
        deadline = time.monotonic() + READY_SECONDS
        while not server.ready():
            if any(p.poll() is not None for p in processes) or time.monotonic() > deadline:
                tail = (logs / "kube-apiserver.log").read_text(errors="replace")[-3000:]
                raise RuntimeError(f"kube-apiserver not ready in {READY_SECONDS} s:\n{tail}")
            time.sleep(0.5)
        yield server
    finally:
        for process in reversed(processes):
            process.terminate()
        for process in processes:
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                process.kill()
