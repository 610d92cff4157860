"""Proves the machinery the real-software tests stand on, before anyone relies on it."""

import json
import os
import socket
import subprocess
import time
import urllib.request
from base64 import b64encode
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from components.settings.releases import RELEASES
from tests.lab.realenv.namespaces import NAMESPACES, UNLOADABLE, dynamic_sections, namespaces_for, not_oslo_reason
from tests.lab.realenv.openstack_venv import OpenStackVenv
from tests.lab.realenv.servers import MariaDB, MissingServerBinaryError, RabbitMQ, Server, free_port, require_binary
from tests.lab.realenv.validator import VALUES_SCRIPT, config_check, parse_validator_output, validate, validate_all
from tools.release_pins import RELEASES as VENV_PINS

FIXTURES = Path(__file__).parent / "fixtures"


def run_in_venv(venv: OpenStackVenv, code: str, *args: str, **env: str) -> str:
    done = subprocess.run([venv.python, "-c", code, *args], capture_output=True, text=True, env=venv.env() | env)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


@pytest.mark.parametrize("release", RELEASES)
def test_venv_holds_the_pinned_release(release: str, venv_of: Callable[[str], OpenStackVenv]) -> None:
    pinned = VENV_PINS[release].pinned
    versions = run_in_venv(
        venv_of(release),
        "import json, sys, importlib.metadata as m; print(json.dumps({n: m.version(n) for n in sys.argv[1:]}))",
        *pinned,
    )
    assert json.loads(versions) == pinned


def test_venv_uwsgi_serves_an_app(openstack_venv: OpenStackVenv, tmp_path: Path) -> None:
    # uWSGI is compiled at venv build time; prove the result runs and serves.
    (tmp_path / "app.py").write_text(
        "def application(environ, start_response):\n"
        "    start_response('200 OK', [('Content-Type', 'text/plain')])\n"
        "    return [b'served']\n"
    )
    port = free_port()
    args = ["--http-socket", f"127.0.0.1:{port}", "--chdir", str(tmp_path), "--module", "app:application"]
    uwsgi = subprocess.Popen(
        [openstack_venv.bin("uwsgi"), "--master", "--die-on-term", *args],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        for _ in range(100):
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=2) as response:
                    assert response.read() == b"served"
                    break
            except OSError:
                time.sleep(0.1)
        else:
            pytest.fail("uwsgi did not answer within 10s")
    finally:
        uwsgi.terminate()
        uwsgi.wait(10)


def test_missing_server_binary_names_the_package() -> None:
    with pytest.raises(MissingServerBinaryError, match="install the Debian package 'no-such-package'"):
        require_binary("no-such-server", "no-such-package")


# Captured from oslo-config-validator 10.3.0 (stderr; it exits 1 on an unknown option).
VALIDATOR_STDERR = """\
INFO:oslo_service.backend:Loading backend: eventlet
ERROR:root:DEFAULT/no_such_option is not part of the sample config
WARNING:root:Deprecated opt DEFAULT/logdir found
INFO:root:Ignoring missing option "pasword" from group "keystone_authtoken" because \
the group is known to have incomplete sample config data and thus cannot be validated properly.
"""


def test_validator_output_parser() -> None:
    parsed = parse_validator_output(1, VALIDATOR_STDERR)
    assert parsed.unknown == [("DEFAULT", "no_such_option")]
    assert parsed.deprecated == [("DEFAULT", "logdir")]
    assert parsed.ignored == [("keystone_authtoken", "pasword")]
    assert parse_validator_output(0, "").unknown == []
    with pytest.raises(RuntimeError, match="failed"):
        parse_validator_output(1, "Traceback (most recent call last):\nFileNotFoundError: x.conf")


def test_validator_accepts_a_good_file(openstack_venv: OpenStackVenv) -> None:
    for name in ("keystone.conf", "placement.conf"):
        result = validate(openstack_venv, FIXTURES / "good" / name)
        assert result.ok, result.summary()
        assert result.deprecated == []
        assert result.checked == sum(1 for line in (FIXTURES / "good" / name).read_text().splitlines() if "=" in line)


def test_validator_flags_unknown_deprecated_and_mistyped(openstack_venv: OpenStackVenv) -> None:
    result = validate(openstack_venv, FIXTURES / "bad" / "keystone.conf")
    assert not result.ok
    assert result.unknown == [("DEFAULT", "no_such_option")]
    assert result.deprecated == [("DEFAULT", "logdir")]
    assert [(section, name) for section, name, _ in result.invalid] == [("token", "expiration")]
    assert "one hour" in result.invalid[0][2]
    assert result.checked == 6


def test_validator_checks_auth_plugin_options(openstack_venv: OpenStackVenv) -> None:
    # oslo-config-validator alone accepts anything in [keystone_authtoken].
    result = validate(openstack_venv, FIXTURES / "bad" / "placement.conf")
    assert result.unknown == [("keystone_authtoken", "pasword")]


def test_dynamic_sections_come_from_enabled_backends() -> None:
    cinder = "[DEFAULT]\nenabled_backends = lvm, ceph\n[lvm]\nvolume_group = v\n"
    assert dynamic_sections("cinder.conf", cinder) == {"lvm": "backend_defaults", "ceph": "backend_defaults"}
    glance = "[DEFAULT]\nenabled_backends = fast:rbd, local:file\n"
    assert dynamic_sections("/etc/glance/glance-api.conf", glance) == {
        "os_glance_staging_store": "file",
        "os_glance_tasks_store": "file",
        "fast": "glance.store.rbd.Store",
        "local": "file",
    }
    assert dynamic_sections("nova.conf", "[DEFAULT]\nenabled_backends = x\n") == {}


def test_rendered_file_names_map_to_namespaces_or_a_reason() -> None:
    assert namespaces_for("/etc/nova/nova-kvm-general.conf") == NAMESPACES["nova.conf"]
    assert namespaces_for("neutron.conf", "2025.2") == (*NAMESPACES["neutron.conf"], "oslo.service.sslutils")
    assert namespaces_for("neutron-agent.conf", "2025.2") == namespaces_for("neutron.conf", "2025.2")
    assert not_oslo_reason("keystone-uwsgi.ini") is not None
    assert not_oslo_reason("nova.conf") is None
    with pytest.raises(KeyError, match="add it"):
        namespaces_for("octavia.conf")


def test_validator_checks_dynamic_sections_through_aliases(openstack_venv: OpenStackVenv, tmp_path: Path) -> None:
    conf = tmp_path / "cinder.conf"
    conf.write_text(
        "[DEFAULT]\nenabled_backends = lvm\n"
        "[lvm]\nvolume_driver = cinder.volume.drivers.lvm.LVMVolumeDriver\n"
        "volume_group = cinder-volumes\nvolume_backend_name = lvm\nno_such_backend_opt = 1\n"
    )
    result = validate(openstack_venv, conf)
    assert result.unknown == [("lvm", "no_such_backend_opt")]
    assert result.checked == 5


def test_validator_checks_glance_rbd_stores(openstack_venv: OpenStackVenv, tmp_path: Path) -> None:
    conf = tmp_path / "glance-api.conf"
    conf.write_text(
        "[DEFAULT]\nenabled_backends = rbd:rbd\n[glance_store]\ndefault_backend = rbd\n"
        "[rbd]\nrbd_store_pool = images\nrbd_store_user = glance\nrbd_store_ceph_conf = /etc/ceph/ceph.conf\n"
        "rbd_store_pol = typo\n"
    )
    result = validate(openstack_venv, conf)
    assert result.unknown == [("rbd", "rbd_store_pol")]


def test_validator_leaves_excluded_sections_alone(openstack_venv: OpenStackVenv) -> None:
    result = validate(openstack_venv, FIXTURES / "bad" / "keystone.conf", exclude_groups=["token"])
    assert result.invalid == []
    assert result.excluded == [("token", "provider"), ("token", "expiration")]


def test_validator_gives_each_file_of_a_batch_its_own_verdict(openstack_venv: OpenStackVenv) -> None:
    # One process checks every file of a namespace list: nothing of one file may leak into another's.
    good, bad = FIXTURES / "good" / "keystone.conf", FIXTURES / "bad" / "keystone.conf"
    checks = [
        config_check(openstack_venv, bad),
        config_check(openstack_venv, good),
        config_check(openstack_venv, FIXTURES / "bad" / "placement.conf"),
        config_check(openstack_venv, bad, exclude_groups=["token"]),
    ]
    flagged, clean, placement, excluded = validate_all(checks)
    assert flagged.path == bad and flagged.unknown == [("DEFAULT", "no_such_option")]
    assert [(section, name) for section, name, _ in flagged.invalid] == [("token", "expiration")]
    assert flagged.deprecated == [("DEFAULT", "logdir")]
    assert clean.path == good and clean.ok and clean.deprecated == [], clean.summary()
    assert placement.unknown == [("keystone_authtoken", "pasword")]
    assert excluded.invalid == [] and excluded.excluded == [("token", "provider"), ("token", "expiration")]
    assert excluded.unknown == [("DEFAULT", "no_such_option")]


def _unloadable(venv: OpenStackVenv, empty: Path, namespaces: tuple[str, ...]) -> dict[str, str]:
    args = [a for ns in namespaces for a in ("--namespace", ns)]
    done = subprocess.run(
        [venv.python, VALUES_SCRIPT, "--input-file", empty, *args],
        capture_output=True,
        text=True,
        env=venv.env(),
        check=True,
    )
    return json.loads(done.stdout)["unloadable"]


@pytest.mark.parametrize("release", RELEASES)
def test_namespace_table_loads_except_the_listed(
    release: str, venv_of: Callable[[str], OpenStackVenv], tmp_path: Path
) -> None:
    empty = tmp_path / "empty.conf"
    empty.write_text("[DEFAULT]\n")
    # One process per project: the projects register options in one global CONF at
    # import and clash when loaded together (nova's and glance's). Neutron's six
    # files share one process, since each one costs seconds of imports.
    per_project: dict[str, set[str]] = {}
    for name in NAMESPACES:
        namespaces = namespaces_for(name, release)
        project = "neutron" if any(ns.startswith("neutron") for ns in namespaces) else name
        per_project.setdefault(project, set()).update(namespaces)
    venv = venv_of(release)
    with ThreadPoolExecutor(max_workers=os.cpu_count()) as pool:
        found = pool.map(lambda ns: _unloadable(venv, empty, tuple(sorted(ns))), per_project.values())
        unloadable = {ns: why for result in found for ns, why in result.items()}
    assert unloadable.keys() == UNLOADABLE.keys(), unloadable


def test_mariadb_creates_database_user_and_grant(openstack_venv: OpenStackVenv, mariadb: MariaDB) -> None:
    # PyMySQL from the OpenStack venv: the client the services themselves use.
    code = """
import os, pymysql
def connect(user, password, db=None):
    return pymysql.connect(host=os.environ["DB_HOST"], port=int(os.environ["DB_PORT"]),
                           user=user, password=password, database=db, autocommit=True)
with connect("root", os.environ["DB_PASSWORD"]) as admin, admin.cursor() as cur:
    for _ in range(2):  # twice: the statements a db-init Job runs must be re-runnable
        cur.execute("CREATE DATABASE IF NOT EXISTS machinery")
        cur.execute("CREATE USER IF NOT EXISTS 'machinery'@'%' IDENTIFIED BY 'pw'")
        cur.execute("GRANT ALL PRIVILEGES ON machinery.* TO 'machinery'@'%'")
with connect("machinery", "pw", "machinery") as user, user.cursor() as cur:
    cur.execute("CREATE TABLE IF NOT EXISTS t (id INT PRIMARY KEY)")
    cur.execute("REPLACE INTO t VALUES (1)")
    cur.execute("SELECT COUNT(*) FROM t")
    print(cur.fetchone()[0])
"""
    out = run_in_venv(
        openstack_venv,
        code,
        DB_HOST=mariadb.host,
        DB_PORT=str(mariadb.port),
        DB_PASSWORD=mariadb.password or "",
    )
    assert out.strip() == "1"


def _management(rabbitmq: RabbitMQ, method: str, path: str, body: dict | None = None) -> int:
    token = b64encode(f"{rabbitmq.user}:{rabbitmq.password}".encode()).decode()
    request = urllib.request.Request(
        f"{rabbitmq.management_url}/api/{path}",
        method=method,
        data=None if body is None else json.dumps(body).encode(),
        headers={"Authorization": f"Basic {token}", "Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        return response.status


def test_rabbitmq_management_creates_vhost_and_user(openstack_venv: OpenStackVenv, rabbitmq: RabbitMQ) -> None:
    assert _management(rabbitmq, "GET", "overview") == 200
    assert _management(rabbitmq, "PUT", "vhosts/machinery") in (201, 204)
    assert _management(rabbitmq, "PUT", "users/machinery", {"password": "pw", "tags": ""}) in (201, 204)
    permissions = {"configure": ".*", "write": ".*", "read": ".*"}
    assert _management(rabbitmq, "PUT", "permissions/machinery/machinery", permissions) in (201, 204)
    # The new user logs in over AMQP with kombu, the library under oslo.messaging.
    url = rabbitmq.transport_url("machinery", "pw", "machinery").replace("rabbit://", "amqp://")
    out = run_in_venv(
        openstack_venv,
        "import kombu, sys; c = kombu.Connection(sys.argv[1]); c.connect(); print(c.connected); c.release()",
        url,
    )
    assert out.strip() == "True"


def test_memcached_sets_and_gets(memcached: Server) -> None:
    with socket.create_connection(memcached.address, timeout=5) as sock:
        sock.sendall(b"set machinery 0 60 5\r\nhello\r\n")
        assert sock.recv(64) == b"STORED\r\n"
        sock.sendall(b"get machinery\r\n")
        assert sock.recv(64) == b"VALUE machinery 0 5\r\nhello\r\nEND\r\n"
