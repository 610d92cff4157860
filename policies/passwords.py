"""No passwords in ConfigMaps or in literal environment values.

ConfigMaps are readable by anyone who may read the namespace's configuration and are
printed by `kubectl describe`; env literals sit in the pod spec. Passwords belong in
Secrets, mounted or referenced with env[].valueFrom.secretKeyRef. Messages name the key
and line, never the value.
"""

from __future__ import annotations

import base64
import binascii
import re

from policies.k8s import K8sObject, get, items, mapping
from policies.podspec import pod_templates
from policies.settings import PackSettings

SECRET_MARK = "[secret]"  # how the offline plan shows a Pulumi secret value
ALLOWED = "a Secret, mounted or referenced with env[].valueFrom.secretKeyRef"
# Names of things that hold a password (env vars, config keys, ConfigMap keys): by their
# last word, so password_hash_algorithm, secretName or PASSWORD_FILE are not taken for one.
SECRET_NAME = re.compile(
    r"(pass(word|wd|phrase)?|secret([_-]?key)?|token|credentials?|private[_-]?key|api[_-]?key)$", re.I
)
# scheme://user:password@ with literal user and password (not {placeholders} or $VARS).
CREDENTIAL_URL = re.compile(r"[a-z][a-z0-9+.-]*://[^\s:/@{}$%<>]+:[^\s@/{}$%<>]+@", re.I)
# key = value / key: value / "key": "value" on one line, as INI, YAML, JSON and env files write it.
ASSIGNMENT = re.compile(r"""^\s*["']?([\w.-]+)["']?\s*[=:]\s*(.*?)\s*,?\s*$""")
# "key": "value" anywhere in a line, for JSON written on one line.
JSON_PAIR = re.compile(r'"([\w.-]+)"\s*:\s*("[^"]*")')
# Values that read a password from elsewhere rather than being one.
REFERENCE_VALUE = re.compile(r"""^["']?(\$|\{\{|%\(|<)|os\.environ|getenv|environ\.get|environ\[""")
EMPTY_VALUES = ("", '""', "''", "~", "null", "None")


def names_a_secret(name: str) -> bool:
    return bool(SECRET_NAME.search(name))


def _problems(text: str) -> list[tuple[int, str]]:
    """(line number, what) for each password-like literal in a text; never the value."""
    found = []
    for number, line in enumerate(text.splitlines(), start=1):
        if SECRET_MARK in line:
            found.append((number, "a Pulumi secret value"))
        elif CREDENTIAL_URL.search(line):
            found.append((number, "a URL with a password"))
        else:
            pairs = [m.groups() for m in JSON_PAIR.finditer(line)]
            if not pairs and (match := ASSIGNMENT.match(line)):
                pairs = [match.groups()]
            literal = [key for key, value in pairs if names_a_secret(key) and _literal(value)]
            found += [(number, f"a literal value for {key!r}") for key in literal]
    return found


def _literal(value: str) -> bool:
    return value not in EMPTY_VALUES and not REFERENCE_VALUE.search(value)


def _decoded(value: object) -> str | None:
    try:
        return base64.b64decode(str(value), validate=True).decode()
    except (binascii.Error, UnicodeDecodeError):
        return None  # truly binary content holds no text password


def config_map_passwords(obj: K8sObject) -> list[str]:
    found = []
    for section in ("data", "binaryData"):
        entries = mapping(obj.props.get(section))
        for key in entries:
            text = entries[key] if section == "data" else _decoded(entries[key])
            if not isinstance(text, str):
                continue
            where = f"{obj.describe()}: {section}[{key!r}]"
            if names_a_secret(str(key)) and text.strip():
                found.append(f"{where} is named like a password and holds a value; allowed: {ALLOWED}")
            found += [f"{where} line {line} holds {what}; allowed: {ALLOWED}" for line, what in _problems(text)]
    return found


def env_passwords(obj: K8sObject) -> list[str]:
    found = []
    for container in (c for pod in pod_templates(obj) for c in pod.containers()):
        for index, variable in enumerate(items(container.spec.get("env"))):
            value, name = get(variable, "value"), str(get(variable, "name") or "")
            if not isinstance(value, str) or not value:
                continue
            where = f"{obj.describe()}: {container.subject}: {container.field('env', index, 'value')} ({name})"
            if names_a_secret(name):
                found.append(f"{where} is a literal password; allowed: {ALLOWED}")
            elif SECRET_MARK in value or CREDENTIAL_URL.search(value):
                found.append(f"{where} holds a password in a literal value; allowed: {ALLOWED}")
    return found


def no_plaintext_passwords(obj: K8sObject, settings: PackSettings) -> list[str]:
    if obj.kind == "ConfigMap" and obj.group == "core":
        return config_map_passwords(obj)
    return env_passwords(obj)
