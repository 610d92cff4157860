"""Config sections every OpenStack service shares, and the in-cluster addresses they point at.

Only options that exist in the targeted release are used; tests/real checks every rendered
file against the real projects' option definitions.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from components.mechanism import internal_tls
from components.mechanism.workload import Manifest, env, secret_env
from components.settings.model import Settings

Section = dict[str, Any]

KEYSTONE = "keystone"  # Keystone's public host name (endpoints.hosts.keystone)
KEYSTONE_PORT = 5000
MARIADB = "mariadb"  # the MariaDB resource; mariadb-operator names its Services after it
MEMCACHED = "memcached"  # the StatefulSet and its headless Service
RABBITMQ = "rabbitmq"  # the RabbitmqCluster; the operator names its Service after it
MARIADB_PORT = 3306
RABBITMQ_PORT = 5672
RABBITMQ_MANAGEMENT_PORT = 15672
# The RabbitMQ Cluster Operator's TLS listeners with spec.tls (amqps and management-tls of its
# Service, internal/resource/service.go of v2.21.1); with disableNonTLSListeners the only ones.
RABBITMQ_TLS_PORT = 5671
RABBITMQ_MANAGEMENT_TLS_PORT = 15671
MEMCACHED_PORT = 11211
OVSDB_PORT = 6640
SERVICE_PROJECT = "service"
# The key of a service's secrets (RenderContext.secrets) its keystonemiddleware encrypts cached tokens with.
MEMCACHE_KEY = "memcache"


def internal_url(settings: Settings, k8s_service: str, port: int, path: str = "") -> str:
    """An API's URL inside the cluster: https where the APIs serve TLS (tls.internal)."""
    scheme = "https" if settings.tls.internal_enabled else "http"
    return f"{scheme}://{settings.service_host(k8s_service)}:{port}{path}"


def rabbitmq_port(settings: Settings) -> int:
    """RabbitMQ's AMQP port: amqps where tls.internal names a CA (the plain listener is off)."""
    return RABBITMQ_TLS_PORT if settings.tls.internal_enabled else RABBITMQ_PORT


def rabbitmq_management_port(settings: Settings) -> int:
    return RABBITMQ_MANAGEMENT_TLS_PORT if settings.tls.internal_enabled else RABBITMQ_MANAGEMENT_PORT


def rabbitmq_management_url(settings: Settings) -> str:
    """RabbitMQ's management API (the rabbit-init Jobs'): https with internal TLS, as AMQP."""
    return internal_url(settings, RABBITMQ, rabbitmq_management_port(settings))


def ca_file(settings: Settings, option: str = "cafile") -> Section:
    """`option` set to the internal CA's certificate, which verifies every internal API; nothing
    without internal TLS. kolla-ansible gives `openstack_cacert` to the same options."""
    return {option: internal_tls.CA_FILE} if settings.tls.internal_enabled else {}


def public_url(settings: Settings, catalog_name: str, path: str = "") -> str:
    return f"{settings.endpoints.scheme}://{settings.public_host(catalog_name)}{path}"


def keystone_url(settings: Settings) -> str:
    return internal_url(settings, "keystone-api", KEYSTONE_PORT)


def memcached_servers(settings: Settings) -> list[str]:
    """Every memcached server by its own name; clients spread keys over them by hash.

    Behind one ClusterIP each request would reach any replica, so a token or session cached
    through one would be missed through the others. The StatefulSet's pods are named in DNS
    through its headless Service: memcached-0.memcached.<ns>.svc.<domain>, ...
    """
    service = settings.service_host(MEMCACHED)
    return [f"{pod}.{service}:{MEMCACHED_PORT}" for pod in memcached_pods(settings)]


def memcached_pods(settings: Settings) -> list[str]:
    """The StatefulSet's pods, by name."""
    return [f"{MEMCACHED}-{i}" for i in range(settings.replicas_of(MEMCACHED))]


def database_service(settings: Settings) -> str:
    """The Service every database client connects to.

    mariadb-operator's `mariadb` Service selects every MariaDB pod and is meant for a
    standalone server only. Under HA (Galera) it sends writes to one node, "to avoid
    contention", through `mariadb-primary`, which it moves when the primary changes
    (docs/high_availability.md).
    """
    return f"{MARIADB}-primary" if settings.ha else MARIADB


def database_address(settings: Settings) -> str:
    return f"{settings.service_host(database_service(settings))}:{MARIADB_PORT}"


def database_url(settings: Settings, user: str, password: str, database: str) -> str:
    """oslo.db's connection; under internal TLS with `ssl_ca`, as kolla-ansible's with
    database_enable_tls_internal (`?ssl_ca={{ openstack_cacert }}`).

    SQLAlchemy's pymysql dialect turns `ssl_ca` into PyMySQL's `ssl={"ca": ...}`
    (dialects/mysql/mysqldb.py `create_connect_args`), and PyMySQL builds from that dict a
    context that requires the certificate and checks the host name (`check_hostname` defaults
    to true when a CA is given: connections.py `_create_ssl_ctx`): the CA alone verifies both.
    The host is a Service name the server's certificate carries (components/infrastructure/mariadb_tls.py).
    """
    tls = f"&ssl_ca={internal_tls.CA_FILE}" if settings.tls.internal_enabled else ""
    return f"mysql+pymysql://{user}:{password}@{database_address(settings)}/{database}?charset=utf8{tls}"


def transport_url(settings: Settings, user: str, password: str, vhost: str) -> str:
    return f"rabbit://{user}:{password}@{settings.service_host(RABBITMQ)}:{rabbitmq_port(settings)}/{vhost}"


# The node's own address (the downward API's status.hostIP), for the pods on the host network.
NODE_IP: Manifest = {"name": "NODE_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.hostIP"}}}


def option_env(section: str, option: str, value: str) -> Manifest:
    """An option given as `OS_<SECTION>__<OPTION>`, which oslo.config reads before the files.

    For what only the pod knows (its node's address): one rendered file then serves every pod,
    and the command line keeps the one `--config-file` that rootwrap filters expect.
    """
    return env(f"OS_{section.upper()}__{option.upper()}", value)


def option_secret_env(section: str, option: str, secret: str, key: str) -> Manifest:
    """An option given as `OS_<SECTION>__<OPTION>` from a key of a Secret the user made: a credential
    the program never holds, so no rendered file can carry it (option_env)."""
    return secret_env(f"OS_{section.upper()}__{option.upper()}", secret, key)


def node_address_env(*options: tuple[str, str]) -> tuple[Manifest, ...]:
    """NODE_IP, and each (section, option) set to it."""
    return (NODE_IP, *(option_env(section, option, "$(NODE_IP)") for section, option in options))


def logging() -> Section:
    # Containers log to stderr; the cluster's log collector takes it from there.
    return {"debug": False, "use_stderr": True}


def database(settings: Settings, user: str, password: str, name: str) -> Section:
    return {
        "connection": database_url(settings, user, password, name),
        "max_retries": -1,  # wait for the database forever instead of crash-looping
        "connection_recycle_time": 600,
    }


def messaging_tls(settings: Settings) -> Section:
    """[oslo_messaging_rabbit]'s TLS, as kolla-ansible's om_enable_rabbitmq_tls: `ssl` and the CA.

    With `ssl_ca_file` oslo.messaging asks kombu for CERT_REQUIRED against that file
    (impl_rabbit.py `_fetch_ssl_params`). It passes no server_hostname, so py-amqp leaves
    check_hostname off (amqp/transport.py `_wrap_socket_sni`): the chain is verified, the name
    is not. Only RabbitMQ's pods hold a key of the internal CA whose certificate names RabbitMQ,
    but every API holds one of that CA too (README, "TLS inside the cluster").
    """
    if not settings.tls.internal_enabled:
        return {}
    return {"ssl": True, "ssl_ca_file": internal_tls.CA_FILE}


def messaging(settings: Settings, user: str, password: str) -> dict[str, Section]:
    """transport_url in [DEFAULT] plus quorum queues, which survive a RabbitMQ node loss."""
    return {
        "DEFAULT": {"transport_url": transport_url(settings, user, password, user)},
        "oslo_messaging_rabbit": {
            "rabbit_quorum_queue": True,
            "rabbit_transient_quorum_queue": True,
            **messaging_tls(settings),
        },
        "oslo_messaging_notifications": {"driver": "noop"},
    }


def keystone_auth(settings: Settings, user: str, password: str) -> Section:
    """keystoneauth's password plugin options only: this service's user in the service project.

    For sections that register no adapter options (no region_name), such as [service_user] and
    nova's [cinder]; service_credentials adds the region for those that do.
    """
    return {
        "auth_type": "password",
        "auth_url": keystone_url(settings),
        "username": user,
        "password": password,
        "user_domain_name": "Default",
        "project_name": SERVICE_PROJECT,
        "project_domain_name": "Default",
        **ca_file(settings),
    }


def service_credentials(settings: Settings, user: str, password: str) -> Section:
    """keystoneauth password options for calling another service as this service's user."""
    return {**keystone_auth(settings, user, password), "region_name": settings.region}


def memcached_tls(settings: Settings, prefix: str = "") -> Section:
    """A memcached client's TLS where tls.internal names a CA: `<prefix>tls_enabled` and the CA.

    oslo.cache's [cache] (no prefix) and keystonemiddleware's [keystone_authtoken] (`memcache_`)
    build from these `ssl.create_default_context(cafile=...)` (oslo_cache/core.py
    `_build_cache_config`; keystonemiddleware/auth_token/__init__.py `_token_cache_factory`),
    which checks the chain and the host name, and hand it to python-binary-memcached, whose
    `wrap_socket` is given the server's host as listed (bmemcached/protocol.py): each pod's name,
    which memcached's certificate carries (components/infrastructure/memcached.py). With TLS both take that client
    instead of python-memcached, which has no TLS (oslo_cache/backends/memcache_pool.py,
    keystonemiddleware/auth_token/_cache.py `_MemcacheClientPool`); Kolla's openstack-base image
    installs it (python-binary-memcached, docker/openstack-base/Dockerfile.j2). Neither
    kolla-ansible nor openstack-helm sets these options.
    """
    if not settings.tls.internal_enabled:
        return {}
    return {f"{prefix}tls_enabled": True, f"{prefix}tls_cafile": internal_tls.CA_FILE}


def keystone_authtoken(settings: Settings, user: str, secrets: Mapping[str, str]) -> Section:
    """keystonemiddleware: validate tokens as `user`, caching them in memcached encrypted.

    memcached has no authentication and python-memcached unpickles what it reads: with ENCRYPT
    every cached token is encrypted and authenticated with the service's own key, so what
    another client writes there is refused, not loaded. On internal TLS the connections are TLS
    too; only the advanced pool (keystonemiddleware's default, written out because TLS depends
    on it) honours `memcache_tls_enabled`: the other one (`_CachePool`) opens python-memcached
    connections in clear whatever the option says (auth_token/_cache.py).
    """
    tls = memcached_tls(settings, "memcache_")
    return {
        **service_credentials(settings, user, secrets["keystone"]),
        "www_authenticate_uri": f"{settings.endpoints.scheme}://{settings.public_host(KEYSTONE)}",
        "memcached_servers": memcached_servers(settings),
        "memcache_security_strategy": "ENCRYPT",
        "memcache_secret_key": secrets[MEMCACHE_KEY],
        **({"memcache_use_advanced_pool": True, **tls} if tls else {}),
        "service_token_roles_required": True,
    }


def service_user(settings: Settings, user: str, password: str) -> Section:
    """[service_user]: send a service token along with the user's, so long operations survive expiry.

    Only authentication options: [service_user] has no region (keystone is found by auth_url).
    """
    return {"send_service_user_token": True, **keystone_auth(settings, user, password)}


def cache(settings: Settings) -> Section:
    """oslo.cache through its pooled memcached backend, which honours TLS (memcached_tls): of the
    memcached backends oslo.cache 4.1 passes `[cache] tls_*` to this one, dogpile's pymemcache and
    bmemcache ones, and refuses it for dogpile.cache.memcached (oslo_cache/core.py)."""
    backend = {"enabled": True, "backend": "oslo_cache.memcache_pool", "memcache_servers": memcached_servers(settings)}
    return {**backend, **memcached_tls(settings)}


def lock_path(path: str) -> Section:
    return {"lock_path": path}


def merge(*parts: dict[str, Section]) -> dict[str, Section]:
    """Merge section maps; a later part adds options to a section, never silently replaces one."""
    merged: dict[str, Section] = {}
    for part in parts:
        for section, options in part.items():
            target = merged.setdefault(section, {})
            clash = set(target) & set(options)
            if clash:
                raise ValueError(f"[{section}] set twice: {', '.join(sorted(clash))}")
            target.update(options)
    return merged


def uwsgi_ini(
    module: str, port: int, processes: int = 2, chunked_input_limit: int | None = None, tls: bool = False
) -> dict[str, Section]:
    """A uWSGI server for a WSGI API, listening on all addresses of the pod on `port`.

    Kolla installs uWSGI from PyPI into the service's virtualenv: Python is built in, so
    no plugin is loaded. The workers speak HTTP themselves (`http-socket`) rather than
    behind kolla-ansible's `http` router process: the Service already spreads connections
    over pods, and one process less per pod.

    `socket-timeout` is kolla-ansible's 30 s: uWSGI's default of 4 s is also how long an
    application waits for the next part of a chunked body (`uwsgi.chunked_read`), and a
    client that pauses longer between parts (Nova uploading a snapshot while the node is
    busy) gets a 500. `chunked_input_limit` is the largest part such an application
    accepts; uWSGI's default is 1 MiB.

    With `tls` the workers speak HTTPS (`https-socket`: address, certificate, key, as
    kolla-ansible's `https` with `kolla_enable_tls_backend`; the images' uWSGI is built with
    OpenSSL) from the API's mounted Secret. uWSGI reads the pair only when it starts, so
    `touch-reload` watches the certificate: when cert-manager renews it and the kubelet swaps
    the Secret's files, the master reloads gracefully (it keeps the listening socket, so
    connections wait in its backlog instead of being refused) and serves the new pair.
    """
    limit = {} if chunked_input_limit is None else {"chunked-input-limit": chunked_input_limit}
    listen = (
        {"https-socket": f"0.0.0.0:{port},{internal_tls.SERVER_CERT},{internal_tls.SERVER_KEY}",
         "touch-reload": internal_tls.SERVER_CERT}
        if tls
        else {"http-socket": f"0.0.0.0:{port}"}
    )  # fmt: skip
    return {
        "uwsgi": {
            **listen,
            "socket-timeout": 30,
            **limit,
            "module": module,
            "processes": processes,
            "threads": 1,
            "master": True,
            "lazy-apps": True,
            "die-on-term": True,
            "exit-on-reload": False,
            "add-header": "Connection: close",
            "buffer-size": 65535,
            "enable-threads": True,
            "thunder-lock": True,
        }
    }
