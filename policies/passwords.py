"""No passwords in ConfigMaps, literal environment values or command lines.

ConfigMaps are readable by anyone who may read the namespace's configuration and are
printed by `kubectl describe`; env literals and command lines sit in the pod spec and in
`ps`. Passwords belong in Secrets, mounted or referenced with env[].valueFrom.secretKeyRef.
What reads as a password is in secret_text.py. Messages name the key and line, never the value.
"""

from __future__ import annotations

import base64
import binascii

from policies.k8s import K8sObject, get, items, mapping
from policies.podspec import ContainerRef, pod_templates
from policies.secret_text import SECRET_MARK, flag_values, literal, names_a_secret, problems, url_password
from policies.settings import PackSettings

ALLOWED = "a Secret, mounted or referenced with env[].valueFrom.secretKeyRef"


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
            if names_a_secret(str(key)) and literal(text.strip()):
                found.append(f"{where} is named like a password and holds a value; allowed: {ALLOWED}")
            found += [f"{where} line {line} holds {what}; allowed: {ALLOWED}" for line, what in problems(text)]
    return found


def _env(obj: K8sObject, container: ContainerRef) -> list[str]:
    found = []
    for index, variable in enumerate(items(container.spec.get("env"))):
        value, name = get(variable, "value"), str(get(variable, "name") or "")
        if not isinstance(value, str) or not value:
            continue
        where = f"{obj.describe()}: {container.subject}: {container.field('env', index, 'value')} ({name})"
        if names_a_secret(name) and literal(value, name):
            found.append(f"{where} is a literal password; allowed: {ALLOWED}")
        elif SECRET_MARK in value or url_password(value) or problems(value):
            found.append(f"{where} holds a password in a literal value; allowed: {ALLOWED}")
    return found


def _command_line(obj: K8sObject, container: ContainerRef) -> list[str]:
    """command and args: each argument as text (a shell script may be one), and flags whose
    value is the next argument (["--password", "..."])."""
    found = []
    for field in ("command", "args"):
        arguments = items(container.spec.get(field))
        for index, argument in enumerate(arguments):
            if not isinstance(argument, str):
                continue
            where = f"{obj.describe()}: {container.subject}: {container.field(field, index)}"
            lines = "\n" in argument.strip()
            for line, what in problems(argument):
                found.append(f"{where}{f' line {line}' if lines else ''} holds {what}; allowed: {ALLOWED}")
        for index, flag in flag_values(arguments):
            where = f"{obj.describe()}: {container.subject}: {container.field(field, index)}"
            found.append(f"{where} holds a literal value for {flag!r}; allowed: {ALLOWED}")
    return found


def pod_passwords(obj: K8sObject) -> list[str]:
    found = []
    for container in (c for pod in pod_templates(obj) for c in pod.containers()):
        found += _env(obj, container) + _command_line(obj, container)
    return found


def no_plaintext_passwords(obj: K8sObject, settings: PackSettings) -> list[str]:
    if obj.kind == "ConfigMap" and obj.group == "core":
        return config_map_passwords(obj)
    return pod_passwords(obj)
