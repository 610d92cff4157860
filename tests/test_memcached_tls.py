"""memcached on internal TLS: memcached serves TLS only, with a certificate of every name its clients use,
mounted into its own container; every client (oslo.cache, keystonemiddleware's token cache, Horizon's
Django cache) verifies it with the internal CA. Plain-text plans keep memcached as it was.

Read from what the plan registers: the Certificate (checked against cert-manager's CRD), the
StatefulSet's pod, the ConfigMap of its probe, the rendered config files and Horizon's settings run
as Python. tests/real/test_memcached_tls.py runs the same options with the real software.
"""

from __future__ import annotations

import configparser
import datetime
import ssl
from pathlib import Path
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from components.mechanism.inifile import parse_ini
from tests.helpers import containers, objects, pod_template
from tests.test_front_door import _check_against_the_crd
from tests.test_internal_tls import CA_FILE, plain_plan, tls_plan
from tools.plan import Plan

REPO = Path(__file__).resolve().parents[1]
CERT_DIR = "/etc/openstack-tls"
PROBE = "memcached_tls_probe.py"
# prod runs three memcached servers (replicas under ha).
PODS = [f"memcached-{i}.memcached.openstack.svc" for i in range(3)]


def _memcached(plan: Plan) -> dict[str, Any]:
    return next(c for c in containers(plan.by_name("memcached", "StatefulSet")) if c["name"] == "memcached")


def _pod(plan: Plan) -> dict[str, Any]:
    return pod_template(plan.by_name("memcached", "StatefulSet"))["spec"]


def _configs(plan: Plan) -> dict[str, configparser.ConfigParser]:
    """Every rendered oslo.config file of the plan that configures a memcached client, by Secret/file."""
    found = {}
    for name, secret in objects(plan, "Secret").items():
        if not name.endswith("-etc"):
            continue
        for file, text in secret.revealed["stringData"].items():
            if not file.endswith((".conf", ".ini")) or file.endswith("uwsgi.ini"):
                continue
            try:
                ini = parse_ini(text)
            except configparser.Error:
                continue  # libvirt's files
            if ini.has_option("cache", "memcache_servers") or ini.has_option("keystone_authtoken", "memcached_servers"):
                found[f"{name}/{file}"] = ini
    return found


def _hosts(servers: str | list[str]) -> set[str]:
    listed = servers.split(",") if isinstance(servers, str) else servers
    return {server.rsplit(":", 1)[0] for server in listed}


def _horizon_settings(plan: Plan, ca_file: Path) -> dict[str, Any]:
    """Horizon's local_settings.py run as Django runs it, its CA path pointed at `ca_file`."""
    text = plan.by_name("horizon-etc", "Secret").revealed["stringData"]["local_settings.py"]
    namespace: dict[str, Any] = {}
    code = text.replace(CA_FILE, str(ca_file)).replace("os.environ['POD_IP']", "'10.0.0.7'")
    exec(compile(code, "local_settings.py", "exec"), namespace)  # the plan's own settings, as Django runs them
    return namespace


def test_memcached_has_a_certificate_of_every_name_its_clients_connect_to(tmp_path: Path) -> None:
    cert = objects(tls_plan(), "Certificate")["memcached-internal-tls"]
    _check_against_the_crd(cert)
    spec = cert.inputs["spec"]
    service = ["memcached", "memcached.openstack", "memcached.openstack.svc", "memcached.openstack.svc.cluster.local"]
    assert sorted(spec["dnsNames"]) == sorted([*service, *PODS, *(f"{pod}.cluster.local" for pod in PODS)])
    assert spec["secretName"] == "memcached-internal-tls"
    assert spec["issuerRef"] == {"group": "cert-manager.io", "kind": "Issuer", "name": "internal-ca"}
    assert "server auth" in spec["usages"]
    # The clients check the host they connect to: each one they list is named.
    configs = _configs(tls_plan())
    listed = {h for ini in configs.values() for h in _hosts(ini.get("cache", "memcache_servers", fallback=""))}
    listed |= {
        h for ini in configs.values() for h in _hosts(ini.get("keystone_authtoken", "memcached_servers", fallback=""))
    }
    listed.discard("")
    horizon = _horizon_settings(tls_plan(), _ca_file(tmp_path)[0])["CACHES"]["default"]
    listed |= _hosts(horizon["LOCATION"])
    assert listed == {f"{pod}.cluster.local" for pod in PODS}
    assert listed <= set(spec["dnsNames"])
    assert "memcached-internal-tls" not in objects(plain_plan(), "Certificate")


def test_memcached_serves_tls_only_from_its_own_mounted_pair() -> None:
    args = _memcached(tls_plan())["args"]
    assert args[0] == "memcached" and "-Z" in args
    assert args[args.index("-o") + 1] == f"ssl_chain_cert={CERT_DIR}/tls.crt,ssl_key={CERT_DIR}/tls.key"
    volumes = {v["name"]: v for v in _pod(tls_plan())["volumes"]}
    mounts = {m["mountPath"]: m for m in _memcached(tls_plan())["volumeMounts"]}
    # A directory, not a subPath: the kubelet swaps a renewed certificate into it.
    assert mounts[CERT_DIR] == {"name": "internal-tls", "mountPath": CERT_DIR, "readOnly": True}
    assert volumes["internal-tls"]["secret"]["secretName"] == "memcached-internal-tls"
    assert {i["key"] for i in volumes["internal-tls"]["secret"]["items"]} == {"tls.crt", "tls.key"}
    # The port and who may reach it are those of plain text.
    assert _memcached(tls_plan())["ports"] == [{"containerPort": 11211, "protocol": "TCP"}]
    policy = tls_plan().by_name("memcached-ingress", "NetworkPolicy").inputs["spec"]
    assert policy == plain_plan().by_name("memcached-ingress", "NetworkPolicy").inputs["spec"]
    plain = _memcached(plain_plan())
    assert "-Z" not in plain["args"] and "-o" not in plain["args"]
    assert "internal-tls" not in {v["name"] for v in _pod(plain_plan()).get("volumes", [])}


def test_memcached_is_ready_only_serving_the_mounted_certificate_which_its_probe_loads() -> None:
    probe = _memcached(tls_plan())["readinessProbe"]
    assert probe["exec"]["command"] == ["python3", f"/scripts/{PROBE}", "11211", f"{CERT_DIR}/tls.crt"]
    mounts = {m["mountPath"]: m for m in _memcached(tls_plan())["volumeMounts"]}
    assert mounts[f"/scripts/{PROBE}"]["name"] == "bin"
    assert {v["name"]: v for v in _pod(tls_plan())["volumes"]}["bin"]["configMap"]["name"] == "memcached-bin"
    script = tls_plan().by_name("memcached-bin", "ConfigMap").inputs["data"][PROBE]
    assert script == (REPO / "components" / "scripts" / PROBE).read_text()
    plain = _memcached(plain_plan())["readinessProbe"]
    assert plain["tcpSocket"] == {"port": 11211} and "exec" not in plain
    # Alive while its port answers, TLS or not: the kubelet restarts a memcached that stopped listening.
    assert _memcached(tls_plan())["livenessProbe"]["tcpSocket"] == {"port": 11211}
    assert _memcached(plain_plan())["livenessProbe"]["tcpSocket"] == {"port": 11211}


def test_every_oslo_memcached_client_verifies_with_the_internal_ca() -> None:
    configs = _configs(tls_plan())
    caches = {name for name, ini in configs.items() if ini.has_option("cache", "memcache_servers")}
    tokens = {name for name, ini in configs.items() if ini.has_option("keystone_authtoken", "memcached_servers")}
    assert {"keystone-etc/keystone.conf", "nova-etc/nova.conf"} <= caches
    assert {f"{s}-etc/{s}.conf" for s in ("nova", "neutron", "cinder", "placement")} <= tokens
    for name in caches:
        cache = configs[name]["cache"]
        assert (cache["backend"], cache["tls_enabled"], cache["tls_cafile"]) == (
            "oslo_cache.memcache_pool", "true", CA_FILE,
        ), name  # fmt: skip
    for name in tokens:
        token = configs[name]["keystone_authtoken"]
        options = ("memcache_use_advanced_pool", "memcache_tls_enabled", "memcache_tls_cafile")
        assert tuple(token[o] for o in options) == ("true", "true", CA_FILE), name
    for name, ini in _configs(plain_plan()).items():
        assert not ini.has_option("cache", "tls_enabled"), name
        authtoken = ini.options("keystone_authtoken") if ini.has_section("keystone_authtoken") else []
        assert not [o for o in authtoken if o.startswith("memcache_tls") or o == "memcache_use_advanced_pool"], name


def _ca_file(directory: Path) -> tuple[Path, str]:
    key = ec.generate_private_key(ec.SECP256R1())
    common_name = "test internal CA"
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
        .serial_number(x509.random_serial_number()).not_valid_before(now).not_valid_after(now + datetime.timedelta(1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True).sign(key, hashes.SHA256())
    )  # fmt: skip
    path = directory / "ca.crt"
    path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    return path, common_name


def test_horizon_hands_pymemcache_a_context_that_verifies_the_ca_and_the_host(tmp_path: Path) -> None:
    ca_file, common_name = _ca_file(tmp_path)
    cache = _horizon_settings(tls_plan(), ca_file)["CACHES"]["default"]
    assert cache["BACKEND"] == "django.core.cache.backends.memcached.PyMemcacheCache"
    context = cache["OPTIONS"]["tls_context"]
    assert isinstance(context, ssl.SSLContext)
    assert context.verify_mode == ssl.CERT_REQUIRED and context.check_hostname
    trusted = [ca["subject"] for ca in context.get_ca_certs()]
    assert trusted == [((("commonName", common_name),),)]  # the internal CA alone
    plain = _horizon_settings(plain_plan(), ca_file)["CACHES"]["default"]
    assert "OPTIONS" not in plain
