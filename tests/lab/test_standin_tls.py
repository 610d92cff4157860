"""The lab's RabbitMQ and MariaDB stand-ins serve the plan's spec.tls as their operators would:
TLS only, from the files of the Secrets the resource names (RabbitMQ also behind its TLS ports)."""

from __future__ import annotations

from typing import Any

from tests.lab.cloud.standins import StandIn, mariadb, rabbitmq
from tests.test_internal_tls import plain_plan, tls_plan


def _stand_in(plan: Any) -> StandIn:
    cluster = plan.by_name("rabbitmq", "RabbitmqCluster").inputs
    return rabbitmq({"metadata": cluster["metadata"], "spec": cluster["spec"]})


def _conf(stand_in: StandIn) -> dict[str, str]:
    text = stand_in.config_maps["rabbitmq-server-conf"]["rabbitmq.conf"]
    pairs = (line.split(" = ", 1) for line in text.splitlines() if " = " in line)
    return {key.strip(): value.strip() for key, value in pairs}


def _mounted(stand_in: StandIn) -> dict[str, tuple[str, list[str]]]:
    """file path in the container → (the Secret, its key) for every Secret volume."""
    spec = stand_in.template["spec"]
    volumes = {v["name"]: v["secret"] for v in spec["volumes"] if "secret" in v}
    files = {}
    for mount in spec["containers"][0]["volumeMounts"]:
        if mount["name"] in volumes:
            secret = volumes[mount["name"]]
            for item in secret["items"]:
                files[mount["mountPath"].rstrip("/") + "/" + item["path"]] = (secret["secretName"], item["key"])
    return files


def test_the_stand_in_serves_the_plans_tls_only_from_the_named_secrets() -> None:
    stand_in = _stand_in(tls_plan())
    conf, files = _conf(stand_in), _mounted(stand_in)
    assert conf["listeners.tcp"] == "none" and "listeners.tcp.default" not in conf
    assert "management.tcp.port" not in conf
    assert conf["listeners.ssl.default"] == "5671" and conf["management.ssl.port"] == "15671"
    for option in ("ssl_options", "management.ssl"):
        assert files[conf[f"{option}.certfile"]] == ("rabbitmq-internal-tls", "tls.crt")
        assert files[conf[f"{option}.keyfile"]] == ("rabbitmq-internal-tls", "tls.key")
        assert files[conf[f"{option}.cacertfile"]] == ("internal-ca-bundle", "ca.crt")
    service = next(s for s in stand_in.services if s["metadata"]["name"] == "rabbitmq")
    assert {p["port"] for p in service["spec"]["ports"]} == {5671, 15671, 15692}
    assert stand_in.template["spec"]["containers"][0]["readinessProbe"]["tcpSocket"]["port"] == 15671
    assert stand_in.secrets["rabbitmq-default-user"]["port"] == "5671"


def test_without_tls_the_stand_in_serves_plain_amqp() -> None:
    stand_in = _stand_in(plain_plan())
    conf = _conf(stand_in)
    assert conf["listeners.tcp.default"] == "5672" and conf["management.tcp.port"] == "15672"
    assert not any(key.startswith(("ssl_options", "listeners.ssl", "management.ssl")) for key in conf)
    assert _mounted(stand_in) == {}
    service = next(s for s in stand_in.services if s["metadata"]["name"] == "rabbitmq")
    assert {p["port"] for p in service["spec"]["ports"]} == {5672, 15672, 15692}


def _mariadb_stand_in(plan: Any) -> StandIn:
    server = plan.by_name("mariadb", "MariaDB").inputs
    return mariadb({"metadata": server["metadata"], "spec": server["spec"]})


def _my_cnf(stand_in: StandIn) -> dict[str, str]:
    text = stand_in.config_maps["mariadb-operator-config"]["my.cnf"]
    pairs = (line.split("=", 1) for line in text.splitlines() if "=" in line)
    return {key.strip(): value.strip() for key, value in pairs}


def test_the_mariadb_stand_in_requires_tls_from_the_secrets_the_plan_names() -> None:
    """As mariadb-operator's TLS config (ssl_cert, ssl_key, ssl_ca, require_secure_transport) with the
    server's pair of serverCertSecretRef and the CA of serverCASecretRef."""
    plan = tls_plan()
    stand_in, tls = _mariadb_stand_in(plan), plan.by_name("mariadb", "MariaDB").inputs["spec"]["tls"]
    conf, files = _my_cnf(stand_in), _mounted(stand_in)
    assert (
        files[conf["ssl_cert"]]
        == (tls["serverCertSecretRef"]["name"], "tls.crt")
        == ("mariadb-internal-tls", "tls.crt")
    )
    assert files[conf["ssl_key"]] == ("mariadb-internal-tls", "tls.key")
    assert files[conf["ssl_ca"]] == (tls["serverCASecretRef"]["name"], "ca.crt") == ("internal-ca-bundle", "ca.crt")
    assert conf["require_secure_transport"] == "true" and conf["tls_version"] == "TLSv1.3"
    assert conf["max_connections"] == "4096"  # the resource's own myCnf is kept
    probe = stand_in.template["spec"]["containers"][0]["readinessProbe"]["exec"]["command"][-1]
    assert probe.endswith(" --ssl")  # a plain TCP login would be refused


def test_without_tls_the_mariadb_stand_in_serves_plain() -> None:
    stand_in = _mariadb_stand_in(plain_plan())
    assert not any(key.startswith(("ssl_", "require_secure")) for key in _my_cnf(stand_in))
    assert _mounted(stand_in) == {}
