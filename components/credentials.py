"""Every generated secret of the cloud, made once and kept as Pulumi secrets.

Passwords come from pulumi-random (the state holds them encrypted); they reach the
cluster only inside Kubernetes Secrets. No default passwords exist anywhere.
"""

from __future__ import annotations

import pulumi
import pulumi_random as random


def _password(name: str, parent: pulumi.Resource) -> pulumi.Output[str]:
    # Alphanumeric only: these land in URLs (transport_url, connection) and in INI files.
    generated = random.RandomPassword(name, length=32, special=False, opts=pulumi.ResourceOptions(parent=parent))
    return pulumi.Output.secret(generated.result)


def _fernet_key(name: str, parent: pulumi.Resource) -> pulumi.Output[str]:
    # A Fernet key is 32 random bytes in URL-safe base64.
    generated = random.RandomBytes(name, length=32, opts=pulumi.ResourceOptions(parent=parent))
    return pulumi.Output.secret(generated.base64.apply(lambda b: b.replace("+", "-").replace("/", "_")))


class Credentials(pulumi.ComponentResource):
    """Per-service database, messaging and Keystone passwords, plus cloud-wide secrets."""

    def __init__(self, name: str, services: tuple[str, ...], opts: pulumi.ResourceOptions | None = None):
        super().__init__("openstack:infra:Credentials", name, None, opts)
        self.mariadb_root = _password("mariadb-root", self)
        self.keystone_admin = _password("keystone-admin", self)
        self.metadata_proxy_secret = _password("metadata-proxy-shared-secret", self)
        self.horizon_secret_key = _password("horizon-secret-key", self)
        self.database = {s: _password(f"{s}-db", self) for s in services}
        self.messaging = {s: _password(f"{s}-rabbitmq", self) for s in services}
        self.keystone_user = {s: _password(f"{s}-keystone", self) for s in services}
        # Two keys each: one primary and one staged, as `keystone-manage fernet_setup` lays out.
        self.fernet_keys = [_fernet_key(f"keystone-fernet-{i}", self) for i in range(2)]
        self.credential_keys = [_fernet_key(f"keystone-credential-{i}", self) for i in range(2)]
        self.register_outputs({})
