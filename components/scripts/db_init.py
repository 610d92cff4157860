"""Create a service's databases and its database user; safe to run again.

Runs in the kolla-toolbox image (Python with PyMySQL). Reads everything from the
environment; passwords come from Secrets, never from the command line.
"""

import os
import sys
import time

import pymysql

# Under internal TLS, the CA that verifies the server (its chain and that it is the host named:
# PyMySQL checks the host name whenever a CA is given); unset, the connection stays plain.
CA_FILE = os.environ.get("DB_CA_FILE")


def connect() -> pymysql.connections.Connection:
    host, _, port = os.environ["DB_ADDRESS"].rpartition(":")
    tls = {"ssl": {"ca": CA_FILE}} if CA_FILE else {}
    deadline = time.monotonic() + 300
    while True:
        try:
            return pymysql.connect(
                host=host,
                port=int(port),
                user=os.environ["DB_ADMIN_USER"],
                password=os.environ["DB_ADMIN_PASSWORD"],
                autocommit=True,
                **tls,
            )
        except pymysql.err.OperationalError as error:
            if time.monotonic() > deadline:
                raise
            print(f"database not reachable yet ({error}); retrying", file=sys.stderr)
            time.sleep(5)


def main() -> None:
    user, password = os.environ["DB_USER"], os.environ["DB_PASSWORD"]
    names = [n for n in os.environ["DB_NAMES"].split(",") if n]
    with connect() as db, db.cursor() as cursor:
        for name in names:
            cursor.execute(f"CREATE DATABASE IF NOT EXISTS `{name}` CHARACTER SET utf8mb4 COLLATE utf8mb4_general_ci")
        # The service's user may connect over TLS only when the server serves it; a stack that goes
        # back to plain text lifts the requirement on the next run.
        require = "SSL" if CA_FILE else "NONE"
        cursor.execute(f"CREATE USER IF NOT EXISTS %s@'%%' IDENTIFIED BY %s REQUIRE {require}", (user, password))
        # Re-running after a password change must take the new password.
        cursor.execute(f"ALTER USER %s@'%%' IDENTIFIED BY %s REQUIRE {require}", (user, password))
        for name in names:
            cursor.execute(f"GRANT ALL PRIVILEGES ON `{name}`.* TO %s@'%%'", (user,))
    print(f"databases {', '.join(names)} ready for user {user}")


if __name__ == "__main__":
    main()
