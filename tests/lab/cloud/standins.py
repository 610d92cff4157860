"""What the operators would create for the plan's custom resources, played by Debian's servers.

No operator runs here (no API server), so the `MariaDB` and `RabbitmqCluster` resources of
the plan are turned into the pods and Secrets their operators would make, and run like any
other pod of the plan: one server each (not a Galera or RabbitMQ cluster), with the CR's own
settings where they reach the server (MariaDB's myCnf and root password Secret, RabbitMQ's
additionalConfig and tls), placed by the resource's own nodeSelector and affinity, behind the Services
(names, ports, selectors) the operators create. The servers are Debian 12's MariaDB 10.11 and
RabbitMQ 3.10, not the operators' images: the report counts them apart, as stand-ins.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from typing import Any

Manifest = dict[str, Any]

# The Services mariadb-operator (26.6) and the RabbitMQ Cluster Operator make for a resource:
# name pattern, headless or not, and their ports (name, port).
MARIADB_SERVICES = (("{name}", False), ("{name}-internal", True))
MARIADB_HA_SERVICES = (("{name}-primary", False), ("{name}-secondary", False))
MARIADB_PORTS = (("mariadb", 3306),)
RABBITMQ_SERVICES = (("{name}", False), ("{name}-nodes", True))
RABBITMQ_PORTS = {
    False: (("amqp", 5672), ("management", 15672), ("prometheus", 15692)),
    True: (("epmd", 4369), ("cluster-rpc", 25672)),
}
# With spec.tls the operator's Service adds these, and disableNonTLSListeners drops amqp and
# management (internal/resource/service.go of v2.21.1).
RABBITMQ_TLS_PORTS = (("amqps", 5671), ("management-tls", 15671))
RABBITMQ_PLAIN_ONLY = ("amqp", "management")
# Where the operator mounts spec.tls's Secrets, and what it adds to rabbitmq.conf
# (internal/resource/statefulset.go and configmap.go `defaultTLSConf`). Its prometheus.ssl lines
# are left out: the stand-in enables no prometheus plugin, and RabbitMQ refuses settings of a
# plugin it does not run.
RABBITMQ_TLS_DIR = "/etc/rabbitmq-tls"
RABBITMQ_CA_DIR = "/etc/rabbitmq-tls-ca"
RABBITMQ_TLS_CONF = (
    f"ssl_options.certfile = {RABBITMQ_TLS_DIR}/tls.crt\nssl_options.keyfile = {RABBITMQ_TLS_DIR}/tls.key\n"
    "listeners.ssl.default = 5671\n"
    f"management.ssl.certfile = {RABBITMQ_TLS_DIR}/tls.crt\nmanagement.ssl.keyfile = {RABBITMQ_TLS_DIR}/tls.key\n"
    "management.ssl.port = 15671\n"
)
STANDIN_IMAGES = {"MariaDB": "debian/mariadb-server:10.11", "RabbitmqCluster": "debian/rabbitmq-server:3.10"}

_MARIADB_START = r"""set -eu
data=/var/lib/mysql
if [ ! -d "$data/mysql" ]; then
  mariadb-install-db --no-defaults --datadir="$data" --user=root --skip-test-db >/dev/null
fi
# The operator gives root@'%' the password of rootPasswordSecretKeyRef.
umask 077
{
  printf "CREATE USER IF NOT EXISTS 'root'@'%%' IDENTIFIED BY '%s';\n" "$MARIADB_ROOT_PASSWORD"
  printf "ALTER USER 'root'@'%%' IDENTIFIED BY '%s';\n" "$MARIADB_ROOT_PASSWORD"
  printf "GRANT ALL PRIVILEGES ON *.* TO 'root'@'%%' WITH GRANT OPTION;\n"
} > /run/init.sql
exec mariadbd --defaults-extra-file=/etc/mysql/operator/my.cnf --datadir="$data" --user=root \
  --bind-address=0.0.0.0 --port=3306 --socket=/run/mysqld.sock --pid-file=/run/mysqld.pid \
  --init-file=/run/init.sql --skip-name-resolve
"""
_MARIADB_READY = 'MYSQL_PWD="$MARIADB_ROOT_PASSWORD" mariadb --protocol=tcp -h127.0.0.1 -uroot -e "SELECT 1"'
# With spec.tls the operator mounts the server's pair and its CA bundle under /etc/pki and writes
# these options (internal/controller/mariadb_controller_tls.go `reconcileTLSConfig` of 26.6.0). The
# stand-in mounts the CA Secret the resource names in a directory of its own (the lab's kubelet has
# no projected volumes): the operator's bundle of the same CA would hold the same certificate.
MARIADB_TLS_DIR, MARIADB_CA_DIR = "/etc/pki", "/etc/pki-ca"

_RABBITMQ_START = r"""set -eu
export HOME=/var/lib/rabbitmq RABBITMQ_MNESIA_BASE=/var/lib/rabbitmq/mnesia
export RABBITMQ_LOG_BASE=/var/lib/rabbitmq/log RABBITMQ_CONFIG_FILE=/etc/rabbitmq/operator/rabbitmq.conf
export RABBITMQ_ENABLED_PLUGINS_FILE=/etc/rabbitmq/operator/enabled_plugins
export RABBITMQ_NODENAME="rabbit@$(hostname)"
exec /usr/lib/rabbitmq/bin/rabbitmq-server
"""


@dataclass(frozen=True)
class StandIn:
    """A custom resource played here: its pod template, the Services and Secrets the operator makes."""

    kind: str
    name: str
    pod_name: str  # what the operator's StatefulSet names its first pod
    template: Manifest
    services: tuple[Manifest, ...]
    secrets: dict[str, dict[str, str]]
    config_maps: dict[str, dict[str, str]]


def _service(
    name: str, namespace: str, headless: bool, ports: tuple[tuple[str, int], ...], selector: Manifest
) -> Manifest:
    spec: Manifest = {
        "selector": selector,
        "ports": [{"name": n, "port": p, "targetPort": p} for n, p in ports],
    }
    if headless:
        spec["clusterIP"] = "None"
        spec["publishNotReadyAddresses"] = True  # peers find each other before they are Ready
    return {"metadata": {"name": name, "namespace": namespace}, "spec": spec}


def mariadb(resource: Manifest) -> StandIn:
    name, spec, namespace = resource["metadata"]["name"], resource["spec"], resource["metadata"]["namespace"]
    ha = bool((spec.get("galera") or {}).get("enabled"))
    labels = {"app.kubernetes.io/name": "mariadb", "app.kubernetes.io/instance": name}
    services = tuple(
        _service(pattern.format(name=name), namespace, headless, MARIADB_PORTS, labels)
        for pattern, headless in MARIADB_SERVICES + (MARIADB_HA_SERVICES if ha else ())
    )
    password = spec["rootPasswordSecretKeyRef"]
    config = f"{name}-operator-config"
    tls = mariadb_tls(spec)
    mounts: list[Manifest] = [
        {"name": "storage", "mountPath": "/var/lib/mysql"},
        {"name": "config", "mountPath": "/etc/mysql/operator", "readOnly": True},
    ]
    volumes: list[Manifest] = [
        {"name": "storage", "persistentVolumeClaim": {"claimName": f"storage-{name}-0"}},
        {"name": "config", "configMap": {"name": config}},
    ]
    for volume, path in _mariadb_tls_volumes(tls):
        mounts.append({"name": volume["name"], "mountPath": path, "readOnly": True})
        volumes.append(volume)
    container = {
        "name": "mariadb",
        "image": STANDIN_IMAGES["MariaDB"],
        "command": ["/bin/sh", "-c", _MARIADB_START],
        "env": [{"name": "MARIADB_ROOT_PASSWORD", "valueFrom": {"secretKeyRef": password}}],
        "volumeMounts": mounts,
        "readinessProbe": {
            # Under require_secure_transport a plain TCP login is refused: the probe asks for TLS.
            "exec": {"command": ["/bin/sh", "-c", _MARIADB_READY + (" --ssl" if tls.get("required") else "")]},
            "periodSeconds": 2,
            "timeoutSeconds": 5,
        },
        "resources": spec.get("resources") or {},
    }
    template = _template(
        # mariadb-operator's labels on its pods (pkg/builder/labels: WithMariaDBSelectorLabels).
        labels,
        container,
        volumes,
        spec,
    )
    my_cnf = {config: {"my.cnf": spec.get("myCnf", "[mariadb]\n") + mariadb_tls_conf(tls)}}
    return StandIn("MariaDB", name, f"{name}-0", template, services, {}, my_cnf)


def mariadb_tls(spec: Manifest) -> Manifest:
    """spec.tls where it names the server's Secrets; the stand-in plays no CA of the operator's own."""
    tls = spec.get("tls") or {}
    return tls if tls.get("enabled") and tls.get("serverCertSecretRef") and tls.get("serverCASecretRef") else {}


def mariadb_tls_conf(tls: Manifest) -> str:
    """The operator's TLS options for spec.tls, pointing at the stand-in's mounts."""
    if not tls:
        return ""
    return (
        f"\n[mariadb]\nssl_cert = {MARIADB_TLS_DIR}/server.crt\nssl_key = {MARIADB_TLS_DIR}/server.key\n"
        f"ssl_ca = {MARIADB_CA_DIR}/ca.crt\nrequire_secure_transport = {str(bool(tls.get('required'))).lower()}\n"
        "tls_version = TLSv1.3\n"
    )


def _mariadb_tls_volumes(tls: Manifest) -> list[tuple[Manifest, str]]:
    """The server's pair as the operator names it in /etc/pki (server.crt, server.key), and the CA."""
    if not tls:
        return []
    pair = [{"key": "tls.crt", "path": "server.crt"}, {"key": "tls.key", "path": "server.key"}]
    ca = [{"key": "ca.crt", "path": "ca.crt"}]
    return [
        (_secret_volume("pki", tls["serverCertSecretRef"]["name"], pair), f"{MARIADB_TLS_DIR}/"),
        (_secret_volume("pki-ca", tls["serverCASecretRef"]["name"], ca), f"{MARIADB_CA_DIR}/"),
    ]


def rabbitmq_listeners(tls: Manifest) -> str:
    """What the operator writes to rabbitmq.conf for spec.tls (configmap.go of v2.21.1), before
    the plain defaults the stand-in gives: the TLS listeners from the mounted Secrets; without
    disableNonTLSListeners the plain ones too; with caSecretName the CA, and peers verified
    (a client without a certificate still admitted: fail_if_no_peer_cert is false)."""
    plain = "listeners.tcp.default = 5672\nmanagement.tcp.port = 15672\n"
    if not tls.get("secretName"):
        return plain
    conf = RABBITMQ_TLS_CONF
    conf += "listeners.tcp = none\n" if tls.get("disableNonTLSListeners") else plain
    if tls.get("caSecretName"):
        conf += (
            f"ssl_options.cacertfile = {RABBITMQ_CA_DIR}/ca.crt\nssl_options.verify = verify_peer\n"
            f"management.ssl.cacertfile = {RABBITMQ_CA_DIR}/ca.crt\n"
        )
    return conf


def _rabbitmq_tls_volumes(tls: Manifest) -> list[tuple[Manifest, str]]:
    """spec.tls's Secrets and where they are mounted. The operator projects tls.crt and tls.key
    of secretName and ca.crt of caSecretName into one directory; the lab's kubelet reproduces no
    projected volume, so the CA comes in a directory of its own (RABBITMQ_CA_DIR)."""
    pair = [{"key": k, "path": k} for k in ("tls.crt", "tls.key")]
    volumes = [(_secret_volume("rabbitmq-tls", tls["secretName"], pair), f"{RABBITMQ_TLS_DIR}/")]
    if tls.get("caSecretName"):
        ca = _secret_volume("rabbitmq-tls-ca", tls["caSecretName"], [{"key": "ca.crt", "path": "ca.crt"}])
        volumes.append((ca, f"{RABBITMQ_CA_DIR}/"))
    return volumes


def _secret_volume(name: str, secret: str, items: list[Manifest]) -> Manifest:
    return {"name": name, "secret": {"secretName": secret, "items": items, "defaultMode": 0o400}}


def _rabbitmq_service_ports(tls: Manifest) -> tuple[tuple[str, int], ...]:
    ports = RABBITMQ_PORTS[False]
    if not tls.get("secretName"):
        return ports
    if tls.get("disableNonTLSListeners"):
        ports = tuple(p for p in ports if p[0] not in RABBITMQ_PLAIN_ONLY)
    return ports + RABBITMQ_TLS_PORTS


def rabbitmq(resource: Manifest) -> StandIn:
    name, spec, namespace = resource["metadata"]["name"], resource["spec"], resource["metadata"]["namespace"]
    tls = spec.get("tls") or {}
    tls_only = bool(tls.get("secretName") and tls.get("disableNonTLSListeners"))
    user, password = f"default_user_{secrets.token_hex(6)}", secrets.token_urlsafe(24)
    host = f"{name}.{resource['metadata']['namespace']}.svc"
    default_user = {
        "username": user,
        "password": password,
        "host": host,
        "port": "5671" if tls.get("secretName") else "5672",  # default_user_secret.go updatePorts
        "provider": "rabbitmq",
        "type": "rabbitmq",
        "connection_string": f"amqp://{user}:{password}@{host}:5672/",
        "default_user.conf": f"default_user = {user}\ndefault_pass = {password}\n",
    }
    additional = (spec.get("rabbitmq") or {}).get("additionalConfig", "")
    conf = (
        f"{rabbitmq_listeners(tls)}loopback_users = none\n"
        f"default_user = {user}\ndefault_pass = {password}\ndefault_user_tags.administrator = true\n{additional}"
    )
    config = f"{name}-server-conf"
    mounts = [
        {"name": "persistence", "mountPath": "/var/lib/rabbitmq"},
        {"name": "config", "mountPath": "/etc/rabbitmq/operator", "readOnly": True},
    ]
    volumes = [
        {"name": "persistence", "persistentVolumeClaim": {"claimName": f"persistence-{name}-server-0"}},
        {"name": "config", "configMap": {"name": config}},
    ]
    for volume, path in _rabbitmq_tls_volumes(tls) if tls.get("secretName") else ():
        mounts.append({"name": volume["name"], "mountPath": path, "readOnly": True})
        volumes.append(volume)
    container = {
        "name": "rabbitmq",
        "image": STANDIN_IMAGES["RabbitmqCluster"],
        "command": ["/bin/sh", "-c", _RABBITMQ_START],
        "volumeMounts": mounts,
        # The management API, which the rabbit-init Jobs use, listens last.
        "readinessProbe": {"tcpSocket": {"port": 15671 if tls_only else 15672}, "periodSeconds": 2},
        "resources": spec.get("resources") or {},
    }
    # The RabbitMQ Cluster Operator's labels on its pods (internal/metadata/label.go).
    labels = {"app.kubernetes.io/name": name, "app.kubernetes.io/component": "rabbitmq",
              "app.kubernetes.io/part-of": "rabbitmq"}  # fmt: skip
    template = _template(labels, container, volumes, spec)
    selector = {"app.kubernetes.io/name": name}
    ports = {False: _rabbitmq_service_ports(tls), True: RABBITMQ_PORTS[True]}
    return StandIn(
        "RabbitmqCluster",
        name,
        f"{name}-server-0",
        template,
        tuple(
            _service(pattern.format(name=name), namespace, headless, ports[headless], selector)
            for pattern, headless in RABBITMQ_SERVICES
        ),
        {f"{name}-default-user": default_user},
        {config: {"rabbitmq.conf": conf, "enabled_plugins": "[rabbitmq_management].\n"}},
    )


def operator_pod(containers: list[Manifest], volumes: list[Manifest], resource: Manifest, **extra: Any) -> Manifest:
    """The spec of a pod an operator runs for `resource` (its spec), as root (Debian's servers and clients
    here), placed where the resource says; `extra` adds fields (initContainers, restartPolicy)."""
    spec: Manifest = {
        "containers": containers,
        "volumes": volumes,
        "securityContext": {"runAsUser": 0},
        "enableServiceLinks": False,
        "automountServiceAccountToken": False,
        **extra,
    }
    for key in ("nodeSelector", "tolerations"):
        if resource.get(key):
            spec[key] = resource[key]
    return spec


def _template(labels: dict[str, str], container: Manifest, volumes: list[Manifest], resource: Manifest) -> Manifest:
    """The pod the operator's StatefulSet runs, placed where the resource says."""
    spec = operator_pod([container], volumes, resource)
    affinity = resource.get("affinity") or {}
    # mariadb-operator's `antiAffinityEnabled` spreads Galera's pods; a stand-in is one pod.
    if affinity.get("nodeAffinity"):
        spec["affinity"] = {"nodeAffinity": affinity["nodeAffinity"]}
    return {"metadata": {"labels": labels}, "spec": spec}


STAND_INS = {"MariaDB": mariadb, "RabbitmqCluster": rabbitmq}
