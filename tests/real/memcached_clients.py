"""The plan's memcached clients, run by tests/real/test_memcached_tls.py in the OpenStack venv.

`python memcached_clients.py <resolve> <client> <file>`: `resolve` maps host names to loopback ports
(JSON), standing in for the cluster's DNS only: each client connects to and checks the name its
configuration lists. `client` is one of
- `oslo.cache`: oslo.cache's region from the [cache] section of `file` (an oslo.config file);
- `keystonemiddleware`: auth_token's token cache from the [keystone_authtoken] section of `file`;
- `django`: Django's default cache from `file`, Horizon's local_settings.py, run as Django runs it.
Each stores a value and reads it back, and prints as JSON what it read, and each TLS handshake its
process made or failed (observed, not changed: the clients swallow their connection errors).

`... <file> rounds <host>` then keeps the process running: for each line read on stdin it opens a
new connection to `host` with each TLS context the client made when it was set up (each one the
client's pool would wrap a new connection in), and prints whether its handshake passed: what a
running process verifies a server with after its CA file changed on disk (tests/real/test_ca_rotation.py).
"""

from __future__ import annotations

import json
import os
import socket
import ssl
import sys
from typing import Any

KEY, VALUE = "memcached-tls", "read back"


def _resolve_locally(ports: dict[str, int]) -> None:
    resolve = socket.getaddrinfo

    def getaddrinfo(host: Any, port: Any, *args: Any, **kwargs: Any) -> Any:
        if host in ports:
            return resolve("127.0.0.1", ports[host], *args, **kwargs)
        return resolve(host, port, *args, **kwargs)

    socket.getaddrinfo = getaddrinfo  # type: ignore[assignment]


def _observe_handshakes(seen: dict[str, list[str]]) -> None:
    handshake = ssl.SSLSocket.do_handshake

    def observed(self: ssl.SSLSocket, *args: Any, **kwargs: Any) -> None:
        try:
            handshake(self, *args, **kwargs)
        except ssl.SSLError as error:
            seen["failed"].append(str(error))
            raise
        seen["done"].append(self.version() or "")

    ssl.SSLSocket.do_handshake = observed  # type: ignore[method-assign]


def _oslo_cache(path: str) -> Any:
    from oslo_cache import core
    from oslo_config import cfg

    conf = cfg.ConfigOpts()
    core.configure(conf)
    conf(["--config-file", path], project="memcached-tls", default_config_files=[])
    region = core.create_region()
    core.configure_cache_region(conf, region)
    region.set(KEY, VALUE)
    found = region.get(KEY)
    return found if isinstance(found, str) else None  # dogpile's NO_VALUE: nothing read


def _keystonemiddleware(path: str) -> Any:
    from keystonemiddleware import auth_token
    from oslo_config import cfg

    conf = cfg.ConfigOpts()
    conf(["--config-file", path], project="memcached-tls", default_config_files=[])
    middleware = auth_token.AuthProtocol(lambda environ, start: [], {"oslo_config_config": conf})
    cache = middleware._token_cache  # what the middleware validates each request's token through
    cache.initialize({})
    cache.set(KEY, {"token": VALUE})
    found = cache.get(KEY)
    return found and found["token"]


def _django(path: str) -> Any:
    settings: dict[str, Any] = {}
    with open(path) as file:
        exec(compile(file.read(), path, "exec"), settings)  # Horizon's settings module, as Django imports it
    from django.conf import settings as django_settings

    django_settings.configure(CACHES=settings["CACHES"])
    from django.core.cache import cache

    try:
        cache.set(KEY, VALUE)
        return cache.get(KEY)
    except OSError as error:  # pymemcache raises what the socket did
        return f"raised {type(error).__name__}"


CLIENTS = {"oslo.cache": _oslo_cache, "keystonemiddleware": _keystonemiddleware, "django": _django}


def _record_contexts(made: list[ssl.SSLContext]) -> None:
    create = ssl.create_default_context

    def recorded(*args: Any, **kwargs: Any) -> ssl.SSLContext:
        context = create(*args, **kwargs)
        if kwargs.get("cafile"):  # the client's, from its CA option (not a library's of the system's CAs)
            made.append(context)
        return context

    ssl.create_default_context = recorded  # type: ignore[assignment]


def _handshake(context: ssl.SSLContext, host: str) -> str | None:
    """A new connection to `host` wrapped in `context`: None if its handshake passed, else why not."""
    try:
        with socket.create_connection((host, 11211), timeout=10) as raw, context.wrap_socket(raw, server_hostname=host):
            return None
    except (OSError, ssl.SSLError) as error:
        return str(error)


def main(argv: list[str]) -> None:
    _resolve_locally(json.loads(argv[1]))
    seen: dict[str, list[str]] = {"done": [], "failed": []}
    _observe_handshakes(seen)
    made: list[ssl.SSLContext] = []
    _record_contexts(made)
    os.environ.setdefault("POD_IP", "127.0.0.1")  # Horizon's settings add it to ALLOWED_HOSTS
    read = CLIENTS[argv[2]](argv[3])
    print(json.dumps({"read": read, "handshakes": seen["done"], "handshake_failures": seen["failed"]}), flush=True)
    if argv[4:5] != ["rounds"]:
        return
    for _ in sys.stdin:
        print(json.dumps({"contexts": len(made), "failures": [_handshake(c, argv[5]) for c in made]}), flush=True)


if __name__ == "__main__":
    main(sys.argv)
