"""Pieces most OpenStack API services share: the uWSGI process and the Jobs it waits for."""

from __future__ import annotations

import dataclasses
from typing import Any

from components.mechanism import internal_tls, oslo
from components.mechanism.inifile import render_ini
from components.mechanism.spec import Process
from components.mechanism.workload import Probe
from components.settings.model import Settings


def uwsgi_file(settings: Settings, process: str, module: str, port: int, **options: Any) -> dict[str, str]:
    """`<process>-uwsgi.ini`, on HTTPS where the process is an API and tls.internal names a CA;
    `options` are `oslo.uwsgi_ini`'s."""
    tls = internal_tls.serves_tls(settings, process)
    return {f"{process}-uwsgi.ini": render_ini(oslo.uwsgi_ini(module, port, tls=tls, **options))}


def wsgi_api(
    name: str,
    image: str,
    config_dir: str,
    port: int,
    needs: tuple[str, ...],
    config_files: tuple[str, ...],
    probe_path: str = "/",
    **extra: Any,
) -> Process:
    """An API served by uWSGI from `<name>-uwsgi.ini` (see `uwsgi_file`) behind a Service."""
    ini = f"{name}-uwsgi.ini"
    return Process(
        name=name,
        image=image,
        command=("uwsgi", "--ini", f"{config_dir}/{ini}"),
        needs=needs,
        config_files=(*config_files, ini),
        port=port,
        probe=Probe(port, probe_path),
        **extra,
    )


HEALTH_SCRIPT = "health_probe.py"


def connected_to(*ports: int) -> Probe:
    """Ready while the daemon holds connections to these ports (the message queue)."""
    return Probe(command=("python3", f"/scripts/{HEALTH_SCRIPT}", *map(str, ports)), initial_delay=15, period=30)


def probe_on_stack(probe: Probe | None, settings: Settings) -> Probe | None:
    """The probe with the message queue's port as the stack serves it.

    Processes are declared without settings, with RabbitMQ's plain port (connected_to); under
    internal TLS the daemons connect to amqps instead, and the plain listener is off.
    """
    health = ("python3", f"/scripts/{HEALTH_SCRIPT}")
    if probe is None or probe.command[:2] != health or oslo.rabbitmq_port(settings) == oslo.RABBITMQ_PORT:
        return probe
    ports = tuple(str(oslo.RABBITMQ_TLS_PORT) if p == str(oslo.RABBITMQ_PORT) else p for p in probe.command[2:])
    return dataclasses.replace(probe, command=(*health, *ports))


def rpc_daemon(
    name: str,
    image: str,
    command: tuple[str, ...],
    needs: tuple[str, ...],
    config_files: tuple[str, ...],
    **extra: Any,
) -> Process:
    """A daemon that serves over RPC: ready while connected to RabbitMQ.

    Only the message queue, as kolla-ansible's healthcheck_port checks: database connections
    are opened on demand and pooled, so an idle daemon may hold none (the running cloud showed
    neutron-rpc-server never Ready when the probe wanted one).
    """
    ports = (oslo.RABBITMQ_PORT,)
    scripts = (*extra.pop("scripts", ()), HEALTH_SCRIPT)
    return Process(
        name=name,
        image=image,
        command=command,
        needs=needs,
        config_files=config_files,
        probe=connected_to(*ports),
        scripts=scripts,
        **extra,
    )


def registered_api_needs(service: str) -> tuple[str, ...]:
    """An API starts once its schema exists and its Keystone user and endpoints are registered.

    The user must exist before keystonemiddleware can validate tokens; the endpoints before
    anyone can find the API. Keystone itself is an ancestor through these Jobs.
    """
    return (f"{service}-db-sync", f"{service}-ks-user", f"{service}-ks-endpoints")
