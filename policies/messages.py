"""One wording for every violation: the resource, who (pod, container, volume), the field
with its value, what would be allowed, and why."""

from __future__ import annotations

from typing import Any

from policies.k8s import K8sObject, show


def not_allowed(obj: K8sObject, subject: str, field: str, value: Any, allowed: str, why: str = "") -> str:
    text = f"{obj.describe()}: {subject}: {field}={show(value)} is not allowed; allowed: {allowed}"
    return f"{text} ({why})" if why else text


def missing(obj: K8sObject, subject: str, field: str, required: str, why: str = "") -> str:
    text = f"{obj.describe()}: {subject}: {field} is not set; required: {required}"
    return f"{text} ({why})" if why else text


def forbidden(obj: K8sObject, subject: str, field: str, allowed: str, why: str = "") -> str:
    """For a field whose presence, not value, is the problem (a volume source, say)."""
    text = f"{obj.describe()}: {subject}: {field} is not allowed; allowed: {allowed}"
    return f"{text} ({why})" if why else text
