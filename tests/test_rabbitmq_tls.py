"""RabbitMQ on internal TLS: the RabbitmqCluster serves only TLS listeners with a certificate of the
internal CA, and every client (oslo.messaging, the rabbit-init Jobs, the readiness probes, the
NetworkPolicy) uses the TLS ports and verifies with the CA.
"""

from __future__ import annotations

from typing import Any

from components.mechanism.inifile import parse_ini
from tests.helpers import containers, objects
from tests.test_front_door import CRDS, _check_against_the_crd
from tests.test_internal_tls import CA_FILE, plain_plan, tls_plan
from tools.plan import Plan

CRDS["RabbitmqCluster"] = "rabbitmq-cluster-operator/rabbitmq.com_rabbitmqclusters.yaml"
# The services whose config files carry a transport_url, and the file.
MESSAGING_CONFIGS = {
    "nova": "nova.conf",
    "neutron": "neutron.conf",
    "cinder": "cinder.conf",
}


def _cluster(plan: Plan) -> Any:
    return plan.by_name("rabbitmq", "RabbitmqCluster")


def _rabbit_section(plan: Plan, service: str) -> Any:
    files = plan.by_name(f"{service}-etc", "Secret").revealed["stringData"]
    return parse_ini(files[MESSAGING_CONFIGS[service]])


def test_the_cluster_serves_tls_only_with_its_certificate_and_trusts_the_internal_ca() -> None:
    cluster = _cluster(tls_plan())
    _check_against_the_crd(cluster)
    assert cluster.inputs["spec"]["tls"] == {
        "secretName": "rabbitmq-internal-tls",
        "caSecretName": "internal-ca-bundle",
        "disableNonTLSListeners": True,
    }
    assert "tls" not in _cluster(plain_plan()).inputs["spec"]


def test_rabbitmqs_certificate_names_the_service_and_each_node_the_operator_calls() -> None:
    cert = objects(tls_plan(), "Certificate")["rabbitmq-internal-tls"]
    _check_against_the_crd(cert)
    spec = cert.inputs["spec"]
    assert spec["secretName"] == "rabbitmq-internal-tls"
    assert spec["issuerRef"]["name"] == "internal-ca"
    nodes = [f"rabbitmq-server-{i}.rabbitmq-nodes.openstack.svc" for i in range(3)]  # prod: ha, three nodes
    assert sorted(spec["dnsNames"]) == sorted(
        [
            "rabbitmq",
            "rabbitmq.openstack",
            "rabbitmq.openstack.svc",
            "rabbitmq.openstack.svc.cluster.local",
            *nodes,
            *(f"{n}.cluster.local" for n in nodes),
        ]
    )
    assert "server auth" in spec["usages"]
    assert "rabbitmq-internal-tls" not in objects(plain_plan(), "Certificate")


def test_every_transport_url_is_amqps_and_oslo_messaging_verifies_the_ca() -> None:
    for service in MESSAGING_CONFIGS:
        tls = _rabbit_section(tls_plan(), service)
        assert ":5671/" in tls["DEFAULT"]["transport_url"], service
        assert tls["oslo_messaging_rabbit"]["ssl"] == "true", service
        assert tls["oslo_messaging_rabbit"]["ssl_ca_file"] == CA_FILE, service
        plain = _rabbit_section(plain_plan(), service)
        assert ":5672/" in plain["DEFAULT"]["transport_url"], service
        assert "ssl" not in plain["oslo_messaging_rabbit"], service


def test_the_rabbit_init_jobs_call_the_management_api_over_https_with_the_ca() -> None:
    def env(plan: Plan) -> dict[str, Any]:
        job = plan.by_name("nova-rabbit-init", "Job")
        return {e["name"]: e.get("value") for c in containers(job) for e in c.get("env", [])}

    assert env(tls_plan())["RABBIT_API"] == "https://rabbitmq.openstack.svc.cluster.local:15671"
    assert env(tls_plan())["RABBIT_CA_FILE"] == CA_FILE
    assert env(plain_plan())["RABBIT_API"] == "http://rabbitmq.openstack.svc.cluster.local:15672"
    assert "RABBIT_CA_FILE" not in env(plain_plan())


def _health_probes(plan: Plan) -> dict[str, list[str]]:
    """container → the ports its health_probe.py readiness probe wants connections to."""
    found = {}
    for kind in ("Deployment", "StatefulSet", "DaemonSet"):
        for r in objects(plan, kind).values():
            for c in containers(r):
                command = (c.get("readinessProbe") or {}).get("exec", {}).get("command", [])
                if command[1:2] == ["/scripts/health_probe.py"]:
                    found[c["name"]] = command[2:]
    return found


def test_the_rpc_daemons_are_ready_when_connected_to_amqps() -> None:
    tls, plain = _health_probes(tls_plan()), _health_probes(plain_plan())
    assert {"nova-conductor", "nova-compute", "cinder-volume"} <= set(tls)
    assert all(ports == ["5671"] for ports in tls.values()), tls
    assert all(ports == ["5672"] for ports in plain.values()), plain


def test_rabbitmqs_network_policy_admits_the_tls_ports() -> None:
    def ports(plan: Plan) -> set[int]:
        spec = plan.by_name("rabbitmq-ingress", "NetworkPolicy").inputs["spec"]
        return {p["port"] for rule in spec["ingress"] for p in rule.get("ports", [])}

    assert ports(tls_plan()) == {5671, 15671, 4369, 25672}
    assert ports(plain_plan()) == {5672, 15672, 4369, 25672}
