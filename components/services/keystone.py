"""Keystone: the identity service every other service registers with.

Chain: keystone-db-init → (fernet/credential key checks) → keystone-db-sync →
keystone-bootstrap (admin user, region, identity endpoints; needs only the database)
and keystone-api (needs the schema and memcached). The CronJobs keystone-fernet-rotate and
keystone-credential-rotate rotate the keys in their Secrets (openstack-helm's names).
"""

from __future__ import annotations

import datetime

from components.mechanism import oslo
from components.mechanism.bootstrap import db_sync
from components.mechanism.inifile import render_ini
from components.mechanism.internal_tls import serves_tls
from components.mechanism.spec import KUBE_API, ApiAccess, Process, PublicHost, RenderContext, ServiceSpec, Step
from components.mechanism.workload import Mount, Probe, env, secret_env, secret_volume
from components.settings import cron
from components.settings.model import Settings

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
# Whole directories, never subPath: the kubelet updates a Secret volume in place when the Secret
# changes (atomically, through its ..data link), and a subPath mount would keep the old keys.
KEY_MOUNTS = (Mount("fernet-keys", FERNET_DIR), Mount("credential-keys", CREDENTIAL_DIR))
FERNET_SECRET, CREDENTIAL_SECRET = "keystone-fernet-keys", "keystone-credential-keys"
TOKEN_EXPIRATION = 3600  # keystone's default [token] expiration, in seconds
# keystone's default [token] allow_expired_window (two days): services with a service token
# (service_user in nova.conf, cinder.conf) may use an expired user token for that much longer.
ALLOW_EXPIRED_WINDOW = 48 * 3600
# The kubelet's default sync brings a changed Secret into pods in about a minute; a run
# started again within this time of the last rotation (a retry, a Job started by hand) does
# not rotate a second time (components/scripts/keystone_key_rotate.py).
MIN_SECONDS_BETWEEN_ROTATIONS = 1800
SERVICE_ACCOUNT_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"  # where the kubelet mounts the token


def max_active_keys(settings: Settings) -> int:
    """[fernet_tokens] max_active_keys for the rotation schedule (keystone doc admin/fernet-token-faq).

    A token must stay readable for its lifetime plus allow_expired_window, and each rotation
    pushes its key one place further out: `max_active_keys = (token_expiration +
    allow_expired_window) / rotation_frequency + 2` (the staged key and a buffer). The
    schedule's most rotations in any such window (components/settings/cron.py) is that quotient,
    rounded up, also for schedules that do not rotate at even intervals.
    """
    window = datetime.timedelta(seconds=TOKEN_EXPIRATION + ALLOW_EXPIRED_WINDOW)
    return cron.most_runs_within(cron.parse(settings.key_rotation.fernet_schedule), window) + 2


def render(ctx: RenderContext) -> dict[str, str]:
    settings, secrets = ctx.settings, ctx.secrets
    conf = {
        "DEFAULT": oslo.logging(),
        "database": oslo.database(settings, "keystone", secrets["database"], "keystone"),
        "cache": oslo.cache(settings),
        "token": {
            "provider": "fernet",
            "expiration": TOKEN_EXPIRATION,
            "allow_expired_window": ALLOW_EXPIRED_WINDOW,
        },
        "fernet_tokens": {"key_repository": FERNET_DIR, "max_active_keys": max_active_keys(settings)},
        # MFA receipts are Fernet tokens too; named here rather than left to the default path. In
        # one repository with the tokens, the tokens' max_active_keys holds (cli.py FernetSetup).
        "fernet_receipts": {"key_repository": FERNET_DIR},
        "credential": {"key_repository": CREDENTIAL_DIR},
        "oslo_middleware": {"enable_proxy_headers_parsing": True},
    }
    return {
        "keystone.conf": render_ini(conf),
        "keystone-uwsgi.ini": render_ini(
            oslo.uwsgi_ini(
                "keystone.wsgi.api:application", oslo.KEYSTONE_PORT, tls=serves_tls(settings, "keystone-api")
            )
        ),
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


def _rotation(
    name: str, command: str, secret: str, directory: str, schedule: str, after: str, *, token_keys: bool = False
) -> Step:
    """A CronJob that rotates the keys in `secret` (openstack-helm's cron-job-*-rotate.yaml).

    Its pod has the one ServiceAccount token of the cloud's pods, and that may read and
    replace this Secret and nothing else. The repository keystone.conf names is an emptyDir
    under /etc/keystone, as in openstack-helm (etckeystone), which the script fills from the
    Secret and writes back. `token_keys` mounts the Fernet keys too, read-only: keystone-manage
    credential_rotate and credential_migrate load Keystone's backends, and with them the token
    provider, which refuses to start without its key repository.
    """
    fernet = [(v, m) for v, m in zip(KEY_VOLUMES, KEY_MOUNTS, strict=True) if m.path == FERNET_DIR]
    return Step(
        name=name,
        image="keystone",
        command=("python3", "/scripts/keystone_key_rotate.py", command, secret),
        needs=(after,),
        config_files=("keystone.conf",),
        scripts=("keystone_key_rotate.py", "key_repository_check.py", KUBE_API),
        env=(
            env("KEYSTONE_CONFIG", f"{CONFIG_DIR}/keystone.conf"),
            env("KEY_REPOSITORY", directory),
            env("SERVICE_ACCOUNT_DIR", SERVICE_ACCOUNT_DIR),
            env("MIN_SECONDS_BETWEEN_ROTATIONS", str(MIN_SECONDS_BETWEEN_ROTATIONS)),
        ),
        extra_volumes=({"name": "keystone-dir", "emptyDir": {}}, *(v for v, _ in fernet if token_keys)),
        extra_mounts=(Mount("keystone-dir", CONFIG_DIR, read_only=False), *(m for _, m in fernet if token_keys)),
        schedule=schedule,
        # PUT replaces the Secret (with the resourceVersion it read); no list, create or patch.
        api_access=(ApiAccess("secrets", (secret,), ("get", "update")),),
    )


def key_rotation(settings: Settings) -> tuple[Step, ...]:
    rotation = settings.key_rotation
    if not rotation.enabled:
        return ()
    return (
        # Tokens need no database: only a repository that passed keystone-fernet-setup's check.
        _rotation(
            "keystone-fernet-rotate",
            "fernet_rotate",
            FERNET_SECRET,
            FERNET_DIR,
            rotation.fernet_schedule,
            "keystone-fernet-setup",
        ),
        # credential_rotate and credential_migrate read and rewrite the credential table.
        _rotation(
            "keystone-credential-rotate",
            "credential_rotate",
            CREDENTIAL_SECRET,
            CREDENTIAL_DIR,
            rotation.credential_schedule,
            "keystone-db-sync",
            token_keys=True,
        ),
    )


def keystone(settings: Settings) -> ServiceSpec:
    public = oslo.public_url(settings, PUBLIC_HOST)
    internal = oslo.keystone_url(settings)
    return ServiceSpec(
        name="keystone",
        config_dir=CONFIG_DIR,
        render=render,
        public_hosts=(PublicHost(PUBLIC_HOST, "keystone-api", oslo.KEYSTONE_PORT),),
        extra_secrets={
            "keystone-admin": {"password": "keystone-admin"},
            # A staged key 0 and a primary key 1, as `keystone-manage fernet_setup` lays out.
            FERNET_SECRET: {"0": "fernet-key-0", "1": "fernet-key-1"},
            CREDENTIAL_SECRET: {"0": "credential-key-0", "1": "credential-key-1"},
        },
        # The first keys are Pulumi's; the rotation CronJobs own them from then on, so a later
        # `pulumi up` must not put the first keys back (with rotation off as well: it may have run).
        cluster_owned_data=(FERNET_SECRET, CREDENTIAL_SECRET),
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
            *key_rotation(settings),
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
