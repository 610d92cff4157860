"""MariaDB on internal TLS: the MariaDB's spec.tls (against the operator's CRD), its certificates,
the database URLs every service renders, and the db-init Jobs. Read from what the plan registers."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import jsonschema
import pytest
import yaml

from components.mechanism.inifile import parse_ini
from tests.conftest import plan_of
from tests.helpers import containers, objects, pod_template, unknown_fields
from tests.test_front_door import _check_against_the_crd as _check_certificate
from tools.plan import Plan
from tools.runtime import Registration

CRD = Path(__file__).parent / "fixtures" / "mariadb-operator" / "k8s.mariadb.com_mariadbs.yaml"
PUBLIC = {"issuer": {"kind": "ClusterIssuer", "name": "letsencrypt"}}
CA_FILE = "/etc/openstack-ca/ca.crt"
WATCH = {"k8s.mariadb.com/watch": ""}
INTERNAL_ISSUER = {"group": "cert-manager.io", "kind": "Issuer", "name": "internal-ca"}


@cache
def tls_plan(stack: str = "prod") -> Plan:
    return plan_of(stack, tls={"public": PUBLIC, "internal": {"selfSigned": True}})


@cache
def plain_plan(stack: str = "prod") -> Plan:
    return plan_of(stack, tls={"public": PUBLIC, "internal": {"plainText": True}})


@cache
def _schema() -> dict[str, Any]:
    [crd] = [d for d in yaml.safe_load_all(CRD.read_text()) if d]
    [version] = [v for v in crd["spec"]["versions"] if v["name"] == "v1alpha1"]
    return version["schema"]["openAPIV3Schema"]


def _mariadb(plan: Plan) -> Registration:
    return plan.by_name("mariadb", "MariaDB")


def _operator_names(host: str) -> list[str]:
    """mariadb-operator 26.6.0's four names of a Service (pkg/statefulset ServiceNameVariants)."""
    return [f"{host}.openstack.svc.cluster.local", f"{host}.openstack.svc", f"{host}.openstack", host]


def test_the_mariadb_resource_passes_the_operators_crd_with_and_without_tls() -> None:
    for plan in (tls_plan(), plain_plan(), tls_plan("dev")):
        mariadb = _mariadb(plan)
        manifest = {k: mariadb.inputs[k] for k in ("apiVersion", "kind", "metadata", "spec")}
        assert unknown_fields(manifest, _schema()) == []
        jsonschema.validate(manifest, _schema())


def test_with_a_ca_mariadb_requires_tls_from_the_internal_cas_secrets() -> None:
    tls = _mariadb(tls_plan()).inputs["spec"]["tls"]
    assert tls == {
        "enabled": True,
        "required": True,
        "serverCASecretRef": {"name": "internal-ca-bundle"},
        "serverCertSecretRef": {"name": "mariadb-internal-tls"},
        "clientCASecretRef": {"name": "internal-ca-bundle"},
        "clientCertSecretRef": {"name": "mariadb-client-tls"},
        "galeraSSTEnabled": True,  # prod runs Galera: state transfers on TLS too
    }
    assert "galeraSSTEnabled" not in _mariadb(tls_plan("dev")).inputs["spec"]["tls"]
    # Without a CA the operator's default is left alone.
    assert "tls" not in _mariadb(plain_plan()).inputs["spec"]


def test_the_server_certificate_names_what_the_operators_own_would() -> None:
    certificates = objects(tls_plan(), "Certificate")
    server = certificates["mariadb-internal-tls"]
    _check_certificate(server)
    spec = server.inputs["spec"]
    assert spec["dnsNames"] == [
        *_operator_names("mariadb"),
        *_operator_names("*.mariadb-internal"),
        *_operator_names("mariadb-primary"),
        *_operator_names("mariadb-secondary"),
        "localhost",
    ]
    assert spec["secretName"] == "mariadb-internal-tls" and spec["issuerRef"] == INTERNAL_ISSUER
    assert spec["secretTemplate"] == {"labels": WATCH}
    client = certificates["mariadb-client-tls"]
    _check_certificate(client)
    assert client.inputs["spec"]["commonName"] == "mariadb-client"
    assert client.inputs["spec"]["issuerRef"] == INTERNAL_ISSUER
    assert client.inputs["spec"]["secretTemplate"] == {"labels": WATCH}
    # The operator follows a new CA in the bundle only when its Secret carries the label, which the Job
    # that writes the bundle gives it.
    job = tls_plan().by_name("internal-ca-bundle", "Job")
    env = {e["name"]: e["value"] for e in job.inputs["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert json.loads(env["CA_BUNDLE_LABELS"]).items() >= WATCH.items()


@pytest.mark.parametrize("stack", ["prod", "dev"])
def test_extended_usages_as_the_operator_gives_them(stack: str) -> None:
    """Under Galera a node's server certificate is also its client certificate towards its peers:
    no extended usage (as the operator issues them); a single server's are server or client only."""
    certificates = objects(tls_plan(stack), "Certificate")
    server, client = (certificates[n].inputs["spec"]["usages"] for n in ("mariadb-internal-tls", "mariadb-client-tls"))
    if stack == "prod":
        assert server == client == ["digital signature"]
    else:
        assert server == ["server auth", "digital signature"] and client == ["client auth", "digital signature"]


def _connections(plan: Plan) -> dict[str, str]:
    """Every rendered oslo.db connection: '<secret>/<file>[section]' → URL."""
    found = {}
    for name, secret in objects(plan, "Secret").items():
        for file, text in (secret.revealed or {}).get("stringData", {}).items():
            if not file.endswith(".conf") or not text.lstrip().startswith("["):
                continue  # libvirt's and QEMU's .conf files are no INI
            for section, options in parse_ini(text).items():
                if str(options.get("connection", "")).startswith("mysql+pymysql://"):
                    found[f"{name}/{file}[{section}]"] = options["connection"]
    return found


def test_every_database_url_verifies_with_the_internal_ca() -> None:
    connections = _connections(tls_plan())
    assert {"keystone-etc/keystone.conf[database]", "nova-etc/nova.conf[api_database]"} <= set(connections)
    for where, url in connections.items():
        parts = urlsplit(url)
        assert parse_qs(parts.query)["ssl_ca"] == [CA_FILE], where
        # A name the server's certificate carries (PyMySQL checks it).
        assert parts.hostname == "mariadb-primary.openstack.svc.cluster.local", where
    for where, url in _connections(plain_plan()).items():
        assert "ssl_ca" not in parse_qs(urlsplit(url).query), where


def test_the_db_init_jobs_connect_with_the_ca_they_mount() -> None:
    jobs = {n: j for n, j in objects(tls_plan(), "Job").items() if n.endswith("-db-init")}
    assert jobs
    for name, job in jobs.items():
        [container] = containers(job)
        env = {e["name"]: e.get("value") for e in container.get("env", [])}
        assert env["DB_CA_FILE"] == CA_FILE, name
        mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
        volumes = {v["name"]: v for v in pod_template(job)["spec"]["volumes"]}
        assert volumes[mounts["/etc/openstack-ca"]]["secret"]["secretName"] == "internal-ca-bundle", name
    for name, job in objects(plain_plan(), "Job").items():
        if name.endswith("-db-init"):
            assert all(e["name"] != "DB_CA_FILE" for c in containers(job) for e in c.get("env", [])), name
