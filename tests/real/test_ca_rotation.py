"""A CA rotation's phases as the cloud's clients live them, with real software: two CAs, a bundle of both.

Each server runs with a certificate of the CA being replaced, then (phase issue) of the new one, as
cert-manager issues them; each client trusts the bundle the Job internal-ca-bundle writes, mounted as
the kubelet mounts a Secret (tests/real/pki.py: files swapped atomically), and it changes on disk as
the phases change it: the old CA only, then both (phase trust), then the new one only (rotation removed).

- The clients that read the CA file at each new connection (components/infrastructure/ca_rotation.py): keystoneauth
  against the plan's uWSGI, PyMySQL through the plan's oslo.db URL against MariaDB, py-amqp with
  oslo.messaging's ssl parameters against RabbitMQ. One process each, never restarted: a bundle of both
  CAs accepts a certificate of either, and once the old CA is dropped from the file the same process
  refuses a certificate of it. Nothing of theirs needs a restart in any phase.
- memcached's clients, the plan's own (oslo.cache, keystonemiddleware, Django's cache for Horizon:
  tests/real/memcached_clients.py), build their TLS context when they start: one started with both CAs
  accepts memcached's certificate of the new CA; one started before the bundle held it refuses it even
  after the file on disk holds both, until it is started again. That restart is what the program's
  template annotation gives exactly those processes (tests/test_ca_rotation.py).
"""

from __future__ import annotations

import http.client
import json
import ssl
import subprocess
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import IO, Any

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes

from components.mechanism.inifile import parse_ini, render_ini
from tests.lab.cloud import tls_probe
from tests.lab.cloud.gateway import soft_reload
from tests.lab.cloud.standins import MARIADB_CA_DIR, MARIADB_TLS_DIR, mariadb_tls, mariadb_tls_conf
from tests.lab.realenv.openstack_venv import OpenStackVenv
from tests.lab.realenv.servers import free_port, run_mariadb, run_rabbitmq
from tests.real import pki
from tests.real.haproxy import running_haproxy
from tests.real.test_mariadb_tls import _keystone_url, _pointed_at
from tests.real.test_memcached_tls import _probe, _start
from tests.test_ca_rotation import _plan

pytestmark = pytest.mark.real

HERE = Path(__file__).parent
CA_FILE = "/etc/openstack-ca/ca.crt"
SETTLE = 60.0  # seconds a server may take to serve a swapped certificate (RabbitMQ's PEM cache check: 1 s here)


class Cas:
    """The CA being replaced and the new one, and bundles of them as the Job writes them (old first)."""

    def __init__(self) -> None:
        self.old, self.new = pki.make_ca("internal-ca"), pki.make_ca("internal-ca-2")
        self.versions = 0

    def bundle(self, *which: str) -> bytes:
        return b"".join(pki.pem(getattr(self, name)[0]) for name in which)

    def mount(self, directory: Path, *which: str) -> Path:
        """The bundle Secret as a pod mounts it (a new version swapped in); returns its ca.crt."""
        self.versions += 1
        pki.write_secret(directory, {"ca.crt": self.bundle(*which)}, f"v{self.versions}")
        return directory / "ca.crt"


def _fingerprint(pair: dict[str, bytes]) -> str:
    return x509.load_pem_x509_certificate(pair["tls.crt"]).fingerprint(hashes.SHA256()).hex()


def _serves(address: tls_probe.Address, protocol: str, pair: dict[str, bytes], trust: Path) -> None:
    """Wait until the server presents this certificate."""
    wanted, deadline, found = _fingerprint(pair), time.monotonic() + SETTLE, {}
    while time.monotonic() < deadline:
        found = tls_probe.verified(address, protocol, str(trust))
        if found.get("fingerprint") == wanted:
            return
        time.sleep(0.5)
    pytest.fail(f"{address} does not serve the new certificate after {SETTLE}s: {found}")


class Rounds:
    """A client process run in the OpenStack venv: one JSON line when it has started (`first`), then one for
    each round asked of it on stdin."""

    def __init__(self, venv: OpenStackVenv, args: list[str], log: Path) -> None:
        self.log = log.open("w")
        self.process = subprocess.Popen([str(venv.python), *args], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                        stderr=self.log, text=True, env=venv.env())  # fmt: skip
        self.first = self._line()

    def _line(self) -> dict[str, Any]:
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        assert line, f"the client ended: {self.log.name}"
        return dict(json.loads(line))

    def round(self) -> dict[str, Any]:
        assert self.process.stdin is not None
        self.process.stdin.write("go\n")
        self.process.stdin.flush()
        return self._line()

    def close(self) -> None:
        self.process.kill()
        self.process.wait()
        self.log.close()


@contextmanager
def _client(venv: OpenStackVenv, kind: str, target: dict[str, Any], log: Path) -> Iterator[Rounds]:
    """A client of tests/real/ca_clients.py: one new connection per round."""
    client = Rounds(venv, [str(HERE / "ca_clients.py"), kind, json.dumps(target)], log)
    assert client.first == {"ready": True}
    try:
        yield client
    finally:
        client.close()


def _phases(client: Rounds, cas: Cas, bundle: Path, switch: Any) -> list[dict[str, Any]]:
    """The bundle and the server's certificate through the phases; the client's round after each.
    `switch(ca)` makes the server present a certificate of that CA and waits until it does."""
    rounds = [client.round()]  # before: the old CA, in the bundle and on the server
    cas.mount(bundle.parent, "old", "new")  # trust: the Job writes both, the kubelet swaps the file
    switch(cas.new)  # issue: the server's certificate is the new CA's
    rounds.append(client.round())
    cas.mount(bundle.parent, "new")  # rotation removed: the new CA only
    switch(cas.old)  # a certificate of the dropped CA (one issued before, or forged with its key)
    rounds.append(client.round())
    return rounds


def _judge(rounds: list[dict[str, Any]], refused: str) -> None:
    assert rounds[0]["ok"] and rounds[1]["ok"], rounds  # either CA's certificate, through the same process
    assert not rounds[2]["ok"] and refused in str(rounds[2]["error"]), rounds  # the file is read again


def test_keystoneauth_reads_the_bundle_per_connection_through_every_phase(
    openstack_venv: OpenStackVenv, tmp_path: Path
) -> None:
    """The plan's keystone uWSGI serving (its https-socket and touch-reload), keystoneauth as every service's
    clients call the internal APIs (`cafile`)."""
    plan, cas = _plan("trust"), Cas()
    parsed = parse_ini(plan.by_name("keystone-etc", "Secret").revealed["stringData"]["keystone-uwsgi.ini"])
    ini = {name: dict(parsed[name]) for name in parsed.sections()}
    _, cert, key = ini["uwsgi"].pop("https-socket").split(",")
    mount, port = tmp_path / "keystone-api-internal-tls", free_port()
    pair = pki.leaf(cas.old, ["localhost"])
    pki.write_secret(mount, pair, "v0")
    ini["uwsgi"] |= {"https-socket": f"127.0.0.1:{port},{mount / Path(cert).name},{mount / Path(key).name}",
                     "touch-reload": str(mount / Path(cert).name), "module": "app:application",
                     "chdir": str(tmp_path)}  # fmt: skip
    (tmp_path / "app.py").write_text(
        'def application(environ, start_response):\n    start_response("200 OK", [])\n    return [b"ok"]\n'
    )
    (tmp_path / "uwsgi.ini").write_text(render_ini(ini))
    bundle = cas.mount(tmp_path / "internal-ca", "old")
    both = tmp_path / "both.pem"
    both.write_bytes(cas.bundle("old", "new"))
    address = ("localhost", port, "127.0.0.1")
    log: IO[str]
    with (tmp_path / "uwsgi.log").open("w") as log:
        uwsgi = subprocess.Popen([openstack_venv.bin("uwsgi"), "--ini", str(tmp_path / "uwsgi.ini")], stdout=log,
                                 stderr=subprocess.STDOUT, env=openstack_venv.env())  # fmt: skip
        try:
            _serves(address, "https", pair, both)

            def switch(ca: pki.CA) -> None:
                time.sleep(1.1)  # uWSGI compares modification times in seconds
                renewed = pki.leaf(ca, ["localhost"])
                pki.write_secret(mount, renewed, f"v{time.monotonic_ns()}")
                _serves(address, "https", renewed, both)

            target = {"url": f"https://localhost:{port}/", "ca_file": str(bundle)}
            with _client(openstack_venv, "keystoneauth", target, tmp_path / "client.log") as client:
                _judge(_phases(client, cas, bundle, switch), "CERTIFICATE_VERIFY_FAILED")
        finally:
            uwsgi.terminate()
            uwsgi.wait(15)


def test_pymysql_reads_the_bundle_per_connection_through_every_phase(
    openstack_venv: OpenStackVenv, tmp_path: Path
) -> None:
    """MariaDB with the options mariadb-operator writes (the lab stand-in's), the plan's oslo.db URL; the server
    takes a new pair with FLUSH SSL, as a restarted pod would load it."""
    plan, cas = _plan("trust"), Cas()
    spec = plan.by_name("mariadb", "MariaDB").inputs["spec"]
    names = plan.by_name("mariadb-internal-tls", "Certificate").inputs["spec"]["dnsNames"]
    server_pki, server_ca = tmp_path / "pki", tmp_path / "pki-ca"
    server_pki.mkdir()
    server_ca.mkdir()
    pair = pki.leaf(cas.old, names)
    (server_pki / "server.crt").write_bytes(pair["tls.crt"])
    (server_pki / "server.key").write_bytes(pair["tls.key"])
    (server_ca / "ca.crt").write_bytes(cas.bundle("old", "new"))  # the server verifies no client certificate here
    conf = mariadb_tls_conf(mariadb_tls(spec)).replace(MARIADB_TLS_DIR + "/", f"{server_pki}/")
    conf = conf.replace(MARIADB_CA_DIR + "/", f"{server_ca}/")
    bundle = cas.mount(tmp_path / "internal-ca", "old")
    (tmp_path / "db").mkdir()
    with run_mariadb(tmp_path / "db", my_cnf=conf, client_args=("--ssl",)) as server:
        address = ("localhost", server.port, "127.0.0.1")

        def sql(statement: str) -> None:  # as root on the server's socket (the operator's own access)
            done = subprocess.run(["mariadb", "--no-defaults", f"--socket={server.unix_socket}", "-e", statement],
                                  capture_output=True, text=True, timeout=30)  # fmt: skip
            assert done.returncode == 0, done.stderr

        sql("CREATE DATABASE keystone")  # what the URL names (keystone-db-init's)

        def switch(ca: pki.CA) -> None:
            renewed = pki.leaf(ca, names)
            (server_pki / "server.crt").write_bytes(renewed["tls.crt"])
            (server_pki / "server.key").write_bytes(renewed["tls.key"])
            sql("FLUSH SSL")
            _serves(address, "mysql", renewed, server_ca / "ca.crt")

        url = _pointed_at(_keystone_url(plan), server, "localhost", bundle)
        with _client(openstack_venv, "pymysql", {"url": url}, tmp_path / "client.log") as client:
            _judge(_phases(client, cas, bundle, switch), "CERTIFICATE_VERIFY_FAILED")


def test_py_amqp_reads_the_bundle_per_connection_through_every_phase(
    openstack_venv: OpenStackVenv, tmp_path: Path
) -> None:
    """RabbitMQ's TLS listener as the operator writes it from spec.tls, its certificate a mounted Secret that
    Erlang's PEM cache reads again (checked every second here, every two minutes by default)."""
    plan, cas = _plan("trust"), Cas()
    names = plan.by_name("rabbitmq-internal-tls", "Certificate").inputs["spec"]["dnsNames"]
    mount, tls_port = tmp_path / "rabbitmq-internal-tls", free_port()
    pair = pki.leaf(cas.old, names)
    pki.write_secret(mount, pair, "v0")
    both = tmp_path / "both.pem"
    both.write_bytes(cas.bundle("old", "new"))
    conf = (
        f"listeners.ssl.1 = 127.0.0.1:{tls_port}\nssl_options.certfile = {mount}/tls.crt\n"
        f"ssl_options.keyfile = {mount}/tls.key\nssl_options.cacertfile = {both}\nssl_options.verify = verify_peer\n"
    )
    bundle = cas.mount(tmp_path / "internal-ca", "old")
    (tmp_path / "rabbitmq").mkdir()
    with run_rabbitmq(tmp_path / "rabbitmq", extra_conf=conf, erl_args="-ssl ssl_pem_cache_clean 1000") as server:
        address = (names[0], tls_port, "127.0.0.1")

        def switch(ca: pki.CA) -> None:
            renewed = pki.leaf(ca, names)
            pki.write_secret(mount, renewed, f"v{time.monotonic_ns()}")
            _serves(address, "amqps", renewed, both)

        url = f"amqp://{server.user}:{server.password}@127.0.0.1:{tls_port}//"
        with _client(openstack_venv, "amqp", {"url": url, "ca_file": str(bundle)}, tmp_path / "client.log") as client:
            _judge(_phases(client, cas, bundle, switch), "CERTIFICATE_VERIFY_FAILED")


def _memcached_client(venv: OpenStackVenv, resolve: str, kind: str, config: Path, host: str, log: Path) -> Rounds:
    """One of the plan's memcached clients (memcached_clients.py): each round, new connections to `host` with
    the TLS contexts it made when it started."""
    return Rounds(venv, [str(HERE / "memcached_clients.py"), resolve, kind, str(config), "rounds", host], log)


def test_memcacheds_clients_keep_the_cas_they_started_with_until_restarted(
    openstack_venv: OpenStackVenv, tmp_path: Path
) -> None:
    plan = _plan("trust")
    files = {secret: plan.by_name(secret, "Secret").revealed["stringData"] for secret in
             ("keystone-etc", "nova-etc", "horizon-etc")}  # fmt: skip
    clients = {
        "oslo.cache": files["keystone-etc"]["keystone.conf"],
        "keystonemiddleware": files["nova-etc"]["nova.conf"],
        "django": files["horizon-etc"]["local_settings.py"],
    }
    cas = Cas()
    with _start(plan, tmp_path) as memcached:
        # The fixture's server presents a certificate of its own CA: make it the old CA's, as issued before.
        pki.write_secret(memcached.mount, pki.leaf(cas.old, memcached.names), "old")
        assert _probe(plan, memcached).returncode == 0  # the readiness probe puts it into service (refresh_certs)
        started_with_both = cas.mount(tmp_path / "bundle-both", "old", "new")  # pods started after phase trust
        started_before = cas.mount(tmp_path / "bundle-before", "old")  # pods running since before it
        running = {}
        try:
            for kind, text in clients.items():
                for when, bundle in (("both", started_with_both), ("before", started_before)):
                    config = tmp_path / f"{kind}-{when}"
                    config.write_text(text.replace(CA_FILE, str(bundle)))
                    client = _memcached_client(openstack_venv, memcached.resolve(), kind, config,
                                               memcached.names[-1], tmp_path / f"{kind}-{when}.log")  # fmt: skip
                    running[(kind, when)] = client
                    assert client.first["read"] == "read back", (kind, when, client.first)
            # Phase trust reaches the running pods' files (the kubelet's sync); then phase issue renews memcached.
            cas.mount(tmp_path / "bundle-before", "old", "new")
            pki.write_secret(memcached.mount, pki.leaf(cas.new, memcached.names), "new")
            refreshed = _probe(plan, memcached)
            assert refreshed.returncode == 0 and "refresh_certs" in refreshed.stdout, refreshed
            for (kind, when), client in running.items():
                found = client.round()
                assert found["contexts"] >= 1, (kind, found)
                if when == "both":
                    assert found["failures"] == [None] * found["contexts"], (kind, found)
                else:  # the context made at start holds the old CA only, whatever the file says now
                    assert all(f and "certificate verify failed" in f for f in found["failures"]), (kind, found)
            # Restarted (the roll the program's annotation makes), each reads the file again and gets through.
            for kind in clients:
                config = tmp_path / f"{kind}-before"
                again = _memcached_client(openstack_venv, memcached.resolve(), kind, config, memcached.names[-1],
                                          tmp_path / f"{kind}-restarted.log")  # fmt: skip
                running[(kind, "restarted")] = again
                assert again.first["read"] == "read back" and not again.first["handshake_failures"], again.first
        finally:
            for client in running.values():
                client.close()


def _https_backend(pair: dict[str, bytes], directory: Path) -> ThreadingHTTPServer:
    """A backend that answers 200 over TLS with `pair`, as an API's uWSGI does."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"ok")

        def log_message(self, format: str, *args: Any) -> None:
            pass

    directory.mkdir()
    (directory / "tls.crt").write_bytes(pair["tls.crt"])
    (directory / "tls.key").write_bytes(pair["tls.key"])
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(directory / "tls.crt", directory / "tls.key")
    server.socket = context.wrap_socket(server.socket, server_side=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def _status(port: int, path: str) -> int | None:
    try:
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        connection.request("GET", path, headers={"Connection": "close"})
        return connection.getresponse().status
    except OSError:
        return None  # refused or cut: what a reload must not do


def test_the_labs_gateway_takes_a_new_bundle_by_a_soft_reload_with_no_call_refused(tmp_path: Path) -> None:
    """The lab's gateway stand-in (tests/lab/cloud/gateway.py soft_reload) when a BackendTLSPolicy's bundle gains the
    new CA: a backend presenting the new CA's certificate is refused (503) before and served after, while calls
    to one presenting the old CA's go on through the reload without one refused."""
    cas, name = Cas(), "keystone-api.openstack.svc.cluster.local"
    old = _https_backend(pki.leaf(cas.old, [name]), tmp_path / "old")
    new = _https_backend(pki.leaf(cas.new, [name]), tmp_path / "new")
    ca_file, admin, port = tmp_path / "backend-ca.pem", tmp_path / "admin.sock", free_port()
    ca_file.write_bytes(cas.bundle("old"))
    server = f"ssl verify required ca-file {ca_file} sni str({name}) verifyhost {name}"
    config = tmp_path / "haproxy.cfg"
    config.write_text(
        f"global\n    stats socket {admin} level admin\ndefaults\n    mode http\n    timeout connect 5s\n"
        "    timeout client 30s\n    timeout server 30s\n"
        f"frontend public\n    bind 127.0.0.1:{port}\n    use_backend new if {{ path_beg /new }}\n"
        "    default_backend old\n"
        f"backend old\n    server old 127.0.0.1:{old.server_address[1]} {server}\n"
        f"backend new\n    server new 127.0.0.1:{new.server_address[1]} {server}\n"
    )
    statuses: list[int | None] = []
    stop = threading.Event()

    def calls() -> None:
        while not stop.is_set():
            statuses.append(_status(port, "/old"))
            time.sleep(0.02)

    with running_haproxy(config, port) as first, (tmp_path / "haproxy.log").open("wb") as log:
        assert _status(port, "/new") == 503  # the new CA is not in the bundle yet
        loop = threading.Thread(target=calls)
        loop.start()
        time.sleep(0.5)
        ca_file.write_bytes(cas.bundle("old", "new"))  # phase trust: the bundle holds both
        second = soft_reload(config, admin, first, log)
        try:
            time.sleep(0.5)
            stop.set()
            loop.join()
            assert _status(port, "/new") == 200
            assert len(statuses) > 20 and statuses.count(200) == len(statuses), statuses
            first.wait(timeout=10)  # the retired process leaves once its connections are done
        finally:
            second.terminate()
            second.wait(timeout=10)
    old.shutdown()
    new.shutdown()
