"""A stack's configuration as the Pulumi engine hands it to the program, turned into Settings.

The one way settings are read: the program (__main__.py) passes what the engine gave it, and
the offline plan (tools/runtime.py) passes the stack file in the same form. This module is the
one full reader: the model's checks and those it cannot make itself (the names the map settings
use, which need every service's spec: components/cloud/setting_names.py). That form is the
engine's: every key `<namespace>:<name>`; a scalar as its text exactly as the stack file
writes it (`region: "2024"` and `region: 2024` both arrive as '2024'); a mapping or a list
as JSON text (pulumi/sdk/go/common/resource/config/value.go); secrets decrypted to the same.
So a setting that the model declares a scalar stays text and the model decides what it
means, and a structured one is JSON: nothing guesses a type from how a value looks.
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Callable, Collection, Mapping
from types import UnionType
from typing import Any, Union, get_args, get_origin

from pulumi_kubernetes.provider import ProviderArgs
from pydantic import BaseModel

from components.cloud.owned_names import name_problems
from components.cloud.setting_names import unknown_names
from components.settings.model import Settings, SettingsCheck
from components.settings.problems import PROJECT, SECRET_MARK, Problem, SettingsError


def _provider_keys(args: type) -> frozenset[str]:
    """The config keys a provider's default instance reads: its ProviderArgs' Pulumi names."""
    properties = (v for v in vars(args).values() if isinstance(v, property))
    return frozenset(getattr(p.fget, "_pulumi_name", "") for p in properties) - {""}


# The project is named `openstack`, which is also the config namespace of the pulumi-openstack provider
# (its keys `openstack:authUrl`, `openstack:cloud`, ...). A user who adds flavors, networks or images to the
# cloud with that provider in this program sets those keys in the same stack file, so they are that
# provider's and not unknown settings here; the one name both read, `region`, means the cloud's region to
# both. The project keeps its name: a new one would change every resource's URN and every stack file's keys
# (`pulumi stack rename` can rewrite the state's URNs, but every user's stack files and CI would move too),
# for a collision that this rule removes. tests/test_stack_config.py holds the list to pulumi-openstack's own.
OPENSTACK_PROVIDER_KEYS = frozenset({
    "allowReauth", "applicationCredentialId", "applicationCredentialName", "applicationCredentialSecret",
    "authUrl", "cacertFile", "cert", "cloud", "defaultDomain", "delayedAuth", "disableNoCacheHeader", "domainId",
    "domainName", "enableLogging", "endpointOverrides", "endpointType", "insecure", "key", "maxRetries",
    "password", "projectDomainId", "projectDomainName", "region", "swauth", "systemScope", "tenantId",
    "tenantName", "token", "userDomainId", "userDomainName", "userId", "userName",
})  # fmt: skip

SETTING_NAMES = frozenset(info.alias or n for n, info in Settings.model_fields.items())
# The namespaces a stack may set: this program's own settings, and what the engine and the
# providers the program uses read. pulumi-random takes no configuration.
NAMESPACES: dict[str, tuple[str, frozenset[str] | None]] = {
    PROJECT: ("this program's settings", SETTING_NAMES),
    "kubernetes": ("the pulumi-kubernetes provider", _provider_keys(ProviderArgs)),
    "pulumi": ("the Pulumi engine", None),  # the engine's own keys (e.g. disable-default-providers)
    "random": ("the pulumi-random provider, which takes no configuration", frozenset()),
}


def _structured(name: str) -> bool:
    """Whether the model declares this setting an object or a list (JSON on the wire)."""
    field = next((f for n, f in Settings.model_fields.items() if (f.alias or n) == name), None)
    if field is None:
        return False
    # An optional object (`gateway: Gateway | None`, `ceph: Ceph | None`) is an object when given.
    union = get_origin(field.annotation) in (Union, UnionType)
    kinds = [a for a in get_args(field.annotation) if a is not type(None)] if union else [field.annotation]
    return any(
        get_origin(kind) in (dict, tuple, list) or (isinstance(kind, type) and issubclass(kind, BaseModel))
        for kind in kinds
    )


def _decode(name: str, text: str) -> Any:
    if not _structured(name):
        return text
    try:
        return json.loads(text)
    except ValueError:
        return text  # the model reports that it is no object


def _shown(key: str, value: Any, secret: Collection[str]) -> Any:
    return SECRET_MARK if key in secret else value


def _namespace_problems(key: str, value: Any, secret: Collection[str]) -> list[Problem]:
    namespace, colon, name = key.partition(":")
    shown = _shown(key, value, secret)
    if not colon:
        return [Problem(key, shown, f"keys are '<namespace>:<name>', e.g. '{PROJECT}:{key}'")]
    if namespace not in NAMESPACES:
        allowed = ", ".join(f"{ns} ({what})" for ns, (what, _) in NAMESPACES.items())
        hint = _did_you_mean(namespace, NAMESPACES, lambda close: f"{close}:{name}")
        return [Problem(key, shown, f"unknown config namespace '{namespace}'; allowed: {allowed}{hint}")]
    what, names = NAMESPACES[namespace]
    if namespace == PROJECT or names is None or name in names:
        return []  # this program's own keys are checked by the model
    allowed = ", ".join(sorted(names)) or "none"
    hint = _did_you_mean(name, names, lambda close: f"{namespace}:{close}")
    return [Problem(key, shown, f"not a setting of {what}; allowed: {allowed}{hint}")]


def _did_you_mean(given: str, known: Collection[str], spelled: Callable[[str], str]) -> str:
    close = difflib.get_close_matches(given, list(known), n=1)
    return f"; did you mean '{spelled(close[0])}'?" if close else ""


# What Settings.parse cannot check by itself: the modules that declare those names import the model.
MORE_CHECKS: tuple[SettingsCheck, ...] = (unknown_names, name_problems)


def provider_key(name: str) -> bool:
    """A key of the project's namespace that is pulumi-openstack's, not a setting of this program."""
    return name in OPENSTACK_PROVIDER_KEYS and name not in SETTING_NAMES


def parse_settings(raw: Mapping[str, Any], secret: Collection[str] = ()) -> Settings:
    """Settings from the `openstack:` keys, every check made; SettingsError lists every problem."""
    return Settings.parse(raw, secret=secret, more_checks=MORE_CHECKS)


def settings_from_config(config: Mapping[str, str], secret: Collection[str] = ()) -> Settings:
    """Settings from the engine's config map (`<namespace>:<name>` → text); SettingsError lists
    every problem: keys of unknown namespaces and every invalid setting, at once.

    `secret` names the keys whose values are secrets; problems show them as [secret].
    """
    problems: list[Problem] = []
    raw: dict[str, Any] = {}
    for key, value in config.items():
        problems += _namespace_problems(key, value, secret)
        namespace, _, name = key.partition(":")
        if namespace == PROJECT and not provider_key(name):
            raw[name] = _decode(name, value) if isinstance(value, str) else value
    hidden = {key.partition(":")[2] for key in secret if key.startswith(f"{PROJECT}:")}
    try:
        settings = parse_settings(raw, secret=hidden)
    except SettingsError as error:
        problems += error.found
    if problems:
        raise SettingsError(problems)
    return settings
