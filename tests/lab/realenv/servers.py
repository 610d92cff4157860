"""Real MariaDB, RabbitMQ and memcached on loopback, owned by the caller.

Each `run_*` is a context manager: it starts the Debian package's server binary with
its data, logs, sockets and ports inside `workdir`, waits until the server really
answers (an authenticated query, the management API and an AMQP handshake, a memcached
`version`), yields where to reach it and how to log in as admin, and stops it on exit.
No system service and no file outside `workdir` is touched.
"""

import base64
import os
import secrets
import shutil
import signal
import socket
import ssl
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path

HOST = "127.0.0.1"
# Server binaries live in sbin, which is not on a non-root PATH.
SEARCH_PATH = os.pathsep.join([os.environ.get("PATH", ""), "/usr/sbin", "/sbin"])
# Debian's /usr/sbin/rabbitmq-server is a wrapper that switches to the rabbitmq user
# and its fixed paths; the script behind it honours the RABBITMQ_* variables.
RABBITMQ_SCRIPTS = "/usr/lib/rabbitmq/bin"


class MissingServerBinaryError(RuntimeError):
    pass


@dataclass(frozen=True)
class Server:
    """Where a server listens and its admin credential (None where it has none)."""

    name: str
    host: str
    port: int
    user: str | None = None
    password: str | None = field(default=None, repr=False)
    started_in: float = 0.0  # seconds from launch until it answered

    @property
    def address(self) -> tuple[str, int]:
        return self.host, self.port


@dataclass(frozen=True)
class MariaDB(Server):
    unix_socket: Path | None = None

    def url(self, user: str, password: str, database: str) -> str:
        """An SQLAlchemy URL as the services' [database] connection takes it."""
        return f"mysql+pymysql://{user}:{password}@{self.host}:{self.port}/{database}"


@dataclass(frozen=True)
class RabbitMQ(Server):
    management_port: int = 0

    @property
    def management_url(self) -> str:
        return f"http://{self.host}:{self.management_port}"

    def transport_url(self, user: str, password: str, vhost: str) -> str:
        return f"rabbit://{user}:{password}@{self.host}:{self.port}/{vhost}"


def require_binary(name: str, package: str, path: str = SEARCH_PATH) -> str:
    found = shutil.which(name, path=path)
    if found is None:
        raise MissingServerBinaryError(
            f"{name} not found: install the Debian package {package!r} "
            f"(tests/lab/realenv/install_system_packages.sh installs all of them)"
        )
    return found


def free_port() -> int:
    # The kernel picks a free port; a race with another process is possible but
    # would show as a server that fails to start, reported with its log.
    with socket.socket() as sock:
        sock.bind((HOST, 0))
        return sock.getsockname()[1]


def _log_tail(path: Path, lines: int = 30) -> str:
    """The end of a log file, or of every *.log in a directory (named at failure time)."""
    if path.is_dir():
        return "\n".join(_log_tail(log, lines) for log in sorted(path.glob("*.log")))
    if not path.exists():
        return f"(no {path})"
    text = "".join(path.read_text(errors="replace").splitlines(keepends=True)[-lines:])
    return f"--- {path}\n{text}"


def _wait(name: str, proc: subprocess.Popen, probe: Callable[[], bool], logs: list[Path], timeout: float) -> float:
    """Seconds until probe() holds; fails early with the logs if the process dies."""
    started = time.monotonic()
    while time.monotonic() - started < timeout:
        if proc.poll() is not None:
            break
        if probe():
            return time.monotonic() - started
        time.sleep(0.1)
    state = "exited" if proc.poll() is not None else f"not ready after {timeout:.0f}s"
    raise RuntimeError(f"{name} {state}:\n" + "\n".join(_log_tail(p) for p in logs))


@contextmanager
def _process(
    args: list[str], log: Path, env: dict[str, str] | None = None, stop_timeout: float = 30
) -> Iterator[subprocess.Popen]:
    with log.open("ab") as out:
        # Own session, so that stopping it also reaches the children it forks.
        proc = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    try:
        yield proc
    finally:
        _stop(proc, stop_timeout)


def _stop(proc: subprocess.Popen, timeout: float) -> None:
    try:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout)
    except ProcessLookupError:
        pass  # already gone
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


def _as_root_args(flag: str) -> list[str]:
    # mariadbd and memcached refuse to run as root unless told which user to be.
    return [flag, "root"] if os.geteuid() == 0 else []


@contextmanager
def run_mariadb(
    workdir: Path, timeout: float = 60, my_cnf: str = "", client_args: tuple[str, ...] = ()
) -> Iterator[MariaDB]:
    """`my_cnf`: options the server reads (as the operator's config files); `client_args`: what the
    readiness query needs beside them (`--ssl` where the server refuses plain TCP)."""
    mariadbd = require_binary("mariadbd", "mariadb-server")
    install_db = require_binary("mariadb-install-db", "mariadb-server")
    client = require_binary("mariadb", "mariadb-client")
    datadir, sock, port = workdir / "data", workdir / "mysqld.sock", free_port()
    password = secrets.token_hex(16)
    datadir.mkdir(parents=True)
    install = [install_db, "--no-defaults", f"--datadir={datadir}", "--skip-test-db", "--skip-name-resolve"]
    done = subprocess.run([*install, *_as_root_args("--user")], capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"mariadb-install-db failed:\n{done.stdout[-2000:]}{done.stderr[-2000:]}")
    # root@localhost stays socket-only; clients on TCP log in as root@'%', as the
    # db-init Jobs do from their pods.
    init = workdir / "init.sql"
    init.write_text(
        f"CREATE USER IF NOT EXISTS 'root'@'%' IDENTIFIED BY '{password}';\n"
        "GRANT ALL PRIVILEGES ON *.* TO 'root'@'%' WITH GRANT OPTION;\n"
    )
    error_log = workdir / "error.log"
    defaults = workdir / "my.cnf"
    defaults.write_text(my_cnf)
    args = [
        mariadbd,
        f"--defaults-file={defaults}",
        f"--datadir={datadir}",
        f"--socket={sock}",
        f"--port={port}",
        f"--bind-address={HOST}",
        f"--pid-file={workdir / 'pid'}",
        f"--init-file={init}",
        f"--log-error={error_log}",
        "--skip-name-resolve",
        # A test database: durability per transaction buys nothing and costs time.
        "--innodb-flush-log-at-trx-commit=0",
        *_as_root_args("--user"),
    ]

    def answers() -> bool:
        login = [client, "--no-defaults", "--protocol=tcp", f"--host={HOST}", f"--port={port}", "--user=root"]
        query = subprocess.run(
            [*login, *client_args, "--batch", "--skip-column-names", "-e", "SELECT 1"],
            capture_output=True,
            text=True,
            env=dict(os.environ, MYSQL_PWD=password),
        )
        return query.returncode == 0 and query.stdout.strip() == "1"

    with _process(args, workdir / "mariadbd.out") as proc:
        seconds = _wait("mariadbd", proc, answers, [error_log, workdir / "mariadbd.out"], timeout)
        yield MariaDB("mariadb", HOST, port, "root", password, seconds, sock)


def _http_ok(url: str, user: str, password: str) -> bool:
    token = base64.b64encode(f"{user}:{password}".encode()).decode()
    request = urllib.request.Request(url, headers={"Authorization": f"Basic {token}"})
    try:
        with urllib.request.urlopen(request, timeout=2) as response:
            return response.status == 200
    except (urllib.error.URLError, OSError):
        return False


def _amqp_answers(port: int) -> bool:
    """The broker answers an AMQP 0-9-1 protocol header with a method frame."""
    try:
        with socket.create_connection((HOST, port), timeout=2) as sock:
            sock.sendall(b"AMQP\x00\x00\x09\x01")
            return sock.recv(1)[:1] == b"\x01"  # frame type 1 = method (Connection.Start)
    except OSError:
        return False


@contextmanager
def run_rabbitmq(workdir: Path, timeout: float = 90, extra_conf: str = "", erl_args: str = "") -> Iterator[RabbitMQ]:
    """`extra_conf`: rabbitmq.conf lines besides the plain listeners (a TLS listener, say); `erl_args`: more
    of the Erlang VM's arguments (an application's environment, `-ssl ssl_pem_cache_clean 1000`)."""
    server = require_binary("rabbitmq-server", "rabbitmq-server", RABBITMQ_SCRIPTS)
    epmd = require_binary("epmd", "erlang-base (a dependency of rabbitmq-server)")
    port, management_port, dist_port, epmd_port = (free_port() for _ in range(4))
    user, password = "admin", secrets.token_hex(16)
    (workdir / "rabbitmq.conf").write_text(
        f"listeners.tcp.1 = {HOST}:{port}\n"
        f"management.tcp.ip = {HOST}\nmanagement.tcp.port = {management_port}\n"
        f"default_user = {user}\ndefault_pass = {password}\n"
        "default_user_tags.administrator = true\n" + extra_conf
    )
    (workdir / "enabled_plugins").write_text("[rabbitmq_management].\n")
    env = dict(
        os.environ,
        HOME=str(workdir),  # the Erlang cookie is created there
        RABBITMQ_CONFIG_FILE=str(workdir / "rabbitmq.conf"),
        RABBITMQ_ENABLED_PLUGINS_FILE=str(workdir / "enabled_plugins"),
        RABBITMQ_MNESIA_BASE=str(workdir / "mnesia"),
        RABBITMQ_LOG_BASE=str(workdir / "log"),
        RABBITMQ_PID_FILE=str(workdir / "rabbitmq.pid"),
        RABBITMQ_NODENAME=f"rabbit-{secrets.token_hex(4)}@localhost",
        RABBITMQ_DIST_PORT=str(dist_port),
        RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS=f"-kernel inet_dist_use_interface {{127,0,0,1}} {erl_args}".strip(),
        # A private epmd, so that nothing lingers on the shared port 4369 afterwards.
        ERL_EPMD_PORT=str(epmd_port),
        ERL_EPMD_ADDRESS=HOST,
    )

    def answers() -> bool:
        overview = f"http://{HOST}:{management_port}/api/overview"
        return _http_ok(overview, user, password) and _amqp_answers(port)

    with ExitStack() as stack:
        stack.enter_context(_process([epmd, "-port", str(epmd_port)], workdir / "epmd.log", env))
        proc = stack.enter_context(_process([server], workdir / "rabbitmq.out", env))
        logs = [workdir / "rabbitmq.out", workdir / "log"]
        seconds = _wait("rabbitmq-server", proc, answers, logs, timeout)
        yield RabbitMQ("rabbitmq", HOST, port, user, password, seconds, management_port)


def _memcached_answers(port: int, tls: ssl.SSLContext | None = None, server_name: str | None = None) -> bool:
    try:
        with socket.create_connection((HOST, port), timeout=2) as raw:
            sock = tls.wrap_socket(raw, server_hostname=server_name) if tls else raw
            sock.sendall(b"version\r\n")
            return sock.recv(64).startswith(b"VERSION ")
    except OSError:
        return False


@contextmanager
def run_memcached(
    workdir: Path,
    timeout: float = 30,
    options: tuple[str, ...] = (),
    tls: ssl.SSLContext | None = None,
    server_name: str | None = None,
) -> Iterator[Server]:
    """`options`: more of memcached's command line (a plan's `-Z -o ssl_chain_cert=...`); `tls` and
    `server_name`: how the readiness check's `version` reaches a server that speaks only TLS."""
    memcached = require_binary("memcached", "memcached")
    port = free_port()
    args = [memcached, "-l", HOST, "-p", str(port), "-U", "0", "-m", "64", *_as_root_args("-u"), *options]
    log = workdir / "memcached.log"
    with _process(args, log) as proc:
        seconds = _wait("memcached", proc, lambda: _memcached_answers(port, tls, server_name), [log], timeout)
        yield Server("memcached", HOST, port, started_in=seconds)
