"""TLS inside the cluster, as the lab proves it and as its clients inside the cluster trust it, without the lab:
which endpoints are tried, how the probe's facts are judged, and the internal CA handed to the lab's clients
(the user scenario's OS_CACERT, tempest.conf's ca_certificates_file)."""

from __future__ import annotations

import copy
import json
import shutil
import subprocess
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from components.mechanism import internal_tls
from components.mechanism.inifile import parse_ini
from tests.cloud.test_tempest import ADMIN, FACTS
from tests.conftest import plan_of
from tests.lab.cloud import endpoint_tls
from tests.lab.cloud.report import _encrypted_line
from tests.lab.cloud.run import admin_env
from tests.lab.cloud.tempest_conf import tempest_conf

CA_PEM = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"
GOOD_TLS = {"ok": True, "version": "TLSv1.3", "cipher": "TLS_AES_256_GCM_SHA384", "subject": "",
            "dns_names": ["keystone-api"], "not_after": "Feb  1 00:00:00 2027 GMT"}  # fmt: skip
REFUSED = {"refused": True, "error": "self-signed certificate in certificate chain"}


def _fact(protocol: str = "https", **attempts: Any) -> dict[str, Any]:
    plain = {"mysql": {"answer": "error", "code": 1045}}.get(protocol, {"answered": False, "first_bytes": "15030300"})
    verified = {**GOOD_TLS, "login": {"answer": "ok"}} if protocol == "mysql" else GOOD_TLS
    return {"name": "x", "host": "x.openstack.svc.cluster.local", "port": 1, "protocol": protocol,
            "verified": verified, "system_trust": REFUSED, "plain": plain, **attempts}  # fmt: skip


def test_the_endpoints_are_every_api_service_amqps_and_mariadbs_client_port_by_their_cluster_names() -> None:
    found = {e["name"]: e for e in endpoint_tls.endpoints(plan_of("staging"))}
    assert set(found) == {
        "keystone-api:5000", "glance-api:9292", "placement-api:8778", "nova-api:8774", "nova-metadata:8775",
        "neutron-server:9696", "cinder-api:8776", "horizon:8080", "nova-novncproxy:6080", "rabbitmq:5671",
        "mariadb:3306", "memcached-0:11211",
    }  # fmt: skip
    # Each is probed from where its NetworkPolicy admits clients: Horizon and the console proxy only from
    # the gateway's proxy, memcached only from its clients' pods, the rest from the user's pod.
    places = {name: e["from"] for name, e in found.items()}
    assert places.pop("horizon:8080") == "gateway" and places.pop("nova-novncproxy:6080") == "gateway"
    assert places.pop("memcached-0:11211") == "memcached-client"
    assert set(places.values()) == {"user-pod"}
    # memcached's clients hash keys over the pods by their own names: each is probed by that name.
    assert found["memcached-0:11211"]["host"] == "memcached-0.memcached.openstack.svc.cluster.local"
    assert found["memcached-0:11211"]["protocol"] == "memcached"
    assert found["nova-metadata:8775"] == {"name": "nova-metadata:8775", "port": 8775, "protocol": "https",
                                           "host": "nova-metadata.openstack.svc.cluster.local",
                                           "from": "user-pod"}  # fmt: skip
    assert found["rabbitmq:5671"]["protocol"] == "amqps" and found["mariadb:3306"]["protocol"] == "mysql"
    # Under ha the clients' database Service is the primary's.
    ha = {e["name"] for e in endpoint_tls.endpoints(plan_of("staging", ha=True))}
    assert "mariadb-primary:3306" in ha and "mariadb:3306" not in ha


def test_an_endpoint_is_encrypted_only_when_all_three_attempts_say_so() -> None:
    for protocol in ("https", "amqps", "mysql", "memcached"):
        judged = endpoint_tls.classify(_fact(protocol))
        assert judged["ok"] and judged["failed"] == [] and judged["version"] == "TLSv1.3", judged
    no_handshake = endpoint_tls.classify(_fact(verified={"ok": False, "error": "SSLCertVerificationError: ..."}))
    assert not no_handshake["ok"] and "no TLS handshake verifying the internal CA" in no_handshake["failed"][0]
    trusted_anyway = endpoint_tls.classify(_fact(system_trust={"refused": False, "error": ""}))
    assert not trusted_anyway["ok"]
    assert "was not refused on the certificate: it was accepted" in trusted_anyway["failed"][0]
    # A connection that fails for another reason says nothing about the certificate.
    unreachable = endpoint_tls.classify(_fact(system_trust={"refused": False, "error": "ConnectionRefusedError"}))
    assert not unreachable["ok"]
    plain_http = endpoint_tls.classify(_fact(plain={"answered": True, "first_bytes": "485454502f312e31"}))
    assert not plain_http["ok"] and plain_http["failed"] == ["plain text answered in http (485454502f312e31)"]
    plain_amqp = endpoint_tls.classify(_fact("amqps", plain={"answered": True, "first_bytes": "01"}))
    assert not plain_amqp["ok"]


def test_mariadb_counts_as_encrypted_when_the_plain_login_fails_where_the_same_login_over_tls_succeeds() -> None:
    plain_login = endpoint_tls.classify(_fact("mysql", plain={"answer": "ok"}))
    assert not plain_login["ok"] and plain_login["failed"] == ["a plain-text login was ok"]
    # Refused in plain text and over TLS too (wrong credentials): the refusal proves nothing.
    mysql = _fact("mysql")
    mysql["verified"] = {**GOOD_TLS, "login": {"answer": "error", "code": 1045}}
    judged = endpoint_tls.classify(mysql)
    assert not judged["ok"] and "the refusal proves nothing" in judged["failed"][0]


def test_the_verdict_needs_every_endpoint_and_lists_what_stays_in_plain_text() -> None:
    plan = plan_of("staging")
    names = [e["name"] for e in endpoint_tls.endpoints(plan)]
    facts = {name: {**_fact(), "name": name} for name in names}
    facts["mariadb:3306"] = {**_fact("mysql"), "name": "mariadb:3306"}
    assert endpoint_tls.verdict(plan, facts)["encrypted_ok"] is True
    missing = endpoint_tls.verdict(plan, {k: v for k, v in facts.items() if k != "rabbitmq:5671"})
    assert missing["encrypted_ok"] is False and missing["endpoints"]["rabbitmq:5671"]["failed"] == ["not probed"]
    plain = copy.deepcopy(facts)
    plain["glance-api:9292"]["plain"] = {"answered": True, "first_bytes": "48"}
    assert endpoint_tls.verdict(plan, plain)["encrypted_ok"] is False


def test_what_stays_in_clear_is_the_gateways_plain_backends_and_erlang_distribution() -> None:
    """The gateway's plain backends come from the plan's own rule (no BackendTLSPolicy: front_door.py):
    none is left; memcached, MariaDB, RabbitMQ, Horizon and the console proxy are on internal TLS and
    are not named."""
    settings = plan_of("staging").settings
    not_encrypted = endpoint_tls.not_encrypted(settings)
    assert set(not_encrypted) == {"rabbitmq-nodes"}
    assert "25672" in not_encrypted["rabbitmq-nodes"]
    policies = {r.k8s_name for r in plan_of("staging").custom if r.kind == "BackendTLSPolicy"}
    assert {"keystone-api-backend-tls", "horizon-backend-tls", "nova-novncproxy-backend-tls"} <= policies


def _cloud(stack: str, objects: dict[tuple[str, str], dict[str, str]]) -> Any:
    return SimpleNamespace(plan=plan_of(stack), objects=objects, lab_volumes=[])


def test_a_plain_text_stack_says_there_is_nothing_to_check() -> None:
    found = endpoint_tls.check(_cloud("prod", {}), {"": lambda *a, **k: None}, Path("/py"), None)  # type: ignore[dict-item, arg-type]
    assert "plainText" in found["not_run"] and "encrypted_ok" not in found


def test_the_lab_writes_the_bundles_ca_for_its_clients_and_points_the_admins_os_cacert_at_it(tmp_path: Path) -> None:
    objects = {("Secret", internal_tls.CA_BUNDLE): {"ca.crt": CA_PEM, "tls.key": "k"}, ("Secret", "keystone-admin"):
               {"password": "pw"}}  # fmt: skip
    cloud = _cloud("staging", objects)
    written = endpoint_tls.write_internal_ca(cloud, tmp_path / "user")
    assert written == tmp_path / "user" / "internal-ca" / "ca.crt" and written.read_text() == CA_PEM
    # A volume of the user's pod: the kubelet's sync writes the bundle again when it changes (a CA rotation).
    [volume] = cloud.lab_volumes
    volume.write({"ca.crt": CA_PEM + CA_PEM, "tls.key": "k"})
    assert written.read_text() == CA_PEM + CA_PEM and [p.name for p in written.parent.iterdir()] == ["ca.crt"]
    admin = admin_env(cloud, written)
    assert admin["OS_CACERT"] == str(written)  # the pods' /etc/openstack-ca/ca.crt, as a lab file
    assert admin["OS_AUTH_URL"].startswith("https://keystone-api.openstack.svc")
    with pytest.raises(LookupError, match="OS_CACERT names the internal CA's file"):
        admin_env(cloud)
    with pytest.raises(endpoint_tls.InternalCaMissingError):
        endpoint_tls.write_internal_ca(_cloud("staging", {}), tmp_path)
    assert endpoint_tls.write_internal_ca(_cloud("prod", {}), tmp_path / "prod") is None  # plainText: nothing to trust
    assert "OS_CACERT" not in admin_env(_cloud("prod", {("Secret", "keystone-admin"): {"password": "pw"}}))


def test_tempest_verifies_the_internal_endpoints_with_the_admins_ca_file() -> None:
    admin = {**ADMIN, "OS_AUTH_URL": "https://keystone-api.openstack.svc.cluster.local:5000/v3",
             "OS_CACERT": "/var/tmp/cloud-staging/user/internal-ca.crt"}  # fmt: skip
    identity = parse_ini(tempest_conf(plan_of("staging"), admin, FACTS, {}, Path("/work")).text)["identity"]
    assert identity["ca_certificates_file"] == "/var/tmp/cloud-staging/user/internal-ca.crt"
    assert identity["disable_ssl_certificate_validation"] == "false"
    plain = parse_ini(tempest_conf(plan_of("prod"), ADMIN, FACTS, {}, Path("/work")).text)["identity"]
    assert "ca_certificates_file" not in plain


def test_the_summary_line_says_what_was_captured_which_endpoints_passed_and_what_stays_in_plain_text() -> None:
    tls = {"encrypted_ok": False, "encrypted": {"mariadb": True, "rabbitmq": False, "cinder-api": None},
           "endpoints": {"endpoints": {"keystone-api:5000": {"ok": True}, "rabbitmq:5671": {"ok": False}}},
           "not_encrypted": {"horizon": "no BackendTLSPolicy"}}  # fmt: skip
    line = _encrypted_line(tls)
    assert line.startswith("ok False, captured: 1/2 seen encrypted"), line
    assert "1/2 endpoints, failed ['rabbitmq:5671']" in line and "plain text: ['horizon']" in line
    plain = _encrypted_line({"encrypted": {"mariadb": False}, "endpoints": {"not_run": "plainText"}})
    assert plain.startswith("captured: 0/1 seen encrypted") and "endpoints not probed (plainText)" in plain


def test_the_probe_runs_as_the_pods_run_commands_with_the_credentials_in_their_environment(tmp_path: Path) -> None:
    plan = plan_of("staging")
    wanted = endpoint_tls.endpoints(plan)
    seen: dict[str, list[dict[str, Any]]] = {"user-pod": [], "memcached-client": [], "gateway": []}

    def place(name: str) -> Any:
        def run(argv: list[str], **kwargs: Any) -> subprocess.CompletedProcess[str]:
            seen[name].append({**kwargs, "argv": argv})
            # The pods' commands start `ip netns exec ... unshare ...`: subprocess finds them through the given PATH.
            assert all(shutil.which(tool, path=kwargs["env"]["PATH"]) for tool in ("ip", "unshare"))
            asked = json.loads(argv[4])
            facts = {e["name"]: {**_fact(e["protocol"]), **e} for e in asked}
            return subprocess.CompletedProcess(argv, 0, stdout="log line\n" + json.dumps(facts) + "\n")

        return run

    objects = {("Secret", "mariadb-root"): {"password": "root-pw"}}
    cloud = SimpleNamespace(plan=plan, objects=objects, out=tmp_path)
    runs = {name: place(name) for name in seen}
    found = endpoint_tls.check(cloud, runs, Path("/venv/bin/python"), tmp_path / "internal-ca.crt")  # type: ignore[arg-type]
    assert found["encrypted_ok"] is True, found
    assert set(found["endpoints"]) == {e["name"] for e in wanted}
    # One probe from each place, each with its own endpoints.
    (user,), (client,), (gateway,) = seen["user-pod"], seen["memcached-client"], seen["gateway"]
    probe = ["/venv/bin/python", "-m", "tests.lab.cloud.tls_probe", str(tmp_path / "internal-ca.crt")]
    assert user["argv"][:4] == probe
    assert json.loads(user["argv"][4]) == [e for e in wanted if e["from"] == "user-pod"]
    assert json.loads(client["argv"][4]) == [e for e in wanted if e["protocol"] == "memcached"]
    assert [e["name"] for e in json.loads(gateway["argv"][4])] == ["horizon:8080", "nova-novncproxy:6080"]
    assert user["env"]["MYSQL_USER"] == "root" and user["env"]["MYSQL_PASSWORD"] == "root-pw"
    assert "root-pw" not in " ".join(user["argv"])  # a password on a command line is every process's to read
    failing = {name: lambda argv, **kw: subprocess.CompletedProcess(argv, 1, stdout="") for name in seen}
    broken = endpoint_tls.check(cloud, failing, Path("/venv/bin/python"), tmp_path / "internal-ca.crt")  # type: ignore[arg-type]
    assert broken["encrypted_ok"] is False and "without facts" in broken["error"]


def test_an_endpoint_with_nowhere_to_probe_it_from_is_an_error_not_a_pass(tmp_path: Path) -> None:
    # A stack without the gateway's proxy cannot have Horizon or the console proxy probed: the verdict
    # says so rather than skip them.
    cloud = SimpleNamespace(
        plan=plan_of("staging"), objects={("Secret", "mariadb-root"): {"password": "pw"}}, out=tmp_path
    )
    never = {"user-pod": lambda argv, **kw: pytest.fail("not reached"), "memcached-client": lambda argv, **kw: None}
    found = endpoint_tls.check(cloud, never, Path("/venv/bin/python"), tmp_path / "ca.crt")  # type: ignore[arg-type]
    assert found["encrypted_ok"] is False
    assert "nowhere to probe ['horizon:8080', 'nova-novncproxy:6080'] from: the lab has no gateway" in found["error"]


def test_memcached_is_probed_from_a_pod_its_network_policy_admits_whatever_the_policy_says(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The probe's place for memcached comes from memcached's own NetworkPolicy
    (components/infrastructure/isolation.py), not a workload named in the lab: the cloud's pods by their labels,
    any pod where it admits every source."""
    settings = plan_of("staging").settings
    assert endpoint_tls.memcached_clients(settings) == {"app.kubernetes.io/part-of": "openstack"}
    rules: dict[str, Any] = {"memcached": {"ingress": [{"ports": [{"port": 11211}]}]}}
    monkeypatch.setattr(endpoint_tls.isolation, "policies", lambda s: rules)
    assert endpoint_tls.memcached_clients(settings) == {}  # every source: any pod will do
    rules["memcached"]["ingress"][0]["from"] = [{"ipBlock": {"cidr": "10.0.0.0/8"}}]
    with pytest.raises(LookupError, match="admits no pods by their labels"):
        endpoint_tls.memcached_clients(settings)
