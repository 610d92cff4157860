"""Fixtures for tests against the real software: the OpenStack venv and real servers.

Everything under tests/real carries the marker `real`; `pytest -m "not real"` skips
it on a developer machine. Nothing here skips by itself: a missing server binary is a
failure that names the Debian package to install, because CI must run these tests.
"""

from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, ExitStack, contextmanager
from functools import cache
from pathlib import Path
from typing import TypeVar

import pytest

from tests.conftest import stacks_release
from tests.lab.realenv.jobs import ChainReport
from tests.lab.realenv.openstack_venv import OpenStackVenv, ensure_venv
from tests.lab.realenv.servers import (
    MariaDB,
    MissingServerBinaryError,
    RabbitMQ,
    Server,
    run_mariadb,
    run_memcached,
    run_rabbitmq,
)

HERE = Path(__file__).parent
S = TypeVar("S", bound=Server)
_started: list[Server] = []
_chain_reports: list[ChainReport] = []
ServerSet = tuple[MariaDB, RabbitMQ, Server]


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "real: runs real OpenStack code and servers (slow; CI runs it)")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    # This hook sees the items of the whole session, not only this directory's.
    for item in items:
        if item.path.is_relative_to(HERE):
            item.add_marker(pytest.mark.real)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    for server in _started:
        terminalreporter.write_line(
            f"real {server.name} on {server.host}:{server.port}, up in {server.started_in:.1f}s"
        )
    for report in _chain_reports:
        for line in report.lines():
            terminalreporter.write_line(line)


@pytest.fixture(scope="session")
def openstack_venv() -> OpenStackVenv:
    """The venv of the release the stack files name."""
    return ensure_venv(stacks_release())


@pytest.fixture(scope="session")
def venv_of() -> Callable[[str], OpenStackVenv]:
    """The venv of any release the program deploys (components/settings/releases.py), built on first use."""
    return cache(ensure_venv)


def _serve(server_context: AbstractContextManager[S]) -> Iterator[S]:
    with ExitStack() as stack:
        try:
            server = stack.enter_context(server_context)
        except MissingServerBinaryError as exc:
            pytest.fail(str(exc), pytrace=False)
        _started.append(server)
        yield server


@pytest.fixture(scope="session")
def mariadb(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MariaDB]:
    yield from _serve(run_mariadb(tmp_path_factory.mktemp("mariadb")))


@pytest.fixture(scope="session")
def rabbitmq(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RabbitMQ]:
    yield from _serve(run_rabbitmq(tmp_path_factory.mktemp("rabbitmq")))


@pytest.fixture(scope="session")
def memcached(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    yield from _serve(run_memcached(tmp_path_factory.mktemp("memcached")))


@pytest.fixture(scope="session")
def chain_reports() -> list[ChainReport]:
    """Where a bootstrap chain leaves its figures for the session's summary."""
    return _chain_reports


@pytest.fixture(scope="session")
def own_servers(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], AbstractContextManager[ServerSet]]:
    """Starts a MariaDB, RabbitMQ and memcached of a test's own: for a test that needs
    empty servers and changes their admin credentials, which the shared ones must keep."""

    @contextmanager
    def start(name: str) -> Iterator[ServerSet]:
        with ExitStack() as stack:
            serve = contextmanager(_serve)
            mariadb = stack.enter_context(serve(run_mariadb(tmp_path_factory.mktemp(f"{name}-mariadb"))))
            rabbitmq = stack.enter_context(serve(run_rabbitmq(tmp_path_factory.mktemp(f"{name}-rabbitmq"))))
            memcached = stack.enter_context(serve(run_memcached(tmp_path_factory.mktemp(f"{name}-memcached"))))
            yield mariadb, rabbitmq, memcached

    return start
