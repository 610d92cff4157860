"""The bootstrap chain every service shares: db-init, rabbit-init and Keystone registration.

A service declares databases, messaging and catalog entries; this module turns them into
the standard Jobs (openstack-helm's names) with what each waits for. The service adds its
own steps (db-sync and friends) that name these Jobs in their `needs`.
"""

from __future__ import annotations

from typing import TypedDict

from components.mechanism import oslo
from components.mechanism.spec import ServiceSpec, Step
from components.mechanism.workload import Manifest, env, secret_env
from components.settings.model import Settings

TOOLBOX = "kolla-toolbox"
ADMIN_SECRET = "keystone-admin"
MARIADB_ROOT_SECRET = "mariadb-root"
# Created by the RabbitMQ Cluster Operator for the RabbitmqCluster named "rabbitmq".
RABBITMQ_ADMIN_SECRET = "rabbitmq-default-user"
# Registering with Keystone needs its API serving and the admin user that bootstrap creates.
KEYSTONE_READY = ("keystone-api", "keystone-bootstrap")


class _StepCommon(TypedDict):
    """The Step arguments the three Keystone registration Jobs share."""

    image: str
    scripts: tuple[str, ...]


def passwords_secret(service: str) -> str:
    return f"{service}-passwords"


def client_env(settings: Settings, user: str, secret: str, key: str, project: str) -> tuple[Manifest, ...]:
    """OS_* variables for openstacksdk/openstackclient; the password comes from a Secret."""
    return (
        env("OS_AUTH_URL", oslo.keystone_url(settings) + "/v3"),
        env("OS_USERNAME", user),
        secret_env("OS_PASSWORD", secret, key),
        env("OS_PROJECT_NAME", project),
        env("OS_USER_DOMAIN_NAME", "Default"),
        env("OS_PROJECT_DOMAIN_NAME", "Default"),
        env("OS_REGION_NAME", settings.region),
        env("OS_INTERFACE", "internal"),
        # openstacksdk's CA file, and requests' for keystoneauth sessions of their own (ks_register's
        # password check): these Jobs call the internal APIs only.
        *(env(name, path) for name, path in oslo.ca_file(settings, "OS_CACERT").items()),
        *(env(name, path) for name, path in oslo.ca_file(settings, "REQUESTS_CA_BUNDLE").items()),
    )


def admin_env(settings: Settings) -> tuple[Manifest, ...]:
    return client_env(settings, "admin", ADMIN_SECRET, "password", "admin")


def db_sync(service: str, image: str, command: tuple[str, ...], config_files: tuple[str, ...], *after: str) -> Step:
    """The schema migration: runs once the database exists (and whatever else `after` names)."""
    return Step(
        name=f"{service}-db-sync",
        image=image,
        command=command,
        needs=(f"{service}-db-init", *after),
        config_files=config_files,
    )


def db_purge(service: str, image: str, command: tuple[str, ...], config_files: tuple[str, ...], schedule: str) -> Step:
    """`<service>-db-purge` (openstack-helm's cron-job-*-db-purge): a CronJob on the migrated schema."""
    return Step(
        name=f"{service}-db-purge",
        image=image,
        command=command,
        needs=(f"{service}-db-sync",),
        config_files=config_files,
        schedule=schedule,
    )


def standard_steps(spec: ServiceSpec, settings: Settings) -> tuple[Step, ...]:
    name = spec.name
    steps: list[Step] = []
    if spec.databases:
        steps.append(
            Step(
                name=f"{name}-db-init",
                image=TOOLBOX,
                command=("python3", "/scripts/db_init.py"),
                needs=("mariadb",),
                scripts=("db_init.py",),
                env=(
                    # host:port in one value, as every other client of the database gets it.
                    env("DB_ADDRESS", oslo.database_address(settings)),
                    env("DB_ADMIN_USER", "root"),
                    secret_env("DB_ADMIN_PASSWORD", MARIADB_ROOT_SECRET, "password"),
                    env("DB_NAMES", ",".join(spec.databases)),
                    env("DB_USER", name),
                    secret_env("DB_PASSWORD", passwords_secret(name), "database"),
                    # Under internal TLS: connect verifying the server, and the user must use TLS.
                    *(env(name, path) for name, path in oslo.ca_file(settings, "DB_CA_FILE").items()),
                ),
            )
        )
    if spec.messaging:
        steps.append(
            Step(
                name=f"{name}-rabbit-init",
                image=TOOLBOX,
                command=("python3", "/scripts/rabbit_init.py"),
                needs=("rabbitmq",),
                scripts=("rabbit_init.py",),
                env=(
                    env("RABBIT_API", oslo.rabbitmq_management_url(settings)),
                    # The CA the script verifies the management API with (https under internal TLS).
                    *(env(name, path) for name, path in oslo.ca_file(settings, "RABBIT_CA_FILE").items()),
                    secret_env("RABBIT_ADMIN_USER", RABBITMQ_ADMIN_SECRET, "username"),
                    secret_env("RABBIT_ADMIN_PASSWORD", RABBITMQ_ADMIN_SECRET, "password"),
                    env("RABBIT_USER", name),
                    secret_env("RABBIT_PASSWORD", passwords_secret(name), "rabbitmq"),
                    env("RABBIT_VHOST", name),
                ),
            )
        )
    if spec.catalog:
        steps += _keystone_steps(spec, settings)
    return tuple(steps)


def _keystone_steps(spec: ServiceSpec, settings: Settings) -> list[Step]:
    name = spec.name
    register = ("python3", "/scripts/ks_register.py")
    endpoints = ";".join(
        f"{entry.catalog_name},{entry.service_type},"
        f"{oslo.public_url(settings, entry.catalog_name, entry.path)},"
        f"{oslo.internal_url(settings, entry.process, entry.port, entry.path)},"
        f"{oslo.internal_url(settings, entry.process, entry.port, entry.path) if entry.admin else ''}"
        for entry in spec.catalog
    )
    common: _StepCommon = {"image": TOOLBOX, "scripts": ("ks_register.py",)}
    return [
        Step(
            name=f"{name}-ks-user",
            command=(*register, "user"),
            needs=KEYSTONE_READY,
            env=(
                *admin_env(settings),
                env("SERVICE_USER", name),
                secret_env("SERVICE_PASSWORD", passwords_secret(name), "keystone"),
                env("SERVICE_PROJECT", oslo.SERVICE_PROJECT),
                env("SERVICE_ROLES", ",".join(spec.keystone_roles)),
            ),
            **common,
        ),
        Step(
            name=f"{name}-ks-service",
            command=(*register, "service"),
            needs=KEYSTONE_READY,
            env=(*admin_env(settings), env("CATALOG", endpoints)),
            **common,
        ),
        Step(
            name=f"{name}-ks-endpoints",
            command=(*register, "endpoints"),
            needs=(f"{name}-ks-service",),
            env=(*admin_env(settings), env("CATALOG", endpoints)),
            **common,
        ),
    ]
