"""The password check, precise both ways: a table of common forms of literal passwords it
must find, and of harmless lines it must leave alone; and command lines, which it reads too."""

from __future__ import annotations

from typing import Any

import pytest

from components.tables.roles import Topology

from .builders import container, control_plane, run_policy, stack_config

STAGING = stack_config(Topology.POD_PER_SERVICE)
ALLOWED = "allowed: a Secret, mounted or referenced with env[].valueFrom.secretKeyRef"
WHO = "Deployment openstack/keystone-api: container 'keystone-api'"


def config_map(data: dict[str, str]) -> dict[str, Any]:
    metadata = {"name": "etc", "namespace": "openstack"}
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": metadata, "data": data}


def literal(name: str) -> str:
    return f"a literal value for {name!r}"


URL = "a URL with a password"
TRUE_POSITIVES = [
    ("export OS_PASSWORD=hunter2", 1, literal("OS_PASSWORD")),
    ("MYSQL_PWD=hunter2 mysql -u root nova", 1, literal("MYSQL_PWD")),
    ("DB_PW=hunter2 ./migrate", 1, literal("DB_PW")),
    ("cd /tmp && export DB_PASSWORD=hunter2 && ./migrate", 1, literal("DB_PASSWORD")),
    ("declare -x RABBITMQ_PASSWORD=hunter2", 1, literal("RABBITMQ_PASSWORD")),
    ("local ADMIN_PASSWORD=hunter2", 1, literal("ADMIN_PASSWORD")),
    ("readonly DB_PASSWORD='hunter2'", 1, literal("DB_PASSWORD")),
    ("[database]\nconnection = mysql+pymysql://nova:p%40ss@mariadb/nova", 2, URL),  # percent-encoded
    ("backend_url = redis://:hunter2@redis:6379/0", 1, URL),  # no user
    ("transport_url = amqp://nova:pa$$w0rd@rabbitmq:5672/", 1, URL),  # a $ inside
    ("keystone-manage bootstrap --bootstrap-password hunter2", 1, literal("--bootstrap-password")),
    ("openstack --os-password=hunter2 server list", 1, literal("--os-password")),
    ("users:\n  - name: nova\n  - password: hunter2", 3, literal("password")),  # a YAML list item
    ("adminPw: hunter2", 1, literal("adminPw")),
    ("[keymgr]\nencryption_key = 0123456789abcdef", 2, literal("encryption_key")),
    ("dashboard: http://grafana:3000/d/openstack?auth_token=hunter2", 1, literal("auth_token")),
]
TRUE_NEGATIVES = [
    "[cors]\nallow_credentials = true",
    "[service_user]\nsend_service_user_token = true",
    "automountServiceAccountToken: false",
    "use_token = True",
    "require_secret: off",
    "bypass = internal",  # pass, but no password's
    "proxy_pass: http://keystone-api:5000",  # nginx upstreams
    "fastcgi_pass = 127.0.0.1:9000",
    "uwsgi_pass = unix:/run/uwsgi/keystone.sock",
    "password = getpass.getpass()",  # code that reads one
    "token = session.get_token()",
    "secret: {secretName: keystone-fernet}",  # a volume in YAML flow style
    "private_key = /etc/ssl/private/tls.key",  # the path to a key file
]


@pytest.mark.parametrize(("text", "line", "what"), TRUE_POSITIVES)
def test_literal_passwords_are_found(text: str, line: int, what: str) -> None:
    found = run_policy("no-plaintext-passwords", config_map({"script": text}), STAGING)
    assert found == [f"ConfigMap openstack/etc: data['script'] line {line} holds {what}; {ALLOWED}"]
    assert not any(secret in found[0] for secret in ("hunter2", "p%40ss", "pa$$w0rd", "0123456789"))


@pytest.mark.parametrize("text", TRUE_NEGATIVES)
def test_harmless_lines_pass(text: str) -> None:
    assert run_policy("no-plaintext-passwords", config_map({"keystone.conf": text}), STAGING) == []


@pytest.mark.parametrize("data", [{"use-token": "true"}, {"ssh-private-key": "/etc/ssh/ssh_host_ed25519_key"}])
def test_a_key_named_like_a_password_holding_no_password_passes(data: dict[str, str]) -> None:
    assert run_policy("no-plaintext-passwords", config_map(data), STAGING) == []


def _api(**fields: Any) -> dict[str, Any]:
    deployment = control_plane()
    container(deployment).update(fields)
    return deployment


def test_passwords_on_command_lines() -> None:
    deployment = _api(
        command=["sh", "-c", "export OS_PASSWORD=hunter2\nopenstack token issue"],
        args=["--os-username", "admin", "--os-password", "hunter2", "--bootstrap-password=hunter2"],
    )
    path = "spec.template.spec.containers[0]"
    assert run_policy("no-plaintext-passwords", deployment, STAGING) == [
        f"{WHO}: {path}.command[2] line 1 holds a literal value for 'OS_PASSWORD'; {ALLOWED}",
        f"{WHO}: {path}.args[4] holds a literal value for '--bootstrap-password'; {ALLOWED}",
        f"{WHO}: {path}.args[3] holds a literal value for '--os-password'; {ALLOWED}",
    ]


def test_passwords_in_environment_values_in_more_forms() -> None:
    deployment = _api(
        env=[
            {"name": "MYSQL_PWD", "value": "hunter2"},
            {"name": "CACHE_URL", "value": "redis://:hunter2@redis:6379/0"},
            {"name": "SEND_TOKEN", "value": "true"},  # a switch, not a token
            {"name": "PWD", "value": "/var/lib/keystone"},  # the working directory
        ]
    )
    path = "spec.template.spec.containers[0].env"
    assert run_policy("no-plaintext-passwords", deployment, STAGING) == [
        f"{WHO}: {path}[0].value (MYSQL_PWD) is a literal password; {ALLOWED}",
        f"{WHO}: {path}[1].value (CACHE_URL) holds a password in a literal value; {ALLOWED}",
    ]


# Already negative before; kept so by the new shell, flag and name rules.
GUARDS = [
    "[security_compliance]\npassword_expires_days = 90",
    "PWD=/tmp\nOLDPWD=/root",
    "conn = connect(user=user, password=password)",
    "conn = connect(user=args.user, password=args.password, token=conf['token'])",
    "keystone-manage credential_setup --password-file /run/secrets/pw",
    "# password = hunter2",  # a comment
    "connection = mysql+pymysql://nova:%(password)s@mariadb/nova",
    'if [ "$OS_PASSWORD" == "" ]; then exit 1; fi',
    "openstack --os-password $OS_PASSWORD --os-token=${TOKEN} server list",
]


@pytest.mark.parametrize("text", GUARDS)
def test_what_only_mentions_passwords_still_passes(text: str) -> None:
    assert run_policy("no-plaintext-passwords", config_map({"script.sh": text}), STAGING) == []
    assert run_policy("no-plaintext-passwords", _api(command=["sh", "-c", text]), STAGING) == []
