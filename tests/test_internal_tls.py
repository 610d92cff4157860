"""Internal TLS (tls.internal): each API serves its own certificate, every client verifies with the CA.

Read from what the plan registers: the Certificates (checked against cert-manager's CRD), the
pods' volumes and mounts, and the rendered config files and catalog registrations.
"""

from __future__ import annotations

from functools import cache
from typing import Any
from urllib.parse import urlsplit

import pytest

from components.mechanism.inifile import parse_ini
from components.tables.catalog import SERVICES
from tests.conftest import plan_of
from tests.helpers import containers, objects, pod_template
from tests.test_front_door import _check_against_the_crd
from tools.plan import Plan
from tools.runtime import Registration

PUBLIC = {"issuer": {"kind": "ClusterIssuer", "name": "letsencrypt"}}
APIS = sorted(api for entry in SERVICES for api in entry.apis)
# Horizon and the console proxy serve TLS too: the gateway hands them passwords, sessions, console tokens
HTTPS_SERVERS = [*APIS, "horizon", "nova-novncproxy"]
CA_FILE = "/etc/openstack-ca/ca.crt"


@cache
def tls_plan() -> Plan:
    return plan_of("prod", tls={"public": PUBLIC, "internal": {"selfSigned": True}})


@cache
def plain_plan() -> Plan:
    return plan_of("prod", tls={"public": PUBLIC, "internal": {"plainText": True}})


def _files(plan: Plan, service: str) -> dict[str, str]:
    return plan.by_name(f"{service}-etc", "Secret").revealed["stringData"]


def _ini(plan: Plan, service: str, name: str) -> Any:
    return parse_ini(_files(plan, service)[name])


def _pods(plan: Plan) -> dict[str, Registration]:
    return {
        n: r
        for kind in ("Deployment", "StatefulSet", "DaemonSet", "Job", "CronJob")
        for n, r in objects(plan, kind).items()
    }


def _secret_volumes(r: Registration) -> dict[str, str]:
    """volume name → the Secret it mounts."""
    return {v["name"]: v["secret"]["secretName"] for v in pod_template(r)["spec"].get("volumes", []) if "secret" in v}


def test_each_api_has_a_certificate_of_exactly_its_services_cluster_names() -> None:
    certificates = objects(tls_plan(), "Certificate")
    for api in APIS:
        cert = certificates[f"{api}-internal-tls"]
        _check_against_the_crd(cert)
        spec = cert.inputs["spec"]
        assert spec["dnsNames"] == [
            api,
            f"{api}.openstack",
            f"{api}.openstack.svc",
            f"{api}.openstack.svc.cluster.local",
        ]
        assert spec["secretName"] == f"{api}-internal-tls"
        assert spec["issuerRef"] == {"group": "cert-manager.io", "kind": "Issuer", "name": "internal-ca"}
        assert "server auth" in spec["usages"]


def test_the_internal_ca_is_the_programs_own_and_no_public_issuer_signs_internal_names() -> None:
    certificates = objects(tls_plan(), "Certificate")
    assert certificates["internal-ca"].inputs["spec"]["isCA"] is True
    assert certificates["public-tls"].inputs["spec"]["issuerRef"]["name"] == "letsencrypt"
    trust = certificates["internal-ca-trust"].inputs["spec"]
    _check_against_the_crd(certificates["internal-ca-trust"])
    # Kept for its ca.crt (the CA), which the bundle Job reads: its key pair must be no TLS server's or
    # client's, only e-mail protection; it is issued by the CA it carries.
    assert trust["usages"] == ["email protection"] and "dnsNames" not in trust
    assert trust["issuerRef"] == {"group": "cert-manager.io", "kind": "Issuer", "name": "internal-ca"}
    assert "internal-ca-bundle" not in certificates  # the bundle is the Job's (tests/test_ca_rotation.py)


def test_a_stack_issuer_signs_every_internal_certificate() -> None:
    issuer = {"kind": "ClusterIssuer", "name": "cluster-internal-ca"}
    plan = plan_of("prod", tls={"public": PUBLIC, "internal": {"issuer": issuer}})
    certificates = objects(plan, "Certificate")
    assert "internal-ca" not in certificates  # no CA of the program's own
    internal = [c for n, c in certificates.items() if n != "public-tls"]
    assert {c.inputs["spec"]["issuerRef"]["name"] for c in internal} == {"cluster-internal-ca"}


def test_plain_text_has_no_internal_certificates() -> None:
    assert set(objects(plain_plan(), "Certificate")) == {"public-tls"}


def test_an_apis_key_is_mounted_only_into_its_own_pods_and_container() -> None:
    servers = [*HTTPS_SERVERS, "memcached"]  # memcached serves its own too (tests/test_memcached_tls.py)
    for name, r in _pods(tls_plan()).items():
        secrets = _secret_volumes(r)
        served = sorted(s for s in secrets.values() if s.endswith("-internal-tls"))
        assert served == ([f"{name}-internal-tls"] if name in servers else []), name
        for container in containers(r):
            mounted = {m["mountPath"] for m in container.get("volumeMounts", [])}
            own = container["name"] in servers and name in servers
            assert ("/etc/openstack-tls" in mounted) == own, (name, container)


def test_every_openstack_pod_mounts_the_ca_and_never_the_cas_key() -> None:
    for name, r in _pods(tls_plan()).items():
        volumes = {v["name"]: v for v in pod_template(r)["spec"].get("volumes", [])}
        assert "internal-ca" not in _secret_volumes(r).values(), name  # the root's Secret holds its key
        if "internal-ca" in volumes:
            assert volumes["internal-ca"]["secret"] == {
                "secretName": "internal-ca-bundle",
                "items": [{"key": "ca.crt", "path": "ca.crt"}],
                "defaultMode": 0o444,
            }
    for name in ("nova-conductor", "nova-api", "keystone-bootstrap", "cinder-ks-endpoints"):
        r = _pods(tls_plan())[name]
        for container in containers(r):
            mounts = {m["mountPath"]: m for m in container["volumeMounts"]}
            # A directory, not a subPath: the kubelet updates it when the Secret renews.
            assert mounts["/etc/openstack-ca"] == {
                "name": "internal-ca",
                "mountPath": "/etc/openstack-ca",
                "readOnly": True,
            }


def test_the_apis_serve_https_from_their_mounted_pair_and_reload_it() -> None:
    plan = tls_plan()
    inis = {
        "keystone-api": _ini(plan, "keystone", "keystone-uwsgi.ini"),
        "nova-api": _ini(plan, "nova", "nova-api-uwsgi.ini"),
        "nova-metadata": _ini(plan, "nova", "nova-metadata-uwsgi.ini"),
        "glance-api": _ini(plan, "glance", "glance-api-uwsgi.ini"),
        "placement-api": _ini(plan, "placement", "placement-api-uwsgi.ini"),
        "neutron-server": _ini(plan, "neutron", "neutron-server-uwsgi.ini"),
        "cinder-api": _ini(plan, "cinder", "cinder-api-uwsgi.ini"),
    }
    assert sorted(inis) == APIS
    for api, ini in inis.items():
        uwsgi = ini["uwsgi"]
        port = plan.by_name(api, "Service").inputs["spec"]["ports"][0]["port"]
        assert uwsgi["https-socket"] == f"0.0.0.0:{port},/etc/openstack-tls/tls.crt,/etc/openstack-tls/tls.key"
        assert uwsgi["touch-reload"] == "/etc/openstack-tls/tls.crt"
        assert "http-socket" not in uwsgi, api
        probe = next(c for c in containers(plan.by_name(api, "Deployment")) if c["name"] == api)["readinessProbe"]
        assert probe["httpGet"]["scheme"] == "HTTPS", api
    # Horizon is behind the gateway only, and serves it HTTPS the same way (its static files too).
    horizon = _ini(plan, "horizon", "horizon-uwsgi.ini")["uwsgi"]
    assert horizon["https-socket"] == "0.0.0.0:8080,/etc/openstack-tls/tls.crt,/etc/openstack-tls/tls.key"
    assert "http-socket" not in horizon and horizon["touch-reload"] == "/etc/openstack-tls/tls.crt"
    assert horizon["static-map"].startswith("/static=")
    probe = next(c for c in containers(plan.by_name("horizon", "Deployment")) if c["name"] == "horizon")
    assert probe["readinessProbe"]["httpGet"]["scheme"] == "HTTPS"


def test_plain_text_keeps_http() -> None:
    uwsgi = _ini(plain_plan(), "nova", "nova-api-uwsgi.ini")["uwsgi"]
    assert "https-socket" not in uwsgi and "touch-reload" not in uwsgi
    assert "cafile" not in _ini(plain_plan(), "nova", "nova.conf")["keystone_authtoken"]


def _catalog(plan: Plan) -> list[list[str]]:
    entries = []
    for name, job in objects(plan, "Job").items():
        if name.endswith("-ks-endpoints"):
            env = {e["name"]: e.get("value") for c in containers(job) for e in c.get("env", [])}
            entries += [entry.split(",") for entry in env["CATALOG"].split(";") if entry]
    return entries


def test_internal_and_admin_catalog_endpoints_are_https_and_public_ones_unchanged() -> None:
    entries = _catalog(tls_plan())
    assert entries
    for _name, _type, public, internal, admin in entries:
        assert urlsplit(internal).scheme == "https"
        assert str(urlsplit(internal).hostname).endswith(".svc.cluster.local")
        assert admin == "" or urlsplit(admin).scheme == "https"
        assert public.startswith("https://") and ".svc." not in public
    boot = {
        e["name"]: e.get("value") for c in containers(tls_plan().by_name("keystone-bootstrap", "Job")) for e in c["env"]
    }
    assert boot["OS_BOOTSTRAP_INTERNAL_URL"].startswith("https://keystone-api.openstack.svc.cluster.local:5000")
    job = tls_plan().by_name("nova-ks-endpoints", "Job")
    client = {e["name"]: e.get("value") for c in containers(job) for e in c["env"]}
    assert client["OS_AUTH_URL"].startswith("https://") and client["OS_CACERT"] == CA_FILE
    assert client["REQUESTS_CA_BUNDLE"] == CA_FILE
    assert all(urlsplit(e[3]).scheme == "http" for e in _catalog(plain_plan()))


# (service, file, section, option): every client of an internal API verifies it with the CA.
VERIFIED = [
    ("nova", "nova.conf", "keystone_authtoken", "cafile"),
    ("nova", "nova.conf", "service_user", "cafile"),
    ("nova", "nova.conf", "placement", "cafile"),
    ("nova", "nova.conf", "glance", "cafile"),
    ("nova", "nova.conf", "cinder", "cafile"),
    ("nova", "nova.conf", "neutron", "cafile"),
    ("nova", "nova.conf", "keystone", "cafile"),  # nova-api's project id checks
    ("neutron", "neutron.conf", "nova", "cafile"),
    ("neutron", "neutron.conf", "keystone_authtoken", "cafile"),
    ("neutron", "metadata_agent.ini", "DEFAULT", "auth_ca_cert"),
    ("cinder", "cinder.conf", "DEFAULT", "glance_ca_certificates_file"),
    ("cinder", "cinder.conf", "nova", "cafile"),
    ("cinder", "cinder.conf", "service_user", "cafile"),
    ("glance", "glance-api.conf", "keystone_authtoken", "cafile"),
    ("placement", "placement.conf", "keystone_authtoken", "cafile"),
    ("keystone", "keystone.conf", None, None),
]


@pytest.mark.parametrize(("service", "name", "section", "option"), [v for v in VERIFIED if v[2]])
def test_every_client_verifies_with_the_internal_ca(service: str, name: str, section: str, option: str) -> None:
    assert _ini(tls_plan(), service, name)[section][option] == CA_FILE
    plain = _ini(plain_plan(), service, name)
    assert section not in plain or option not in plain[section]


def test_the_console_proxy_serves_only_tls_from_its_own_certificate() -> None:
    proxy = _ini(tls_plan(), "nova", "nova-novncproxy.conf")
    assert (proxy["DEFAULT"]["ssl_only"], proxy["DEFAULT"]["cert"], proxy["DEFAULT"]["key"]) == (
        "true", "/etc/openstack-tls/tls.crt", "/etc/openstack-tls/tls.key")  # fmt: skip
    assert proxy["console"]["ssl_minimum_version"] == "tlsv1_2"
    # In a file of its own, read by the console proxy alone: nova.conf names no file other containers lack.
    nova = _ini(tls_plan(), "nova", "nova.conf")
    assert not {"ssl_only", "cert", "key"} & set(nova["DEFAULT"]) and "console" not in nova
    [deployment] = [d for d in objects(tls_plan(), "Deployment").values() if d.k8s_name == "nova-novncproxy"]
    [container] = containers(deployment)
    assert container["args"][-2:] == ["--config-file", "/etc/nova/nova-novncproxy.conf"]
    assert "nova-novncproxy.conf" not in _files(plain_plan(), "nova")  # plain text: nothing to add
    # Its certificate names its Service as the gateway's BackendTLSPolicy verifies it.
    spec = objects(tls_plan(), "Certificate")["nova-novncproxy-internal-tls"].inputs["spec"]
    assert "nova-novncproxy.openstack.svc.cluster.local" in spec["dnsNames"]


def test_the_metadata_agent_calls_nova_over_https_and_horizon_verifies_keystone() -> None:
    assert _ini(tls_plan(), "neutron", "metadata_agent.ini")["DEFAULT"]["nova_metadata_protocol"] == "https"
    local = _files(tls_plan(), "horizon")["local_settings.py"]
    assert f"OPENSTACK_SSL_CACERT = {CA_FILE!r}" in local
    assert "OPENSTACK_KEYSTONE_URL = 'https://keystone-api.openstack.svc.cluster.local:5000/v3'" in local


def test_the_gateway_speaks_tls_to_each_api_backend_verifying_its_name_and_the_ca() -> None:
    plan = tls_plan()
    policies = objects(plan, "BackendTLSPolicy")
    routed = {r.inputs["spec"]["rules"][0]["backendRefs"][0]["name"] for r in objects(plan, "HTTPRoute").values()}
    assert set(policies) == {f"{b}-backend-tls" for b in routed if b in HTTPS_SERVERS}
    assert routed <= set(HTTPS_SERVERS)  # every public backend on TLS: none left in plain http
    for name, policy in policies.items():
        backend = name.removesuffix("-backend-tls")
        assert policy.inputs["apiVersion"] == "gateway.networking.k8s.io/v1"
        assert policy.inputs["spec"] == {
            "targetRefs": [{"group": "", "kind": "Service", "name": backend}],
            "validation": {
                # The one CA reference every implementation reads: a ConfigMap of one certificate, written by
                # the bundle Job for each trusted CA (here the one CA, internal-ca).
                "caCertificateRefs": [{"group": "", "kind": "ConfigMap", "name": "internal-ca-trust"}],
                "hostname": f"{backend}.openstack.svc.cluster.local",
            },
        }
    assert objects(plain_plan(), "BackendTLSPolicy") == {}
