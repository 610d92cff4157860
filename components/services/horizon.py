"""Horizon: the dashboard, with sessions in memcached and Keystone's internal endpoint."""

from __future__ import annotations

from components.mechanism import internal_tls, oslo
from components.mechanism.api import wsgi_api
from components.mechanism.inifile import render_ini
from components.mechanism.spec import Process, PublicHost, RenderContext, ServiceSpec
from components.mechanism.workload import Mount, env
from components.settings.model import Settings

CONFIG_DIR = "/etc/openstack-dashboard"
PORT = 8080
STATIC = "/var/lib/openstack-dashboard/static"
STATIC_URL = "/static"
POD_IP_ENV = "POD_IP"
PUBLIC_HOST = "horizon"  # the dashboard's public host (endpoints.hosts.horizon)


def local_settings(ctx: RenderContext) -> str:
    """Django settings: Python, so every value is written with repr() and nothing is templated."""
    settings = ctx.settings
    values = {
        "DEBUG": False,
        "ALLOWED_HOSTS": [settings.public_host(PUBLIC_HOST), settings.service_host("horizon")],
        "SECRET_KEY": ctx.secrets["horizon-secret-key"],
        "OPENSTACK_KEYSTONE_URL": oslo.keystone_url(settings) + "/v3",
        "OPENSTACK_ENDPOINT_TYPE": "internalURL",
        **oslo.ca_file(settings, "OPENSTACK_SSL_CACERT"),
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
        # Behind the gateway, which ends TLS and passes the scheme on in X-Forwarded-Proto (its
        # listener takes HTTPS only): Django builds https links and sends cookies only over TLS.
        "USE_X_FORWARDED_HOST": True,
        "SECURE_PROXY_SSL_HEADER": ("HTTP_X_FORWARDED_PROTO", "https"),
        "CSRF_COOKIE_SECURE": settings.endpoints.scheme == "https",
        "SESSION_COOKIE_SECURE": settings.endpoints.scheme == "https",
        # The login form's origin, with its scheme as Django 4 and later want it: a POST whose
        # Origin is not the request's own host and scheme is refused unless listed here.
        "CSRF_TRUSTED_ORIGINS": [oslo.public_url(settings, PUBLIC_HOST)],
        "OPENSTACK_NEUTRON_NETWORK": {"enable_router": True, "enable_quotas": True},
    }
    tls = settings.tls.internal_enabled
    imports = ["import os", *(["import ssl"] if tls else [])]
    lines = ["# Rendered by the openstack Pulumi program; changes here are overwritten.", *imports, ""]
    lines += [f"{name} = {value!r}" for name, value in values.items()]
    if tls:
        # Sessions on memcached's TLS: Django hands OPTIONS to pymemcache's HashClient, whose clients
        # wrap each socket in `tls_context` with the server's host as listed (pymemcache/client/base.py),
        # so a default context checks the chain against the internal CA and the pod's name. A context is
        # no literal: it is built here, from the CA the pod mounts (components/mechanism/oslo.py memcached_tls).
        context = f"ssl.create_default_context(cafile={internal_tls.CA_FILE!r})"
        lines.append(f'CACHES["default"]["OPTIONS"] = {{"tls_context": {context}}}')
    # The kubelet's probes (and anything else in the cluster that asks the pod directly) send
    # the pod's IP as Host; Django answers 400 to a Host it does not allow (openstack-helm adds
    # MY_POD_IP the same way; kolla-ansible allows '*').
    lines.append(f"ALLOWED_HOSTS.append(os.environ[{POD_IP_ENV!r}])")
    return "\n".join(lines) + "\n"


def uwsgi_ini(settings: Settings) -> str:
    # Under internal TLS uWSGI serves HTTPS itself, as kolla-ansible's horizon role does with
    # horizon_enable_tls_backend (tasks/config.yml: service-uwsgi-config's tls_backend, cert and key).
    tls = internal_tls.serves_tls(settings, internal_tls.DASHBOARD)
    sections = oslo.uwsgi_ini("openstack_dashboard.wsgi:application", PORT, tls=tls)
    # Django serves no static files without DEBUG: uWSGI does, from what collectstatic and
    # compress wrote (kolla-ansible's static-map; openstack-helm's Apache alias).
    sections["uwsgi"]["static-map"] = f"{STATIC_URL}={STATIC}"
    return render_ini(sections)


def render(ctx: RenderContext) -> dict[str, str]:
    return {"local_settings.py": local_settings(ctx), "horizon-uwsgi.ini": uwsgi_ini(ctx.settings)}


def horizon(settings: Settings) -> ServiceSpec:
    static = {"name": "static", "emptyDir": {}}
    # Horizon reads openstack_dashboard/local/local_settings.py, which the Kolla image links to
    # /etc/openstack-dashboard/local_settings.py (docker/horizon/Dockerfile.j2).
    django_env = (
        env("DJANGO_SETTINGS_MODULE", "openstack_dashboard.settings"),
        {"name": POD_IP_ENV, "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
    )
    manage = ("python3", "-m", "django")
    static_mount = (Mount("static", STATIC, read_only=False),)
    return ServiceSpec(
        name="horizon",
        config_dir=CONFIG_DIR,
        render=render,
        shared_secrets=("horizon-secret-key",),
        public_hosts=(PublicHost(PUBLIC_HOST, "horizon", PORT, gateway_only=True),),
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
                extra_mounts=static_mount,
                # At every start, as Kolla's horizon image does: gather the static files, then
                # compress them ahead of time (COMPRESS_OFFLINE is on without DEBUG, and a page
                # whose compressed files are missing fails to render).
                init_containers=(
                    Process(
                        "horizon-collectstatic",
                        "horizon",
                        (*manage, "collectstatic", "--noinput", "--clear"),
                        (),
                        ("local_settings.py",),
                        env=django_env,
                        extra_mounts=static_mount,
                    ),
                    Process(
                        "horizon-compress",
                        "horizon",
                        (*manage, "compress", "--force"),
                        (),
                        ("local_settings.py",),
                        env=django_env,
                        extra_mounts=static_mount,
                    ),
                ),
            ),
        ),
    )
