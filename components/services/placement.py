"""Placement: the inventory and allocation API that Nova's scheduler asks."""

from __future__ import annotations

from components.mechanism import oslo
from components.mechanism.api import registered_api_needs, uwsgi_file, wsgi_api
from components.mechanism.bootstrap import db_sync
from components.mechanism.inifile import render_ini
from components.mechanism.spec import CatalogEntry, RenderContext, ServiceSpec
from components.settings.model import Settings

CONFIG_DIR = "/etc/placement"
PORT = 8778


def render(ctx: RenderContext) -> dict[str, str]:
    settings, secrets = ctx.settings, ctx.secrets
    conf = {
        "DEFAULT": oslo.logging(),
        "placement_database": oslo.database(settings, "placement", secrets["database"], "placement"),
        "api": {"auth_strategy": "keystone"},
        "keystone_authtoken": oslo.keystone_authtoken(settings, "placement", secrets),
        "oslo_middleware": {"enable_proxy_headers_parsing": True},
    }
    return {
        "placement.conf": render_ini(conf),
        **uwsgi_file(settings, "placement-api", "placement.wsgi.api:application", PORT),
    }


def placement(settings: Settings) -> ServiceSpec:
    return ServiceSpec(
        name="placement",
        config_dir=CONFIG_DIR,
        render=render,
        catalog=(CatalogEntry("placement", "placement", "placement-api", PORT),),
        steps=(
            db_sync(
                "placement",
                "placement-api",
                ("placement-manage", "--config-file", f"{CONFIG_DIR}/placement.conf", "db", "sync"),
                ("placement.conf",),
            ),
        ),
        processes=(
            wsgi_api(
                "placement-api",
                "placement-api",
                CONFIG_DIR,
                PORT,
                needs=registered_api_needs("placement"),
                config_files=("placement.conf",),
            ),
        ),
    )
