"""memcached on internal TLS, with real software: Debian's memcached started with the plan's TLS options,
serving a certificate of exactly the names the plan's Certificate `memcached-internal-tls` asks for;
the plan's own clients through the release's code: oslo.cache with the plan's [cache],
keystonemiddleware's token cache with its [keystone_authtoken], and Django's cache with Horizon's
local_settings.py (pymemcache), each run by tests/real/memcached_clients.py in the OpenStack venv.

What it shows: each client stores and reads back over TLS verifying the internal CA (the lab's packet
capture classes every connection TLS); one without the CA, or reaching the server by a name its
certificate lacks, is refused; a plain-text client gets nothing. And memcached's readiness probe puts a
renewed certificate into service without a restart (memcached alone keeps serving the old one) and
without losing what the cache holds.
"""

from __future__ import annotations

import json
import re
import socket
import ssl
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes

from tests.lab.cloud import endpoint_tls, tls_probe
from tests.lab.cloud.capture import Capture, connections, summarize
from tests.lab.realenv.openstack_venv import OpenStackVenv
from tests.lab.realenv.servers import Server, run_memcached
from tests.real import pki
from tests.test_mariadb_tls import plain_plan, tls_plan
from tools.plan import Plan

pytestmark = pytest.mark.real

REPO = Path(__file__).resolve().parents[2]
CLIENTS = Path(__file__).with_name("memcached_clients.py")
CA_FILE, CERT_DIR = "/etc/openstack-ca/ca.crt", "/etc/openstack-tls"
PORT = "11211"  # memcached's in the plan


@dataclass(frozen=True)
class TlsMemcached:
    server: Server
    names: list[str]  # the plan's certificate's
    ca: pki.CA
    ca_file: Path
    mount: Path  # the certificate's Secret, as the kubelet mounts it
    workdir: Path

    def resolve(self) -> str:
        """Every name of the certificate, resolved to the test server (the cluster's DNS)."""
        return json.dumps({name: self.server.port for name in self.names})

    def context(self) -> ssl.SSLContext:
        return ssl.create_default_context(cafile=self.ca_file)


def _memcached_args(plan: Plan) -> list[str]:
    pod = plan.by_name("memcached", "StatefulSet").inputs["spec"]["template"]["spec"]
    return list(next(c for c in pod["containers"] if c["name"] == "memcached")["args"])


def _tls_options(plan: Plan, mount: Path) -> tuple[str, ...]:
    """The plan's TLS options of memcached, its mount path moved to the test's directory."""
    args = _memcached_args(plan)
    assert not any("notls" in arg for arg in args)  # no listener left in clear beside the TLS one
    options = args[args.index("-Z") :]
    assert options == ["-Z", "-o", f"ssl_chain_cert={CERT_DIR}/tls.crt,ssl_key={CERT_DIR}/tls.key"]
    return tuple(option.replace(f"{CERT_DIR}/", f"{mount}/") for option in options)


@contextmanager
def _start(plan: Plan, workdir: Path) -> Iterator[TlsMemcached]:
    names = plan.by_name("memcached-internal-tls", "Certificate").inputs["spec"]["dnsNames"]
    ca = pki.make_ca("internal-ca")
    ca_file = workdir / "ca.crt"
    ca_file.write_bytes(pki.pem(ca[0]))
    mount = workdir / "memcached-internal-tls"
    pki.write_secret(mount, pki.leaf(ca, names, serial=1), "v1")
    (workdir / "memcached").mkdir()
    context, options = ssl.create_default_context(cafile=ca_file), _tls_options(plan, mount)
    with run_memcached(workdir / "memcached", options=options, tls=context, server_name=names[-1]) as server:
        yield TlsMemcached(server, names, ca, ca_file, mount, workdir)


@pytest.fixture(scope="module")
def memcached_tls(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TlsMemcached]:
    with _start(tls_plan("dev"), tmp_path_factory.mktemp("memcached-tls")) as memcached:
        yield memcached


def _file(plan: Plan, secret: str, name: str) -> str:
    return str(plan.by_name(secret, "Secret").revealed["stringData"][name])


def _run(venv: OpenStackVenv, memcached: TlsMemcached, client: str, text: str) -> dict[str, Any]:
    """One of memcached_clients.py's clients with `text` as its file, the CA path the test's."""
    path = memcached.workdir / f"{client}-{abs(hash(text))}"
    path.write_text(text.replace(CA_FILE, str(memcached.ca_file)))
    args = [str(venv.python), str(CLIENTS), memcached.resolve(), client, str(path)]
    done = subprocess.run(args, capture_output=True, text=True, timeout=120, env=venv.env())
    assert done.returncode == 0, done.stderr[-3000:]
    return dict(json.loads(done.stdout.splitlines()[-1]))


def _without_ca(text: str) -> str:
    """The same options, less the CA: the client trusts only the system's CAs."""
    text = re.sub(r"^(memcache_)?tls_cafile = .*\n", "", text, flags=re.MULTILINE)
    return text.replace(f"cafile={CA_FILE!r}", "")


def test_the_plans_clients_store_and_read_over_tls_verifying_the_ca(
    memcached_tls: TlsMemcached, openstack_venv: OpenStackVenv
) -> None:
    plan = tls_plan("dev")
    nova, horizon = _file(plan, "nova-etc", "nova.conf"), _file(plan, "horizon-etc", "local_settings.py")
    keystone = _file(plan, "keystone-etc", "keystone.conf")
    capture = Capture(memcached_tls.workdir / "pcap", [None], [memcached_tls.server.port])
    with capture:
        runs = {
            "oslo.cache (keystone.conf)": _run(openstack_venv, memcached_tls, "oslo.cache", keystone),
            "oslo.cache (nova.conf)": _run(openstack_venv, memcached_tls, "oslo.cache", nova),
            "keystonemiddleware": _run(openstack_venv, memcached_tls, "keystonemiddleware", nova),
            "django": _run(openstack_venv, memcached_tls, "django", horizon),
        }
    for client, run in runs.items():
        assert run["read"] == "read back", (client, run)
        assert run["handshakes"] and run["handshake_failures"] == [], (client, run)
    # What crossed the wire, as the lab's `tls.encrypted` classes it: TLS only, nothing in clear.
    wire = summarize(connections(capture.pcaps, capture.ports), {"memcached": capture.ports})["memcached"]
    # (Each client's handshakes are counted above; the capture may miss one that started as it did.)
    assert wire["tls"] > 0 and wire["plain"] == 0, wire


def test_a_client_without_the_ca_or_by_a_name_the_certificate_lacks_is_refused(
    memcached_tls: TlsMemcached, openstack_venv: OpenStackVenv
) -> None:
    plan = tls_plan("dev")
    nova, horizon = _file(plan, "nova-etc", "nova.conf"), _file(plan, "horizon-etc", "local_settings.py")
    unknown_issuer = "certificate verify failed: unable to get local issuer certificate"
    for client, text in (("oslo.cache", nova), ("keystonemiddleware", nova), ("django", horizon)):
        assert _without_ca(text) != text, client  # the plan's client names the CA, this one does not
        run = _run(openstack_venv, memcached_tls, client, _without_ca(text))
        assert run["read"] in (None, "raised SSLCertVerificationError"), (client, run)
        assert run["handshake_failures"] and all(unknown_issuer in f for f in run["handshake_failures"]), run
    # The CA alone is not enough: the client checks the name it connects to (here an address).
    by_address = re.sub(
        r"^memcache_servers = .*$", f"memcache_servers = 127.0.0.1:{memcached_tls.server.port}", nova, flags=re.M
    )
    run = _run(openstack_venv, memcached_tls, "oslo.cache", by_address)
    assert run["read"] is None and run["handshake_failures"], run
    assert all("IP address mismatch" in f for f in run["handshake_failures"]), run


def test_a_plain_text_client_gets_nothing(memcached_tls: TlsMemcached, openstack_venv: OpenStackVenv) -> None:
    with socket.create_connection(memcached_tls.server.address, timeout=10) as plain:
        plain.sendall(b"version\r\n")
        try:
            answer = plain.recv(64)
        except ConnectionResetError:
            answer = b""  # memcached closed the connection with the client's bytes unread
        assert answer == b""  # the handshake failed: no answer in clear, closed
    # The plain-text plan's [cache]: python-memcached, no TLS.
    run = _run(openstack_venv, memcached_tls, "oslo.cache", _file(plain_plan("dev"), "nova-etc", "nova.conf"))
    assert run["read"] is None and run["handshakes"] == [], run


@contextmanager
def _verified(memcached: TlsMemcached) -> Iterator[ssl.SSLSocket]:
    """A connection that verifies the CA and the pod's name, as the plan's clients do."""
    raw = socket.create_connection(memcached.server.address, timeout=10)
    with raw, memcached.context().wrap_socket(raw, server_hostname=memcached.names[-1]) as tls:
        yield tls


def _served_serial(memcached: TlsMemcached) -> int:
    with _verified(memcached) as tls:
        der = tls.getpeercert(binary_form=True)
        assert der is not None
        return int(x509.load_der_x509_certificate(der).serial_number)


def _ask(memcached: TlsMemcached, command: bytes) -> bytes:
    with _verified(memcached) as tls:
        tls.sendall(command)
        return tls.recv(256)


def _probe(plan: Plan, memcached: TlsMemcached) -> subprocess.CompletedProcess[str]:
    """The plan's readiness probe, its paths and port moved to the test's."""
    pod = plan.by_name("memcached", "StatefulSet").inputs["spec"]["template"]["spec"]
    command = next(c for c in pod["containers"] if c["name"] == "memcached")["readinessProbe"]["exec"]["command"]
    assert command[2:] == [PORT, f"{CERT_DIR}/tls.crt"]
    script = command[1].replace("/scripts/", f"{REPO}/components/scripts/")
    args = [command[0], script, str(memcached.server.port), str(memcached.mount / "tls.crt")]
    return subprocess.run(args, capture_output=True, text=True, timeout=30)


def test_the_probe_puts_a_renewed_certificate_into_service_keeping_the_cache(tmp_path: Path) -> None:
    plan = tls_plan("dev")
    with _start(plan, tmp_path) as memcached:
        ready = _probe(plan, memcached)
        assert ready.returncode == 0 and ready.stdout.strip() == "ready", ready
        assert _ask(memcached, b"set kept 0 0 4\r\ndata\r\n") == b"STORED\r\n"
        # cert-manager renews (a new key, serial 2) and the kubelet swaps the Secret's files.
        pki.write_secret(memcached.mount, pki.leaf(memcached.ca, memcached.names, serial=2), "v2")
        assert _served_serial(memcached) == 1  # memcached alone goes on serving the old one
        renewed = _probe(plan, memcached)
        assert renewed.returncode == 0 and "refresh_certs" in renewed.stdout, renewed
        assert _served_serial(memcached) == 2
        assert _ask(memcached, b"get kept\r\n").startswith(b"VALUE kept 0 4\r\ndata\r\n")  # no restart: kept
        assert _probe(plan, memcached).stdout.strip() == "ready"


def test_the_probe_is_not_ready_where_memcached_does_not_speak_tls(tmp_path: Path) -> None:
    plan = tls_plan("dev")
    (tmp_path / "plain").mkdir()
    mount = tmp_path / "secret"
    pki.write_secret(mount, pki.leaf(pki.make_ca("internal-ca"), ["memcached"]), "v1")
    with run_memcached(tmp_path / "plain") as plain:
        stand_in = TlsMemcached(plain, [], pki.make_ca("unused"), tmp_path / "none", mount, tmp_path)
        not_ready = _probe(plan, stand_in)
    assert not_ready.returncode == 1 and "no TLS session" in not_ready.stderr, not_ready


def test_the_labs_endpoint_probe_finds_memcached_encrypted_and_names_the_served_certificate(
    memcached_tls: TlsMemcached,
) -> None:
    """What report.json's tls.endpoints asks of each memcached server (tests/lab/cloud/tls_probe.py, judged by
    endpoint_tls.py), against the real server: TLS verified by the pod's name, the machine's CA store refused,
    `version` in plain text unanswered; the fingerprint is the mounted certificate's (what a renewal changes)."""
    endpoint = {"name": "memcached-0:11211", "host": memcached_tls.names[-1], "port": memcached_tls.server.port,
                "protocol": "memcached", "address": memcached_tls.server.address[0]}  # fmt: skip
    judged = endpoint_tls.classify(tls_probe.probe(endpoint, str(memcached_tls.ca_file)))
    assert judged["ok"], judged["failed"]
    assert judged["plain"]["answered"] is False
    mounted = x509.load_pem_x509_certificate((memcached_tls.mount / "tls.crt").read_bytes())
    assert judged["fingerprint"] == mounted.fingerprint(hashes.SHA256()).hex()
