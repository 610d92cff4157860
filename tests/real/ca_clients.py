"""Clients that read the CA file at each new connection, run by tests/real/test_ca_rotation.py in the OpenStack venv.

`python ca_clients.py <kind> <target JSON>` builds its client once, as a service's process does, then for
each line read on stdin opens one new connection through it and prints {"ok", "error"} as a JSON line.
`kind` is one of
- `keystoneauth`: a keystoneauth1 Session with `verify=<ca file>` (what every `cafile` option gives the
  services' clients) GETs `url`; each round closes the pooled connection after it, as a reloaded uWSGI
  closes it;
- `pymysql`: SQLAlchemy's engine of the oslo.db URL (`...&ssl_ca=<ca file>`), each round a new connection
  (PyMySQL's _create_ssl_ctx), as oslo.db's pool opens one;
- `amqp`: a kombu Connection with the ssl parameters oslo.messaging gives kombu for `ssl_ca_file`
  (impl_rabbit `_fetch_ssl_params`: ca_certs, cert_reqs CERT_REQUIRED), connected anew each round.
"""

from __future__ import annotations

import json
import ssl
import sys
from collections.abc import Callable
from typing import Any


def _keystoneauth(target: dict[str, Any]) -> Callable[[], None]:
    from keystoneauth1 import session

    client = session.Session(verify=target["ca_file"])

    def call() -> None:
        try:
            client.get(target["url"], authenticated=False, raise_exc=True)
        finally:
            client.session.close()

    return call


def _pymysql(target: dict[str, Any]) -> Callable[[], None]:
    import sqlalchemy
    from sqlalchemy.pool import NullPool

    engine = sqlalchemy.create_engine(target["url"], poolclass=NullPool)

    def call() -> None:
        with engine.connect() as db:
            db.execute(sqlalchemy.text("SELECT 1")).fetchall()

    return call


def _amqp(target: dict[str, Any]) -> Callable[[], None]:
    import kombu

    params = {"ca_certs": target["ca_file"], "cert_reqs": ssl.CERT_REQUIRED}

    def call() -> None:
        connection = kombu.Connection(target["url"], ssl=params, connect_timeout=10)
        try:
            connection.connect()
        finally:
            connection.release()

    return call


CLIENTS = {"keystoneauth": _keystoneauth, "pymysql": _pymysql, "amqp": _amqp}


def main(argv: list[str]) -> None:
    call = CLIENTS[argv[1]](json.loads(argv[2]))
    print(json.dumps({"ready": True}), flush=True)
    for _ in sys.stdin:
        try:
            call()
            print(json.dumps({"ok": True, "error": None}), flush=True)
        except Exception as error:  # reported to the test, which judges it
            print(json.dumps({"ok": False, "error": f"{type(error).__name__}: {error}"}), flush=True)


if __name__ == "__main__":
    main(sys.argv)
