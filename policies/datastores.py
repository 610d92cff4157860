"""The data stores whose ingress the pack judges (data-store-ingress), as the pods carry them.

The pack imports no Pulumi program code, so it keeps its own copy of what components/infrastructure/isolation.py
and components/mechanism/oslo.py say of the stores; tests/policy/test_data_store_ingress.py holds the two
together. The labels are the operators' own on the pods they run (mariadb-operator
pkg/builder/labels; RabbitMQ Cluster Operator internal/metadata/label.go) and memcached's
(components/infrastructure/memcached.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass


@dataclass(frozen=True)
class DataStore:
    name: str
    labels: Mapping[str, str]  # labels every pod of the store carries
    client_ports: tuple[int, ...]  # the plain one, and the TLS one where the store has one
    # Whether its client port may admit every source: the host-network clients (nova-compute,
    # neutron's agents) connect from the node's address, which no podSelector matches and
    # network plugins treat differently; the store authenticates them. memcached does not.
    open_to_all: bool


DATA_STORES: tuple[DataStore, ...] = (
    DataStore("memcached", {"app.kubernetes.io/name": "memcached", "app.kubernetes.io/component": "server"},
              (11211,), open_to_all=False),
    DataStore("mariadb", {"app.kubernetes.io/name": "mariadb", "app.kubernetes.io/instance": "mariadb"},
              (3306,), open_to_all=True),
    DataStore("rabbitmq", {"app.kubernetes.io/name": "rabbitmq", "app.kubernetes.io/part-of": "rabbitmq"},
              (5672, 5671), open_to_all=True),  # amqp; amqps under internal TLS
)  # fmt: skip
