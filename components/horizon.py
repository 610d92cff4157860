"""Horizon: the dashboard, with sessions in memcached and Keystone's internal endpoint."""

from __future__ import annotations

import pulumi

from components import oslo
from components.api import uwsgi_file, wsgi_api
from components.openstack_service import BuildContext, OpenStackService
from components.settings import Settings
from components.spec import Process, RenderContext, ServiceSpec
from components.workload import Mount, env

CONFIG_DIR = "/etc/openstack-dashboard"
PORT = 8080
STATIC = "/var/lib/openstack-dashboard/static"


def local_settings(ctx: RenderContext) -> str:
    """Django settings: Python, so every value is written with repr() and nothing is templated."""
    settings = ctx.settings
    values = {
        "DEBUG": False,
        "ALLOWED_HOSTS": [settings.public_host("horizon"), settings.service_host("horizon")],
        "SECRET_KEY": ctx.secrets["horizon-secret-key"],
        "OPENSTACK_KEYSTONE_URL": oslo.keystone_url(settings) + "/v3",
        "OPENSTACK_ENDPOINT_TYPE": "internalURL",
        "OPENSTACK_KEYSTONE_DEFAULT_DOMAIN": "Default",
        "OPENSTACK_KEYSTONE_DEFAULT_ROLE": "member",
        "SESSION_ENGINE": "django.contrib.sessions.backends.cache",
        "CACHES": {
            "default": {
                "BACKEND": "django.core.cache.backends.memcached.PyMemcacheCache",
                "LOCATION": oslo.memcached_servers(settings),
            }
        },
        "STATIC_ROOT": STATIC,
        "USE_X_FORWARDED_HOST": True,
        "SECURE_PROXY_SSL_HEADER": ("HTTP_X_FORWARDED_PROTO", "https"),
        "CSRF_COOKIE_SECURE": settings.endpoints.scheme == "https",
        "SESSION_COOKIE_SECURE": settings.endpoints.scheme == "https",
        "OPENSTACK_NEUTRON_NETWORK": {"enable_router": True, "enable_quotas": True},
    }
    lines = ["# Rendered by the openstack Pulumi program; changes here are overwritten."]
    lines += [f"{name} = {value!r}" for name, value in values.items()]
    return "\n".join(lines) + "\n"


def render(ctx: RenderContext) -> dict[str, str]:
    return {
        "local_settings.py": local_settings(ctx),
        **uwsgi_file("horizon", "openstack_dashboard.wsgi:application", PORT),
    }


def horizon(settings: Settings) -> ServiceSpec:
    static = {"name": "static", "emptyDir": {}}
    django_env = (
        env("DJANGO_SETTINGS_MODULE", "openstack_dashboard.settings"),
        env("HORIZON_LOCAL_SETTINGS", f"{CONFIG_DIR}/local_settings.py"),
    )
    return ServiceSpec(
        name="horizon",
        config_dir=CONFIG_DIR,
        render=render,
        shared_secrets=("horizon-secret-key",),
        processes=(
            wsgi_api(
                "horizon",
                "horizon",
                CONFIG_DIR,
                PORT,
                # Keystone and memcached are used per login and per request, not to start:
                # the dashboard comes up on its own and shows Keystone's errors if it is down.
                needs=(),
                config_files=("local_settings.py",),
                probe_path="/auth/login/",
                env=django_env,
                extra_volumes=(static,),
                extra_mounts=(Mount("static", STATIC, read_only=False),),
                init_containers=(
                    Process(
                        "horizon-collectstatic",
                        "horizon",
                        ("python3", "-m", "django", "collectstatic", "--noinput", "--clear"),
                        (),
                        ("local_settings.py",),
                        env=django_env,
                        extra_mounts=(Mount("static", STATIC, read_only=False),),
                    ),
                ),
            ),
        ),
    )


class Horizon(OpenStackService):
    def __init__(self, ctx: BuildContext, opts: pulumi.ResourceOptions | None = None):
        super().__init__(horizon(ctx.settings), ctx, opts)
