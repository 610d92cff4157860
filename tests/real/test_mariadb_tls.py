"""MariaDB on internal TLS, with real software: Debian's mariadbd with the TLS options the lab's stand-in
derives from the plan's spec.tls (those mariadb-operator writes), serving a certificate of exactly the
names the plan's Certificate `mariadb-internal-tls` asks for; the plan's own oslo.db URL through the
release's SQLAlchemy and PyMySQL, and the plan's db_init.py.

What it shows: the URL's `ssl_ca` alone makes the client verify the chain and the host name (a
certificate of another CA, or an address the certificate does not name, is refused); a URL without it
is refused by the server; db_init.py connects verifying and makes the service's user require TLS; the lab's
packet capture classes the verifying clients' connections TLS and the plain one's plain text.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import pytest

from components.mechanism.inifile import parse_ini
from tests.lab.cloud.capture import Capture, connections, summarize
from tests.lab.cloud.standins import MARIADB_CA_DIR, MARIADB_TLS_DIR, mariadb_tls, mariadb_tls_conf
from tests.lab.realenv.openstack_venv import OpenStackVenv
from tests.lab.realenv.servers import MariaDB, run_mariadb
from tests.real.pki import leaf, make_ca, pem
from tests.test_mariadb_tls import plain_plan, tls_plan

pytestmark = pytest.mark.real

REPO = Path(__file__).resolve().parents[2]
# Connects through SQLAlchemy as oslo.db does, and says which TLS version the session uses.
CLIENT = """import sys, sqlalchemy
engine = sqlalchemy.create_engine(sys.argv[1])
with engine.connect() as db:
    print(db.execute(sqlalchemy.text(sys.argv[2])).fetchall())
"""


def _keystone_url(plan: object) -> str:
    files = plan.by_name("keystone-etc", "Secret").revealed["stringData"]  # type: ignore[attr-defined]
    return str(parse_ini(files["keystone.conf"])["database"]["connection"])


def _pointed_at(url: str, server: MariaDB, host: str, ca_file: Path) -> str:
    """The plan's URL as root, to `host` and the test server's port, with the test's CA file."""
    parts = urlsplit(url)
    query = parts.query.replace("/etc/openstack-ca/ca.crt", str(ca_file))
    netloc = f"{server.user}:{server.password}@{host}:{server.port}"
    return urlunsplit((parts.scheme, netloc, parts.path, query, ""))


def _query(venv: OpenStackVenv, url: str, sql: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([venv.python, "-c", CLIENT, url, sql], capture_output=True, text=True, timeout=60)


def test_the_plans_urls_verify_the_server_and_a_plain_one_is_refused(
    tmp_path: Path, openstack_venv: OpenStackVenv
) -> None:
    plan = tls_plan("dev")
    spec = plan.by_name("mariadb", "MariaDB").inputs["spec"]
    names = plan.by_name("mariadb-internal-tls", "Certificate").inputs["spec"]["dnsNames"]
    ca, other_ca = make_ca("internal-ca"), make_ca("someone else's CA")
    pki, pki_ca = tmp_path / "pki", tmp_path / "pki-ca"
    pki.mkdir()
    pki_ca.mkdir()
    pair = leaf(ca, names)
    cert, key = pair["tls.crt"], pair["tls.key"]
    (pki / "server.crt").write_bytes(cert), (pki / "server.key").write_bytes(key)
    (pki_ca / "ca.crt").write_bytes(pem(ca[0]))
    (tmp_path / "other-ca.crt").write_bytes(pem(other_ca[0]))
    # The stand-in's options, its container paths moved into the test's directory.
    conf = mariadb_tls_conf(mariadb_tls(spec)).replace(MARIADB_TLS_DIR + "/", f"{pki}/")
    conf = conf.replace(MARIADB_CA_DIR + "/", f"{pki_ca}/")
    assert "require_secure_transport = true" in conf
    (tmp_path / "db").mkdir()
    with run_mariadb(tmp_path / "db", my_cnf=conf, client_args=("--ssl",)) as server:
        url, plain_url = _keystone_url(plan), _keystone_url(plain_plan("dev"))
        # db_init.py as the plan's db-init Job runs it (DB_CA_FILE set); it makes the database the URL names.
        env = openstack_venv.env(
            dict(
                os.environ,
                DB_ADDRESS=f"localhost:{server.port}",
                DB_ADMIN_USER=str(server.user),
                DB_ADMIN_PASSWORD=str(server.password),
                DB_NAMES="keystone",
                DB_USER="keystone",
                DB_PASSWORD="secret",
                DB_CA_FILE=str(pki_ca / "ca.crt"),
            )
        )
        script = REPO / "components" / "scripts" / "db_init.py"
        done = subprocess.run([openstack_venv.python, script], env=env, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr[-2000:]
        # What crosses the wire, as the lab's `tls.encrypted` sees it (tests/lab/cloud/capture.py).
        with Capture(tmp_path / "pcap", [None], [server.port]) as capture:
            good = _query(openstack_venv, _pointed_at(url, server, "localhost", pki_ca / "ca.crt"),
                          "SHOW SESSION STATUS LIKE 'Ssl_version'")  # fmt: skip
            assert good.returncode == 0, good.stderr[-2000:]
            assert "TLSv1.3" in good.stdout

            # An address the certificate does not name: PyMySQL checks the host name.
            by_address = _query(openstack_venv, _pointed_at(url, server, "127.0.0.1", pki_ca / "ca.crt"), "SELECT 1")
            assert by_address.returncode != 0 and "CERTIFICATE_VERIFY_FAILED" in by_address.stderr
            assert "127.0.0.1" in by_address.stderr  # the mismatch, not another failure
            # Another CA's trust: the chain is checked.
            foreign = _query(
                openstack_venv, _pointed_at(url, server, "localhost", tmp_path / "other-ca.crt"), "SELECT 1"
            )
            assert foreign.returncode != 0 and "CERTIFICATE_VERIFY_FAILED" in foreign.stderr
            # The plain-text plan's URL, with the credentials that work over TLS above: refused. (Debian's
            # MariaDB 10.11 answers a plain login under require_secure_transport with error 1045.)
            plain = _query(openstack_venv, _pointed_at(plain_url, server, "localhost", pki_ca / "ca.crt"), "SELECT 1")
            assert plain.returncode != 0 and ("1045" in plain.stderr or "insecure transport" in plain.stderr)
        # The three clients that verify start TLS after MariaDB's SSL request (two then refuse the server's
        # certificate); the plain-text URL's client logs in in clear, its user name readable.
        wire = summarize(connections(capture.pcaps, capture.ports), {"mariadb": [server.port]})["mariadb"]
        assert (wire["tls"], wire["plain"]) == (3, 1), wire
        assert str(server.user) in wire["plain_starts"][0]

        # The service's user must use TLS.
        grants = _query(openstack_venv, _pointed_at(url, server, "localhost", pki_ca / "ca.crt"),
                        "SHOW CREATE USER keystone@'%'")  # fmt: skip
        assert grants.returncode == 0 and "REQUIRE SSL" in grants.stdout, grants.stdout + grants.stderr
