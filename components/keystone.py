"""Keystone: the identity service every other service registers with.

Chain: keystone-db-init → (fernet/credential key checks) → keystone-db-sync →
keystone-bootstrap (admin user, region, identity endpoints; needs only the database)
and keystone-api (needs the schema and memcached).
"""

from __future__ import annotations

from components import oslo
from components.bootstrap import db_sync
from components.inifile import render_ini
from components.settings import Settings
from components.spec import Process, RenderContext, ServiceSpec, Step
from components.workload import Mount, Probe, env, secret_env, secret_volume

CONFIG_DIR = "/etc/keystone"
# Keystone's public host: registered by keystone-bootstrap, not through a catalog entry.
PUBLIC_HOST = oslo.KEYSTONE
FERNET_DIR = f"{CONFIG_DIR}/fernet-keys"
CREDENTIAL_DIR = f"{CONFIG_DIR}/credential-keys"
MANAGE = ("keystone-manage", "--config-file", f"{CONFIG_DIR}/keystone.conf")
KEY_VOLUMES = (
    secret_volume("fernet-keys", "keystone-fernet-keys"),
    secret_volume("credential-keys", "keystone-credential-keys"),
)
KEY_MOUNTS = (Mount("fernet-keys", FERNET_DIR), Mount("credential-keys", CREDENTIAL_DIR))


def render(ctx: RenderContext) -> dict[str, str]:
    settings, secrets = ctx.settings, ctx.secrets
    conf = {
        "DEFAULT": oslo.logging(),
        "database": oslo.database(settings, "keystone", secrets["database"], "keystone"),
        "cache": oslo.cache(settings),
        "token": {"provider": "fernet", "expiration": 3600},
        "fernet_tokens": {"key_repository": FERNET_DIR, "max_active_keys": 3},
        # MFA receipts are Fernet tokens too; named here rather than left to the default path.
        "fernet_receipts": {"key_repository": FERNET_DIR},
        "credential": {"key_repository": CREDENTIAL_DIR},
        "oslo_middleware": {"enable_proxy_headers_parsing": True},
    }
    return {
        "keystone.conf": render_ini(conf),
        "keystone-uwsgi.ini": render_ini(oslo.uwsgi_ini("keystone.wsgi.api:application", oslo.KEYSTONE_PORT)),
    }


def _key_check(name: str, volume: str, directory: str) -> Step:
    return Step(
        name=name,
        image="keystone",
        command=("python3", "/scripts/key_repository_check.py"),
        needs=(),
        scripts=("key_repository_check.py",),
        env=(env("KEY_REPOSITORY", directory),),
        extra_volumes=tuple(v for v in KEY_VOLUMES if v["name"] == volume),
        extra_mounts=tuple(m for m in KEY_MOUNTS if m.volume == volume),
    )


def keystone(settings: Settings) -> ServiceSpec:
    public = oslo.public_url(settings, PUBLIC_HOST)
    internal = oslo.keystone_url(settings)
    return ServiceSpec(
        name="keystone",
        config_dir=CONFIG_DIR,
        render=render,
        databases=("keystone",),
        public_hosts=(PUBLIC_HOST,),
        extra_secrets={
            "keystone-admin": {"password": "keystone-admin"},
            # A staged key 0 and a primary key 1, as `keystone-manage fernet_setup` lays out.
            "keystone-fernet-keys": {"0": "fernet-key-0", "1": "fernet-key-1"},
            "keystone-credential-keys": {"0": "credential-key-0", "1": "credential-key-1"},
        },
        steps=(
            _key_check("keystone-fernet-setup", "fernet-keys", FERNET_DIR),
            _key_check("keystone-credential-setup", "credential-keys", CREDENTIAL_DIR),
            db_sync(
                "keystone",
                "keystone",
                (*MANAGE, "db_sync"),
                ("keystone.conf",),
                "keystone-fernet-setup",
                "keystone-credential-setup",
            ),
            Step(
                # keystone-manage bootstrap writes straight to the database and reads its
                # arguments from OS_BOOTSTRAP_* variables, so the password stays off argv.
                name="keystone-bootstrap",
                image="keystone",
                command=(*MANAGE, "bootstrap"),
                needs=("keystone-db-sync",),
                config_files=("keystone.conf",),
                # keystone-manage loads the token provider, which refuses to start without keys.
                extra_volumes=KEY_VOLUMES,
                extra_mounts=KEY_MOUNTS,
                env=(
                    secret_env("OS_BOOTSTRAP_PASSWORD", "keystone-admin", "password"),
                    env("OS_BOOTSTRAP_USERNAME", "admin"),
                    env("OS_BOOTSTRAP_PROJECT_NAME", "admin"),
                    env("OS_BOOTSTRAP_ROLE_NAME", "admin"),
                    env("OS_BOOTSTRAP_SERVICE_NAME", "keystone"),
                    env("OS_BOOTSTRAP_REGION_ID", settings.region),
                    env("OS_BOOTSTRAP_PUBLIC_URL", public),
                    env("OS_BOOTSTRAP_INTERNAL_URL", internal),
                    env("OS_BOOTSTRAP_ADMIN_URL", internal),
                ),
            ),
        ),
        processes=(
            Process(
                name="keystone-api",
                image="keystone",
                command=("uwsgi", "--ini", f"{CONFIG_DIR}/keystone-uwsgi.ini"),
                # The schema must exist; tokens are cached in memcached from the first request.
                needs=("keystone-db-sync", "memcached"),
                config_files=("keystone.conf", "keystone-uwsgi.ini"),
                port=oslo.KEYSTONE_PORT,
                probe=Probe(oslo.KEYSTONE_PORT, "/v3"),
                extra_volumes=KEY_VOLUMES,
                extra_mounts=KEY_MOUNTS,
            ),
        ),
    )
