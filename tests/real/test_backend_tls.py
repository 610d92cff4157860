"""TLS inside the cluster with real software, without the lab: the lab's Gateway proxy (Debian's haproxy)
programmed from staging's routes and BackendTLSPolicies, in front of TLS backends on the loopback that
serve the certificates the lab's cert-manager issues for the plan; the in-cluster probe
(tests/lab/cloud/tls_probe.py) against those backends and a real mariadbd; the kubelet's HTTPS probe.

What the lab's proof relies on, checked here: the gateway reaches a backend serving its Service's
certificate of the internal CA over TLS, with the Service's name as SNI; it refuses (503) a backend whose
certificate another CA signed, one whose certificate names another Service, and one that speaks plain
HTTP where its policy asks for TLS; a backend whose policy names a CA that does not exist is sent
nothing (500, not one connection); a backend without a policy (the console proxy's, left out here) gets
plain HTTP. The probe's
facts, judged by tests/lab/cloud/endpoint_tls.py, pass the TLS backend and fail a plain one, and MariaDB under
require_secure_transport passes where the same server without it fails.
"""

from __future__ import annotations

import copy
import datetime
import json
import shutil
import ssl
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from components.mechanism.certificates import PUBLIC_TLS
from tests.conftest import plan_of
from tests.lab.cloud import endpoint_tls, tls_probe
from tests.lab.cloud.backendtls import BackendTlsPolicies
from tests.lab.cloud.certmanager import CertManager, Issued
from tests.lab.cloud.gateway import write_files
from tests.lab.cloud.gatewayapi import Backend, owners_gateway, program
from tests.lab.cloud.kubelet import http_probe
from tests.lab.cloud.pods import Probe
from tests.lab.cloud.publicclient import PublicClient
from tests.lab.cloud.standins import mariadb_tls_conf
from tests.lab.realenv.servers import free_port, run_mariadb, run_rabbitmq
from tests.real.haproxy import running_haproxy

STACK = "staging"
NAMESPACE = "openstack"
NOW = datetime.datetime.now(datetime.UTC)


class Handler(BaseHTTPRequestHandler):
    """Says which backend answered and whether the request came over TLS."""

    protocol_version = "HTTP/1.1"

    def setup(self) -> None:
        if isinstance(self.request, ssl.SSLSocket):
            self.request.do_handshake()  # here, in the request's thread: a failed one ends this request only
        super().setup()

    def do_GET(self, received: int = 0) -> None:
        seen = {"backend": self.server.name, "tls": isinstance(self.connection, ssl.SSLSocket)}  # type: ignore[attr-defined]
        body = json.dumps({**seen, **({"received": received} if received else {})}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self) -> None:
        self.do_GET(len(self.rfile.read(int(self.headers.get("Content-Length", "0")))))

    def log_message(self, format: str, *args: object) -> None:
        pass


class Server(ThreadingHTTPServer):
    """A backend Service on the loopback: TLS with a key pair, or plain HTTP without one."""

    daemon_threads = True

    def __init__(self, name: str, pair: tuple[Path, Path] | None) -> None:
        super().__init__(("127.0.0.1", 0), Handler)
        self.name = name
        self.connections = 0
        self.sni: list[str | None] = []
        self.context: ssl.SSLContext | None = None
        if pair is not None:
            self.context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            self.context.load_cert_chain(*pair)
            self.context.sni_callback = lambda sock, server_name, context: self.sni.append(server_name)  # type: ignore[assignment,misc,func-returns-value]

    @property
    def port(self) -> int:
        return int(self.server_address[1])

    def get_request(self) -> tuple[Any, Any]:
        sock, address = self.socket.accept()
        self.connections += 1
        if self.context is None:
            return sock, address
        return self.context.wrap_socket(sock, server_side=True, do_handshake_on_connect=False), address

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # a refused handshake is what some tests want


def _pair(directory: Path, name: str, certificate: str, key: str) -> tuple[Path, Path]:
    cert, key_file = directory / f"{name}.crt", directory / f"{name}.key"
    cert.write_text(certificate)
    key_file.write_text(key)
    return cert, key_file


def _foreign_pair(directory: Path, names: list[str]) -> tuple[Path, Path]:
    """A certificate of exactly the right names, signed by a CA nobody trusts."""
    ca_key, key = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "another CA")])
    day = datetime.timedelta(days=1)
    cert = (
        x509.CertificateBuilder().subject_name(x509.Name([])).issuer_name(ca_name).public_key(key.public_key())
        .serial_number(x509.random_serial_number()).not_valid_before(NOW).not_valid_after(NOW + day)
        .add_extension(x509.SubjectAlternativeName([x509.DNSName(n) for n in names]), critical=True)
        .sign(ca_key, hashes.SHA256())
    )  # fmt: skip
    pem = cert.public_bytes(serialization.Encoding.PEM).decode()
    key_pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                serialization.NoEncryption()).decode()  # fmt: skip
    return _pair(directory, "foreign", pem, key_pem)


@dataclass
class Front:
    client: PublicClient
    hosts: dict[str, str]  # catalog name → public host
    servers: dict[str, Server]
    certs: CertManager
    ca_file: Path  # the internal CA, as the clients inside the cluster trust it

    def get(self, host_key: str) -> tuple[int, dict[str, Any]]:
        answer = self.client.request(self.hosts[host_key], "GET", "/")
        body = json.loads(answer.body) if answer.status == 200 else {}
        return answer.status, body


@pytest.fixture(scope="module")
def front(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Front]:
    if shutil.which("haproxy") is None:
        pytest.fail("haproxy is not installed: apt-get install haproxy", pytrace=False)
    plan = plan_of(STACK)
    resources = [copy.deepcopy(r.revealed) for r in plan.custom]
    certs = CertManager(resources)
    assert certs.issue_all() == []
    state = tmp_path_factory.mktemp("backend-tls")

    def issued(name: str) -> Issued:
        return certs.secrets[(NAMESPACE, name)]

    def pair_of(secret: str) -> tuple[Path, Path]:
        data = issued(secret).data
        return _pair(state, secret, data["tls.crt"], data["tls.key"])

    servers = {
        "keystone-api": Server("keystone-api", pair_of("keystone-api-internal-tls")),  # the right one
        "glance-api": Server("glance-api", _foreign_pair(state, ["glance-api.openstack.svc.cluster.local"])),
        "placement-api": Server("placement-api", pair_of("nova-api-internal-tls")),  # another Service's name
        "neutron-server": Server("neutron-server", None),  # plain HTTP where its policy asks for TLS
        "cinder-api": Server("cinder-api", pair_of("cinder-api-internal-tls")),  # its policy's CA does not exist
        "horizon": Server("horizon", pair_of("horizon-internal-tls")),  # Horizon serves TLS as the APIs do
        # Its policy is left out below: a backend no policy targets gets plain HTTP.
        "nova-novncproxy": Server("nova-novncproxy", None),
    }
    for server in servers.values():
        threading.Thread(target=server.serve_forever, daemon=True).start()
    routes = [r for r in resources if r.get("kind") == "HTTPRoute"]
    for route in routes:  # each route's Service stands on a port of the loopback
        for ref in route["spec"]["rules"][0]["backendRefs"]:
            if ref["name"] in servers:
                ref["port"] = servers[ref["name"]].port
    policies = [r for r in resources if r.get("kind") == "BackendTLSPolicy"]
    # The plan gives the console proxy a policy too (it serves TLS under internal TLS); without it here,
    # it stands for a backend that no policy targets.
    assert any(p["metadata"]["name"] == "nova-novncproxy-backend-tls" for p in policies)
    policies = [p for p in policies if p["metadata"]["name"] != "nova-novncproxy-backend-tls"]
    cinder = next(p for p in policies if p["metadata"]["name"] == "cinder-api-backend-tls")
    cinder["spec"]["validation"]["caCertificateRefs"][0]["name"] = "no-such-ca"

    # What the Job internal-ca-bundle writes from staging's one trusted CA into the ConfigMap of its trust
    # Secret's name, which the policies name (components/scripts/write_ca_bundle.py).
    bundle = {"ca.crt": issued("internal-ca-trust").data["ca.crt"]}

    def lookup(kind: str, namespace: str, name: str) -> dict[str, str] | None:
        if (kind, namespace, name) == ("ConfigMap", NAMESPACE, "internal-ca-trust"):
            return bundle
        found = certs.secrets.get((namespace, name)) if kind == "Secret" else None
        return dict(found.data) if found else None

    resolver = BackendTlsPolicies(policies, lookup, lambda namespace, service, port: "api")
    existing = plan.settings.gateway.existing  # type: ignore[union-attr]
    assert existing is not None
    gateway = owners_gateway(existing.name, existing.namespace, existing.section_name or "https",
                             (NAMESPACE, PUBLIC_TLS))  # fmt: skip
    grants = [r for r in resources if r.get("kind") == "ReferenceGrant"]
    programmed = program(gateway, routes, grants, backend_tls=resolver)
    assert [p for p in programmed.problems if "cinder-api" not in p] == []

    def address(backend: Backend) -> str | None:
        return "127.0.0.1" if backend.service in servers else None

    port = free_port()
    public = issued(PUBLIC_TLS)
    config = write_files(programmed, state, lambda ns, name: public.data, address, "127.0.0.1", {443: port})
    anchor = state / "public-root.pem"
    anchor.write_text(public.trust_anchor)
    ca_file = state / "internal-ca.crt"
    ca_file.write_text(bundle["ca.crt"])
    hosts = {key: plan.settings.public_host(key) for key in ("keystone", "glance", "placement", "neutron",
                                                               "cinderv3", "horizon", "novncproxy")}  # fmt: skip
    try:
        with running_haproxy(config, port):
            yield Front(PublicClient(str(anchor), ("127.0.0.1", port)), hosts, servers, certs, ca_file)
    finally:
        for server in servers.values():
            server.shutdown()


def test_the_gateway_reaches_a_backend_over_tls_verifying_its_service_name_sent_as_sni(front: Front) -> None:
    status, body = front.get("keystone")
    assert status == 200 and body == {"backend": "keystone-api", "tls": True}
    assert front.servers["keystone-api"].sni[-1] == "keystone-api.openstack.svc.cluster.local"


@pytest.mark.parametrize(
    ("host", "backend"),
    [
        ("glance", "glance-api"),  # the right names, another CA
        ("placement", "placement-api"),  # the internal CA, another Service's names
        ("neutron", "neutron-server"),  # plain HTTP where the policy asks for TLS
    ],
)
def test_a_backend_that_fails_verification_gets_no_request_through(front: Front, host: str, backend: str) -> None:
    before = front.servers[backend].connections
    status, _ = front.get(host)
    assert status == 503  # the upstream connection fails, as Envoy's does on a TLS error
    assert front.servers[backend].connections > before  # it was tried, over TLS, and refused


def test_a_backend_whose_policy_names_a_missing_ca_is_sent_nothing(front: Front) -> None:
    before = front.servers["cinder-api"].connections
    status, _ = front.get("cinderv3")
    assert status == 500  # an invalid backendRef: the spec's 5xx, Envoy Gateway's direct response
    assert front.servers["cinder-api"].connections == before  # not one connection, plain or not


def test_an_upload_passes_whole_to_a_tls_backend(front: Front) -> None:
    """As the laptop's image upload reaches glance-api through the gateway."""
    body = b"x" * (8 << 20)
    answer = front.client.request(front.hosts["keystone"], "POST", "/upload", body=body)
    assert answer.status == 200 and json.loads(answer.body) == {"backend": "keystone-api", "tls": True,
                                                                "received": len(body)}  # fmt: skip


def test_a_backend_without_a_policy_gets_plain_http_and_horizon_gets_tls(front: Front) -> None:
    status, body = front.get("novncproxy")
    assert status == 200 and body == {"backend": "nova-novncproxy", "tls": False}
    status, body = front.get("horizon")  # its policy verifies horizon.<ns>.svc.<domain> with the internal CA
    assert status == 200 and body == {"backend": "horizon", "tls": True}


def test_the_kubelets_https_probe_does_not_verify_the_certificate(front: Front) -> None:
    port = front.servers["keystone-api"].port  # a certificate of the internal CA, for names, not 127.0.0.1
    assert http_probe("127.0.0.1", Probe("httpGet", port, scheme="HTTPS", timeout=5)) == (True, "HTTP 200")
    ok, detail = http_probe("127.0.0.1", Probe("httpGet", port, scheme="HTTP", timeout=5))
    assert not ok, detail  # HTTP to a TLS port is no answer


def _endpoint(name: str, port: int, protocol: str = "https") -> dict[str, Any]:
    return {"name": name, "host": f"{name}.openstack.svc.cluster.local", "port": port, "protocol": protocol,
            "address": "127.0.0.1"}  # fmt: skip


def test_the_in_cluster_probe_passes_a_tls_backend_of_the_internal_ca_and_fails_the_others(front: Front) -> None:
    keystone = tls_probe.probe(_endpoint("keystone-api", front.servers["keystone-api"].port), str(front.ca_file))
    judged = endpoint_tls.classify(keystone)
    assert judged["ok"], judged
    assert judged["version"] in ("TLSv1.2", "TLSv1.3")
    assert "keystone-api.openstack.svc.cluster.local" in judged["dns_names"]
    assert judged["not_after"]  # recorded as the certificate says
    # The machine's store does not know the internal CA (the server sends its leaf only, as cert-manager's tls.crt).
    assert judged["system_trust_error"] == "unable to get local issuer certificate"
    console = _endpoint("nova-novncproxy", front.servers["nova-novncproxy"].port)
    plain = endpoint_tls.classify(tls_probe.probe(console, str(front.ca_file)))
    assert not plain["ok"] and any("plain text answered in http" in f for f in plain["failed"]), plain
    foreign = tls_probe.probe(_endpoint("glance-api", front.servers["glance-api"].port), str(front.ca_file))
    assert not endpoint_tls.classify(foreign)["ok"] and foreign["verified"]["ok"] is False
    wrong_name = tls_probe.probe(_endpoint("placement-api", front.servers["placement-api"].port), str(front.ca_file))
    assert "Hostname mismatch" in wrong_name["verified"]["error"] or "doesn't match" in wrong_name["verified"]["error"]


@pytest.mark.parametrize("required", [True, False])
def test_the_probe_sees_mariadb_refuse_a_plain_login_it_admits_over_tls(
    front: Front, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, required: bool
) -> None:
    """The MariaDB stand-in's TLS options (those mariadb-operator writes for the plan's spec.tls), with
    the plan's server certificate; required: a plain login with good credentials is refused."""
    data = front.certs.secrets[(NAMESPACE, "mariadb-internal-tls")].data
    cert, key = _pair(tmp_path, "mariadb", data["tls.crt"], data["tls.key"])
    spec = plan_of(STACK).by_name("mariadb", "MariaDB").revealed["spec"]["tls"]
    options = mariadb_tls_conf({**spec, "required": required})
    options = options.replace("/etc/pki-ca/ca.crt", str(front.ca_file))
    options = options.replace("/etc/pki/server.crt", str(cert)).replace("/etc/pki/server.key", str(key))
    assert str(cert) in options and str(front.ca_file) in options
    with run_mariadb(tmp_path / "db", my_cnf=options, client_args=("--ssl",) if required else ()) as server:
        monkeypatch.setenv("MYSQL_USER", str(server.user))
        monkeypatch.setenv("MYSQL_PASSWORD", str(server.password))
        facts = tls_probe.probe({**_endpoint("mariadb", server.port, "mysql"), "address": server.host},
                                str(front.ca_file))  # fmt: skip
    judged = endpoint_tls.classify(facts)
    assert facts["verified"]["login"] == {"answer": "ok"}, facts  # the credentials are good, over TLS
    assert judged["version"] == "TLSv1.3"  # the stand-in's tls_version
    if required:
        assert judged["ok"], judged
        assert facts["plain"]["answer"] == "error"
    else:
        assert not judged["ok"] and judged["failed"] == ["a plain-text login was ok"], judged


def test_the_probe_sees_amqps_on_the_tls_port_and_plain_amqp_answered_on_the_other(
    front: Front, tmp_path: Path
) -> None:
    """Debian's RabbitMQ with a TLS listener as the stand-in configures it from the plan's spec.tls
    (the plan's rabbitmq-internal-tls, the internal CA, peers verified if they present a certificate),
    beside a plain one: the probe passes the first and catches the second answering plain AMQP."""
    data = front.certs.secrets[(NAMESPACE, "rabbitmq-internal-tls")].data
    cert, key = _pair(tmp_path, "rabbitmq", data["tls.crt"], data["tls.key"])
    tls_port = free_port()
    conf = (
        f"listeners.ssl.1 = 127.0.0.1:{tls_port}\nssl_options.certfile = {cert}\nssl_options.keyfile = {key}\n"
        f"ssl_options.cacertfile = {front.ca_file}\nssl_options.verify = verify_peer\n"
    )
    (tmp_path / "rabbitmq").mkdir()
    with run_rabbitmq(tmp_path / "rabbitmq", extra_conf=conf) as server:
        amqps = tls_probe.probe(_endpoint("rabbitmq", tls_port, "amqps"), str(front.ca_file))
        plain = tls_probe.probe(_endpoint("rabbitmq", server.port, "amqps"), str(front.ca_file))
    judged = endpoint_tls.classify(amqps)
    assert judged["ok"], judged
    assert "rabbitmq.openstack.svc.cluster.local" in judged["dns_names"]
    assert plain["plain"]["answered"] is True  # Connection.Start: plain AMQP is served there
    assert not endpoint_tls.classify(plain)["ok"]
