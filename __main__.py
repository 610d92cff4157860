"""The Pulumi program: read the stack's settings, validate them, build the cloud."""

import json
import re

import pulumi
from pulumi.runtime.config import CONFIG, get_config_env

from components.cloud import build
from components.settings import Settings, SettingsError

_JSON_LIKE = re.compile(r"^(\{.*\}|\[.*\]|true|false|-?\d+)$", re.DOTALL)


def stack_settings() -> dict[str, object]:
    """Every `openstack:` key of the stack. Objects arrive as JSON text; '1.30' stays a string."""
    config = {**get_config_env(), **CONFIG.get()}
    raw = {}
    for key, value in config.items():
        namespace, _, name = key.partition(":")
        if namespace == "openstack":
            raw[name] = json.loads(value) if isinstance(value, str) and _JSON_LIKE.match(value) else value
    return raw


try:
    settings = Settings.parse(stack_settings())
except SettingsError as error:
    # Raised before any resource is declared: nothing is half-deployed.
    raise pulumi.RunError(str(error)) from None

build(settings)
pulumi.export("namespace", settings.namespace)
pulumi.export("hypervisorIsolation", settings.hypervisor_isolation.value)
pulumi.export("region", settings.region)
