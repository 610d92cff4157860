"""Every generated secret of the cloud, made on first use and kept as Pulumi secrets.

Passwords come from pulumi-random (the state holds them encrypted); they reach the
cluster only inside Kubernetes Secrets. No default passwords exist anywhere, and
nothing is generated that no service uses.
"""

from __future__ import annotations

from functools import cache

import pulumi
import pulumi_random as random


class Credentials(pulumi.ComponentResource):
    def __init__(self, name: str, opts: pulumi.ResourceOptions | None = None):
        super().__init__("openstack:infra:Credentials", name, None, opts)
        self.register_outputs({})

    @cache  # noqa: B019  # one generated value per purpose, for the life of the program
    def password(self, purpose: str) -> pulumi.Output[str]:
        # Alphanumeric only: these land in URLs (transport_url, connection) and in INI files.
        generated = random.RandomPassword(purpose, length=32, special=False, opts=pulumi.ResourceOptions(parent=self))
        return pulumi.Output.secret(generated.result)

    @cache  # noqa: B019
    def fernet_key(self, purpose: str) -> pulumi.Output[str]:
        """32 random bytes in URL-safe base64: the form of a Fernet key."""
        generated = random.RandomBytes(purpose, length=32, opts=pulumi.ResourceOptions(parent=self))
        return pulumi.Output.secret(generated.base64.apply(lambda b: b.replace("+", "-").replace("/", "_")))

    def database(self, service: str) -> pulumi.Output[str]:
        return self.password(f"{service}-db")

    def messaging(self, service: str) -> pulumi.Output[str]:
        return self.password(f"{service}-rabbitmq")

    def keystone_user(self, service: str) -> pulumi.Output[str]:
        return self.password(f"{service}-keystone")

    def shared(self, name: str) -> pulumi.Output[str]:
        """A cloud-wide secret by name, e.g. 'keystone-admin' or 'fernet-key-0'."""
        if name.startswith(("fernet-key-", "credential-key-")):
            return self.fernet_key(name)
        return self.password(name)
