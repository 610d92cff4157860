"""What a user reads after `pulumi up`: where the cloud answers, and how to log in to it.

    pulumi stack output authUrl
    pulumi stack output --show-secrets cloudsYaml > clouds.yaml
    openstack --os-cloud <stack> server list

The admin user is the one `keystone-manage bootstrap` creates (components/services/keystone.py):
`admin` in project `admin`, both in the domain `Default`, which bootstrap makes. Its password and
every text that holds it are secret outputs, encrypted in the state like the password itself.
clouds.yaml is laid out as openstacksdk reads it (its config/loader), the public interface as a
user outside the cluster reaches it, as kolla-ansible's generated clouds.yaml does.
"""

from __future__ import annotations

from typing import Any

import pulumi
import yaml

from components.infrastructure.credentials import Credentials
from components.mechanism import certificates, oslo
from components.mechanism.bootstrap import ADMIN_SECRET
from components.services.keystone import PUBLIC_HOST
from components.settings.model import Settings

ADMIN_USER = ADMIN_PROJECT = "admin"  # keystone-manage bootstrap's OS_BOOTSTRAP_USERNAME and _PROJECT_NAME
DEFAULT_DOMAIN = "Default"  # the domain bootstrap creates and puts them in


def auth_url(settings: Settings) -> str:
    """Keystone's public endpoint, as bootstrap registers it in the catalog."""
    return oslo.public_url(settings, PUBLIC_HOST)


def ca_secret(settings: Settings) -> str | None:
    """`<namespace>/<Secret>` whose ca.crt a client must trust, when the program made the public CA."""
    public = settings.tls.public  # None without a gateway: no public certificate at all
    return f"{settings.namespace}/{certificates.CA}" if public is not None and public.self_signed else None


def clouds_yaml(settings: Settings, cloud: str, password: str) -> str:
    auth = {
        "auth_url": auth_url(settings),
        "username": ADMIN_USER,
        "password": password,
        "project_name": ADMIN_PROJECT,
        "user_domain_name": DEFAULT_DOMAIN,
        "project_domain_name": DEFAULT_DOMAIN,
    }
    entry: dict[str, Any] = {
        "auth": auth,
        "region_name": settings.region,
        "interface": "public",
        "identity_api_version": 3,
    }
    return yaml.safe_dump({"clouds": {cloud: entry}}, sort_keys=False)


def export_outputs(settings: Settings, credentials: Credentials, cloud: str) -> None:
    """The stack's outputs; `cloud` names the cloud in clouds.yaml (the stack's name)."""
    password = credentials.shared(ADMIN_SECRET)
    pulumi.export("namespace", settings.namespace)
    pulumi.export("hypervisorIsolation", settings.hypervisor_isolation.value)
    pulumi.export("region", settings.region)
    # The release this stack deploys: what the next change of `release` upgrades from (`upgrade.from`;
    # tools/release_change.py refuses a change without it against an earlier plan).
    pulumi.export("release", settings.release)
    pulumi.export("authUrl", auth_url(settings))
    pulumi.export("caSecret", ca_secret(settings))
    admin = {
        "username": ADMIN_USER,
        "projectName": ADMIN_PROJECT,
        "userDomainName": DEFAULT_DOMAIN,
        "projectDomainName": DEFAULT_DOMAIN,
    }
    pulumi.export("adminCredentials", pulumi.Output.secret(password.apply(lambda p: {**admin, "password": p})))
    pulumi.export("cloudsYaml", pulumi.Output.secret(password.apply(lambda p: clouds_yaml(settings, cloud, p))))
