"""The Pulumi program: read the stack's settings, validate them, build the cloud."""

import pulumi
from pulumi.runtime.config import CONFIG, get_config_env, get_config_secret_keys_env, is_config_secret

from components.cloud.build import build
from components.cloud.outputs import export_outputs
from components.cloud.stack_config import settings_from_config
from components.infrastructure.credentials import Credentials
from components.settings.model import SettingsError

# Every key of the stack, as the engine hands them over: text, objects as JSON text.
config = {**get_config_env(), **CONFIG.get()}
secret = {key for key in config if is_config_secret(key)} | set(get_config_secret_keys_env())
try:
    settings = settings_from_config(config, secret)
except SettingsError as error:
    # Raised before any resource is declared: nothing is half-deployed.
    raise pulumi.RunError(str(error)) from None

credentials = Credentials("credentials")
build(settings, credentials)
export_outputs(settings, credentials, cloud=pulumi.get_stack())
