"""tests/lab/cloud/encryption.py: the capture's verdict (`capture_ok`) from the connections it saw.

The connections are made here (a test double for the pcap files a real capture writes: tests/real/test_capture.py
runs tcpdump); the plan, its Services and the names the verdict watches are the stack's own.
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from tests.lab.cloud import encryption
from tests.lab.cloud.capture import Connection
from tests.lab.cloud.services import Endpoint, Service, ServiceTable
from tests.test_internal_tls import plain_plan, tls_plan
from tools.plan import Plan

TLS = b"\x17\x03\x03\x00\x20"  # an application data record, as a pooled TLS connection is first seen
SQL = b"\x21\x00\x00\x00\x03SELECT 1"


def _cloud(plan: Plan) -> Any:
    services = [Service.from_manifest(r.revealed, "openstack") for r in plan.custom if r.kind == "Service"]
    return SimpleNamespace(plan=plan, table=ServiceTable(services, "cluster.local"))


def _verdict(
    monkeypatch: pytest.MonkeyPatch, plan: Plan, sent: dict[int, bytes], elsewhere: dict[int, bytes] | None = None
) -> dict[str, Any]:
    """What encrypted() says of connections to the Service that listens on each port (`sent`), and of
    connections to another address on the same port (`elsewhere`: another pod's port of that number)."""
    cloud = _cloud(plan)
    # Headless Services (memcached) have no address of their own: their pods' stand in.
    address = {p.port: s.cluster_ip or "10.244.0.50" for s in cloud.table.services for p in s.ports}
    seen = [Connection(("10.244.0.9", 40000 + i), port, sent=[data], servers={address.get(port, "10.244.0.60")})
            for i, (port, data) in enumerate(sent.items())]  # fmt: skip
    seen += [Connection(("10.244.0.9", 50000 + i), port, sent=[data], servers={"10.244.7.7"})
             for i, (port, data) in enumerate((elsewhere or {}).items())]  # fmt: skip
    monkeypatch.setattr(encryption, "connections", lambda pcaps, ports: seen)
    cloud.table.endpoints = {"memcached": (Endpoint("memcached-0", "10.244.0.50", True, ()),)}
    return encryption.encrypted(cloud, SimpleNamespace(pcaps=[Path("x.pcap")], ports=[]))  # type: ignore[arg-type]


def test_the_verdict_wants_the_data_stores_seen_and_only_what_is_named_in_clear(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    stores = {3306: TLS, 5671: TLS, 11211: TLS, 5000: TLS}
    console_page = {**stores, 6080: b"GET /vnc_lite.html HTTP/1.1"}
    # What the plan names as left in clear, with why (endpoint_tls.not_encrypted), is no failure in clear ...
    with monkeypatch.context() as named:
        named.setattr(encryption, "not_encrypted", lambda settings: {"nova-novncproxy": "said why"})
        ok = _verdict(named, tls_plan(), console_page)
    assert ok["capture_ok"] and ok["encrypted"]["nova-novncproxy"] is False and ok["encrypted"]["glance-api"] is None
    # ... but the plan names none of its HTTP servers: the console proxy's page in clear is a failure,
    assert not _verdict(monkeypatch, tls_plan(), console_page)["capture_ok"]
    # and so is Horizon's: it serves TLS inside the cluster, so plain HTTP to it is a failure,
    assert not _verdict(monkeypatch, tls_plan(), {**stores, 8080: b"GET /healthz HTTP/1.1"})["capture_ok"]
    # while plain HTTP to another pod's port 8080 (nova-compute-maintenance's health port) is not Horizon's.
    other = _verdict(monkeypatch, tls_plan(), {**stores, 8080: TLS}, elsewhere={8080: b"GET /healthz HTTP/1.1"})
    assert other["capture_ok"] and other["wire"]["horizon"]["connections"] == 1, other["wire"]["horizon"]
    assert not _verdict(monkeypatch, tls_plan(), {**stores, 3306: SQL})["capture_ok"]  # SQL in clear
    unseen = {port: data for port, data in stores.items() if port != 11211}
    assert not _verdict(monkeypatch, tls_plan(), unseen)["capture_ok"]  # memcached not seen: nothing proven
    # plainText: nothing is claimed, whatever crossed the wires.
    assert not _verdict(monkeypatch, plain_plan(), {**stores, 5672: TLS})["capture_ok"]
