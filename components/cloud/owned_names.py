"""The Secret names of the stack's namespace that the program, cert-manager for it, or an operator it
deploys writes, and the check that no setting names one of them as the user's own Secret.

A setting that names a Secret of the user (a Ceph keyring, S3 keys, a CA) is one the program reads, or
with Rook fills in. Naming one of the program's own there would hand the program's data to the wrong
reader (S3 keys read from the database's root password), or, with Rook, let the keys Job overwrite it.

The names come from three places: the deploy graph's Secrets (every service's config, passwords and
keys, known before any resource), the certificates' Secrets, given as the patterns their names follow
(`<api>-internal-tls`, the CAs' `-trust` copies and their rotations' numbered roots), and the Secrets
the operators derive from the names the program gives them. tests/test_owned_names.py holds this to
every plan: each Secret it creates, and each Certificate's Secret, in the stack's namespace is named here.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator

from components.cloud.graph import cloud_graph
from components.infrastructure import ceph, mariadb_tls, rabbitmq
from components.mechanism import certificates
from components.mechanism.bootstrap import MARIADB_ROOT_SECRET
from components.nodes import libvirt_tls
from components.settings.ceph import CephClient
from components.settings.gateway import CA_BUNDLE, INTERNAL_CA, LIBVIRT_CA, PUBLIC_CA
from components.settings.model import Settings
from components.settings.problems import Problem, problem

# Certificates' Secrets (cert-manager writes them), by the pattern of their names.
CERTIFICATE_SECRETS: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(rf"{re.escape(INTERNAL_CA)}(-\d+)?(-trust(-.+)?)?"), "the internal CA (tls.internal)"),
    (re.compile(rf"{re.escape(PUBLIC_CA)}(-trust)?"), "the public CA (gateway)"),
    (re.compile(rf"{re.escape(LIBVIRT_CA)}(-trust)?"), "libvirt's CA (tls.libvirt)"),
    (re.compile(r".+-internal-tls"), "an internal TLS server certificate"),
)
NAMED_SECRETS = {
    MARIADB_ROOT_SECRET: "MariaDB's root password",
    CA_BUNDLE: "the internal CA bundle every client trusts",
    certificates.PUBLIC_TLS: "the public certificate the gateway serves",
    mariadb_tls.CLIENT_SECRET: "MariaDB's client certificate",
    libvirt_tls.PROXY_CERT: "the console proxy's VeNCrypt certificate",
    ceph.ROOK_CONF_SECRET: "the ceph.conf the Rook keys Job writes",
    # The RabbitMQ cluster-operator's, derived from the RabbitmqCluster's name.
    f"{rabbitmq.RABBITMQ}-default-user": "the RabbitMQ operator's default user",
    f"{rabbitmq.RABBITMQ}-erlang-cookie": "the RabbitMQ operator's Erlang cookie",
}


def user_secrets(settings: Settings) -> Iterator[tuple[tuple[str | int, ...], str]]:
    """Every setting that names a Secret of the user's, in the stack's namespace: (its path, the name)."""
    if settings.ceph is not None:
        for use, client in _ceph_clients(settings).items():
            yield ("ceph", "clients", use, "keyringSecret"), client.keyring_secret
    s3 = settings.backup.storage.s3
    if s3 is not None:
        yield ("backup", "storage", "s3", "credentials"), s3.credentials
    bucket = settings.cinder.backup_s3
    if bucket is not None:
        yield ("cinder", "backupS3", "credentials"), bucket.credentials
        if bucket.ca_secret is not None:
            yield ("cinder", "backupS3", "caSecret"), bucket.ca_secret


def owners(settings: Settings) -> Callable[[str], str | None]:
    """A Secret name of the stack's namespace → what writes it, if the program owns it."""
    graph = {n.name: f"{n.owner}'s {n.kind}" for n in cloud_graph(settings).order() if n.kind == "Secret"}
    named = {**graph, **NAMED_SECRETS}

    def owner_of(name: str) -> str | None:
        if name in named:
            return named[name]
        return next((what for pattern, what in CERTIFICATE_SECRETS if pattern.fullmatch(name)), None)

    return owner_of


def name_problems(settings: Settings) -> Iterator[Problem]:
    """A user's Secret named as one of the program's, or one Secret named for two different things."""
    seen: dict[str, tuple[tuple[str | int, ...], ...]] = {}
    owner_of = owners(settings)
    for path, name in user_secrets(settings):
        owner = owner_of(name)
        if owner is not None:
            yield problem(path, name, f"is the name of {owner}, which the program writes: name a Secret of your own")
        seen.setdefault(name, ())
        seen[name] += (path,)
    for name, paths in seen.items():
        shared = [p for p in paths if p[0] == "ceph"]
        if len(shared) > 1 and _distinct_users(settings, shared):
            where = " and ".join(".".join(map(str, p)) for p in shared)
            yield problem(shared[-1], name, f"{where} name one Secret for two cephx users: its key 'keyring' holds one")


def _ceph_clients(settings: Settings) -> dict[str, CephClient]:
    """ceph.clients by their keys in the stack file (glance, cinder, cinderBackup, nova)."""
    assert settings.ceph is not None
    clients = settings.ceph.clients
    found = {(info.alias or name): getattr(clients, name) for name, info in type(clients).model_fields.items()}
    return {key: client for key, client in found.items() if client is not None}


def _distinct_users(settings: Settings, paths: list[tuple[str | int, ...]]) -> bool:
    clients = _ceph_clients(settings)
    return len({clients[str(path[2])].user for path in paths}) > 1
