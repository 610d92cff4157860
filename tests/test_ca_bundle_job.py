"""The Job internal-ca-bundle's script (components/scripts/write_ca_bundle.py), run against the plan's own objects.

No Kubernetes API server or cert-manager can run here. The trust Secrets are what the lab's
cert-manager stand-in issues for the plan's Certificates (tests/lab/cloud/certmanager.py: the annotations
and `ca.crt` cert-manager writes), and the API is the lab's (tests/lab/cloud/apiserver.py), which
authorises each request by the plan's Role for the Job's ServiceAccount: a request the script makes
here is one the Role allows on a cluster. The script is imported and given a client of that API
over HTTP (kube_api.KubeApi), as tests/test_rook.py runs the Rook keys script.
"""

from __future__ import annotations

import base64
import importlib
import sys
import threading
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from cryptography import x509

from tests.doubles.json_http import serve_json
from tests.helpers import SecretsOnlyWorld
from tests.lab.cloud.apiserver import LabApiServer
from tests.lab.cloud.certmanager import CertManager
from tests.test_ca_rotation import _plan
from tools.plan import Plan

NAMESPACE = "openstack"
SCRIPTS = Path(__file__).parents[1] / "components" / "scripts"


@dataclass
class Rig:
    plan: Plan
    api: LabApiServer
    world: SecretsOnlyWorld
    certs: CertManager
    script: ModuleType
    client: Any
    env: dict[str, str] = field(default_factory=dict)

    def publish(self, secret: str) -> None:
        """cert-manager writing a Secret the plan's Certificates issue (already issued by the stand-in)."""
        self.api.add_secret(NAMESPACE, self.certs.secrets[(NAMESPACE, secret)].manifest())

    def bundle(self) -> dict[str, Any]:
        code, found = self.api.handle("GET", f"/api/v1/namespaces/{NAMESPACE}/secrets/internal-ca-bundle", None,
                                      f"Bearer {self.api.admin_token()}", None)  # fmt: skip
        assert code == 200, found
        return found

    def run(self) -> None:
        self.script.main(self.client)


def _job_env(plan: Plan) -> dict[str, str]:
    container = plan.by_name("internal-ca-bundle", "Job").revealed["spec"]["template"]["spec"]["containers"][0]
    return {e["name"]: e["value"] for e in container["env"]}


@pytest.fixture
def rig(request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Rig]:
    plan = _plan(getattr(request, "param", "trust"))
    rbac = [r.revealed for r in plan.custom if r.kind in ("Role", "RoleBinding", "ClusterRole", "ClusterRoleBinding")]
    world = SecretsOnlyWorld("internal-ca-bundle")
    api = LabApiServer(world, rbac, tmp_path, ("127.0.0.1",))
    api.ca.write_text("")  # what a token's mount carries; the API is reached over plain HTTP here
    certs = CertManager([r.revealed for r in plan.custom])
    assert certs.issue_all() == []
    for name, value in _job_env(plan).items():
        monkeypatch.setenv(name, value)
    monkeypatch.syspath_prepend(str(SCRIPTS))
    monkeypatch.delitem(sys.modules, "write_ca_bundle", raising=False)
    script = importlib.import_module("write_ca_bundle")
    monkeypatch.setattr(script, "POLL_SECONDS", 0.05)
    token = api.issue(NAMESPACE, "internal-ca-bundle")["token"]

    def answer(method: str, path: str, body: Any, headers: Any) -> tuple[int, Any]:
        return api.handle(method, path, body, headers.get("Authorization", ""), headers.get("Content-Type"))

    with serve_json(answer) as url:
        client = importlib.import_module("kube_api").KubeApi(url, lambda: token, NAMESPACE)
        yield Rig(plan, api, world, certs, script, client)
    assert api.denied == []  # nothing the Role does not allow was even tried


def _cas(secret: Mapping[str, Any]) -> list[x509.Certificate]:
    return x509.load_pem_x509_certificates(base64.b64decode(secret["data"]["ca.crt"]))


def _root(rig: Rig, name: str) -> x509.Certificate:
    return rig.certs.secrets[(NAMESPACE, name)].chain[0]


def test_a_new_stack_gets_a_bundle_of_both_cas_the_old_one_first(rig: Rig) -> None:
    rig.publish("internal-ca-trust")
    rig.publish("internal-ca-2-trust")
    rig.run()
    bundle = rig.bundle()
    assert bundle["type"] == "Opaque" and set(bundle["data"]) == {"ca.crt"}
    assert _cas(bundle) == [_root(rig, "internal-ca"), _root(rig, "internal-ca-2")]
    assert bundle["metadata"]["labels"]["k8s.mariadb.com/watch"] == ""  # mariadb-operator follows it
    assert rig.world.written == [
        (NAMESPACE, "internal-ca-bundle", {"ca.crt": base64.b64decode(bundle["data"]["ca.crt"]).decode()})
    ]


def test_it_takes_over_the_bundle_cert_manager_wrote_before_and_writes_nothing_when_unchanged(rig: Rig) -> None:
    """A stack from before the Job: the Certificate internal-ca-bundle's Secret, type kubernetes.io/tls, owned
    by the Certificate (cert-manager's --enable-certificate-owner-ref) and annotated by cert-manager."""
    old = CertManager([{
        "apiVersion": "cert-manager.io/v1", "kind": "Certificate",
        "metadata": {"name": "internal-ca-bundle", "namespace": NAMESPACE},
        "spec": {"secretName": "internal-ca-bundle", "commonName": "internal-ca-bundle", "usages": ["email protection"],
                 "issuerRef": {"group": "cert-manager.io", "kind": "Issuer", "name": "internal-ca"}},
    }, *[r.revealed for r in rig.plan.custom if r.kind == "Issuer"]])  # fmt: skip
    old.secrets = dict(rig.certs.secrets)
    manifest = old.issue(old.certificates[0]).manifest()
    owner = {"apiVersion": "cert-manager.io/v1", "kind": "Certificate", "name": "internal-ca-bundle", "uid": "1"}
    manifest["metadata"]["ownerReferences"] = [{**owner, "controller": True}]
    rig.api.add_secret(NAMESPACE, manifest)
    rig.publish("internal-ca-trust")
    rig.publish("internal-ca-2-trust")
    rig.run()
    bundle = rig.bundle()
    assert bundle["type"] == "kubernetes.io/tls" and {"tls.crt", "tls.key"} <= set(bundle["data"])  # kept: required
    assert _cas(bundle) == [_root(rig, "internal-ca"), _root(rig, "internal-ca-2")]
    meta = bundle["metadata"]
    assert meta["ownerReferences"] == [] and not [a for a in meta["annotations"] if a.startswith("cert-manager.io/")]
    assert "controller.cert-manager.io/fao" not in meta["labels"] and "k8s.mariadb.com/watch" in meta["labels"]
    version = meta["resourceVersion"]
    rig.world.written.clear()
    rig.run()  # again: the same bundle, nothing written (MariaDB's operator would roll its pods for a write)
    assert rig.bundle()["metadata"]["resourceVersion"] == version and rig.world.written == []


def test_it_waits_for_cert_manager_to_issue_the_new_trust_certificate(rig: Rig) -> None:
    rig.publish("internal-ca-trust")
    later = threading.Timer(0.5, rig.publish, ("internal-ca-2-trust",))
    later.start()
    started = time.monotonic()
    rig.run()
    assert time.monotonic() - started >= 0.5
    assert len(_cas(rig.bundle())) == 2


def test_a_trust_secret_of_another_issuer_is_not_taken(rig: Rig, monkeypatch: pytest.MonkeyPatch) -> None:
    rig.publish("internal-ca-trust")
    # internal-ca-2-trust as another issuer left it: the CA it holds is not internal-ca-2's.
    stale = rig.certs.secrets[(NAMESPACE, "internal-ca-trust")].manifest()
    stale["metadata"]["name"] = "internal-ca-2-trust"
    rig.api.add_secret(NAMESPACE, stale)
    monkeypatch.setattr(rig.script, "WAIT_SECONDS", 0.3)
    with pytest.raises(SystemExit) as stopped:
        rig.run()
    assert "Secret internal-ca-2-trust is issued by Issuer internal-ca, not yet by Issuer internal-ca-2" in str(
        stopped.value
    )
    assert rig.world.written == []  # no bundle without every CA


@pytest.mark.parametrize("rig", [None], indirect=True)
def test_once_the_old_ca_is_dropped_the_bundle_holds_the_new_one_only(rig: Rig) -> None:
    rig.publish("internal-ca-2-trust")
    rig.run()
    assert _cas(rig.bundle()) == [_root(rig, "internal-ca-2")]


def test_the_jobs_token_reads_no_ca_key(rig: Rig) -> None:
    """The roots' Secrets hold the CAs' keys: the Job's Role does not let it read them (only trust Secrets)."""
    rig.publish("internal-ca")
    token = rig.api.issue(NAMESPACE, "internal-ca-bundle")["token"]
    code, _ = rig.api.handle(
        "GET", f"/api/v1/namespaces/{NAMESPACE}/secrets/internal-ca", None, f"Bearer {token}", None
    )
    assert code == 403
    rig.api.denied.clear()


def _config_map(rig: Rig, name: str) -> dict[str, Any] | None:
    return rig.api.get_object("", "configmaps", NAMESPACE, name)


def test_each_trusted_ca_gets_a_configmap_of_its_one_certificate_for_the_gateway(rig: Rig) -> None:
    """BackendTLSPolicy's portable CA reference is a ConfigMap holding one certificate (Gateway API v1.4)."""
    for trust in ("internal-ca-trust", "internal-ca-2-trust"):
        rig.publish(trust)
    rig.run()
    for trust, root in (("internal-ca-trust", "internal-ca"), ("internal-ca-2-trust", "internal-ca-2")):
        found = _config_map(rig, trust)
        assert found is not None, trust
        [certificate] = x509.load_pem_x509_certificates(found["data"]["ca.crt"].encode())
        assert certificate == _root(rig, root)
    policies = [r.revealed for r in rig.plan.custom if r.kind == "BackendTLSPolicy"]
    assert policies
    for policy in policies:
        refs = policy["spec"]["validation"]["caCertificateRefs"]
        names = ("internal-ca-trust", "internal-ca-2-trust")
        assert refs == [{"group": "", "kind": "ConfigMap", "name": name} for name in names]
    version = _config_map(rig, "internal-ca-trust")["metadata"]["resourceVersion"]  # type: ignore[index]
    rig.run()  # again: the same CAs, nothing written
    assert _config_map(rig, "internal-ca-trust")["metadata"]["resourceVersion"] == version  # type: ignore[index]
