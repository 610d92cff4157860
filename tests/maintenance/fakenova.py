"""A test double of Nova (compute API 2.53) and Placement (1.0): the calls nova-compute-maintenance makes.

Why a double: the quick tests run without OpenStack (the program's virtualenv has no Nova and no
openstacksdk), and the real Nova runs only in the cloud harness, on one node, where no live
migration can succeed. This double plays several hosts so the whole maintenance can be followed:
services disabled and enabled, servers live-migrated (the API answers 202 with the server in
task_state `migrating`, as nova/compute/api.py live_migrate does; the migration completes or
fails a few polls later, and a failed one leaves the server ACTIVE where it was with its
migration record in `error`, as nova/conductor/manager.py _live_migrate does), and Placement's
inventories, usages and allocations kept from the servers. It answers only requests that carry
the microversion header keystoneauth sends, so a call at another microversion fails here first.
"""

from __future__ import annotations

import json
import threading
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from email.message import Message
from typing import Any
from urllib.parse import parse_qs, urlsplit

from maintenance_nova import MICROVERSIONS

from tests.doubles.json_http import serve_json

Answer = tuple[int, Any]


@dataclass
class Host:
    name: str
    memory_mb: int = 8192
    vcpus: int = 8
    disk_gb: int = 100
    enabled: bool = True
    reason: str | None = None
    up: bool = True
    service_id: str = field(default_factory=lambda: str(uuid.uuid4()))
    provider: str = field(default_factory=lambda: str(uuid.uuid4()))  # compute node uuid = resource provider

    def inventories(self) -> dict[str, dict[str, Any]]:
        # nova's libvirt driver reports these; allocation ratios are its initial_*_allocation_ratio defaults.
        memory, vcpu, disk = self.memory_mb, self.vcpus, self.disk_gb
        return {
            "MEMORY_MB": {"total": memory, "reserved": 512, "allocation_ratio": 1.0, "max_unit": memory},
            "VCPU": {"total": vcpu, "reserved": 0, "allocation_ratio": 4.0, "max_unit": vcpu},
            "DISK_GB": {"total": disk, "reserved": 0, "allocation_ratio": 1.0, "max_unit": disk},
        }


@dataclass
class Server:
    id: str
    name: str
    host: str
    status: str = "ACTIVE"
    task_state: str | None = None
    resources: dict[str, int] = field(default_factory=lambda: {"MEMORY_MB": 1024, "VCPU": 1, "DISK_GB": 10})
    ticks: int = 0  # polls left until its migration ends


# The statuses nova's in-progress list (GET /servers/<id>/migrations) takes: nova/db/main/api.py
# migration_get_in_progress_by_instance.
IN_PROGRESS = ("queued", "preparing", "running", "post-migrating")


@dataclass
class FakeNova:
    hosts: dict[str, Host] = field(default_factory=dict)
    servers: dict[str, Server] = field(default_factory=dict)
    migrations: list[dict[str, Any]] = field(default_factory=list)
    requests: list[tuple[str, str, Any]] = field(default_factory=list)
    ticks_per_migration: int = 2
    source_finishing_ticks: int = 1  # polls the source takes after the destination took the server
    failing: set[str] = field(default_factory=set)  # servers whose live migration ends in error
    refusing: set[str] = field(default_factory=set)  # servers whose live migration the API refuses (409)
    most_in_flight: int = 0
    # Source hosts still finishing a live migration whose server the destination took: a libvirt restart there
    # would put the server into ERROR.
    finishing_on: set[str] = field(default_factory=set)
    url: str = ""
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def add_host(self, name: str, **kwargs: Any) -> Host:
        self.hosts[name] = Host(name, **kwargs)
        return self.hosts[name]

    def add_server(self, name: str, host: str, **kwargs: Any) -> Server:
        server = Server(str(uuid.uuid4()), name, host, **kwargs)
        self.servers[server.id] = server
        return server

    def used(self, host: str) -> dict[str, int]:
        used: dict[str, int] = {}
        for server in self.servers.values():
            if server.host == host:
                for rc, amount in server.resources.items():
                    used[rc] = used.get(rc, 0) + amount
        return used

    def free(self, host: Host) -> dict[str, int]:
        used = self.used(host.name)
        return {
            rc: int((inv["total"] - inv["reserved"]) * inv["allocation_ratio"]) - used.get(rc, 0)
            for rc, inv in host.inventories().items()
        }

    # -- serving ------------------------------------------------------------------------------------

    @contextmanager
    def serve(self) -> Iterator[FakeNova]:
        def answer(method: str, path: str, body: Any, headers: Message) -> tuple[int, Any]:
            return self.handle(method, path, body, headers.get("OpenStack-API-Version", ""))

        with serve_json(answer) as self.url:
            yield self

    def handle(self, method: str, target: str, body: Any, version: str) -> Answer:
        with self._lock:
            self.requests.append((method, target, body))
            url = urlsplit(target)
            query = {k: v[0] for k, v in parse_qs(url.query).items()}
            service, *parts = url.path.strip("/").split("/")
            if version != f"{service} {MICROVERSIONS.get(service)}":
                return 406, {"computeFault": {"message": f"this double answers {service} at its pinned microversion"}}
            route = getattr(self, f"_{service}", None)
            if route is None:
                return 404, None
            return route(method, parts, query, body)

    # -- compute ------------------------------------------------------------------------------------

    def _compute(self, method: str, parts: list[str], query: dict[str, str], body: Any) -> Answer:
        match method, parts:
            case "GET", ["os-services"]:
                wanted = query.get("binary")
                return 200, {"services": [self._service(h) for h in self.hosts.values() if wanted == "nova-compute"]}
            case "PUT", ["os-services", service_id]:
                return self._update_service(service_id, body)
            case "GET", ["os-hypervisors", "detail"]:
                return 200, {"hypervisors": [self._hypervisor(h) for h in self.hosts.values()]}
            case "GET", ["servers", "detail"]:
                self._tick()
                if query.get("all_tenants") != "1":
                    return 403, {"forbidden": {"message": "a node's servers need all_tenants"}}
                on_host = [s for s in self.servers.values() if s.host == query.get("host")]
                return 200, {"servers": [self._server(s) for s in on_host]}
            case "POST", ["servers", server_id, "action"]:
                return self._migrate(server_id, body)
            case "GET", ["servers", server_id, "migrations"]:
                running = [m for m in self.migrations if m["instance_uuid"] == server_id and m["status"] in IN_PROGRESS]
                return 200, {"migrations": running}
            case "GET", ["os-migrations"]:
                found = [
                    m
                    for m in self.migrations
                    if m["instance_uuid"] == query.get("instance_uuid")
                    and m["migration_type"] == query.get("migration_type")
                ]
                return 200, {"migrations": found}
        return 404, {"itemNotFound": {"message": f"{method} {'/'.join(parts)}"}}

    def _service(self, host: Host) -> dict[str, Any]:
        return {
            "id": host.service_id,
            "binary": "nova-compute",
            "host": host.name,
            "status": "enabled" if host.enabled else "disabled",
            "disabled_reason": host.reason,
            "state": "up" if host.up else "down",
            "zone": "nova",
            "forced_down": False,
        }

    def _hypervisor(self, host: Host) -> dict[str, Any]:
        return {
            "id": host.provider,
            "hypervisor_hostname": f"{host.name}.example.com",
            "state": "up" if host.up else "down",
            "status": "enabled" if host.enabled else "disabled",
            "service": {"host": host.name, "id": host.service_id, "disabled_reason": host.reason},
        }

    def _server(self, server: Server) -> dict[str, Any]:
        return {
            "id": server.id,
            "name": server.name,
            "status": server.status,
            "OS-EXT-SRV-ATTR:host": server.host,
            "OS-EXT-STS:task_state": server.task_state,
        }

    def _update_service(self, service_id: str, body: Any) -> Answer:
        host = next((h for h in self.hosts.values() if h.service_id == service_id), None)
        if host is None:
            return 404, {"itemNotFound": {"message": f"service {service_id} not found"}}
        if body.get("status") == "enabled":
            if body.get("disabled_reason"):
                invalid = "Specifying 'disabled_reason' with status 'enabled' is invalid."
                return 400, {"badRequest": {"message": invalid}}
            host.enabled, host.reason = True, None
        elif body.get("status") == "disabled":
            host.enabled, host.reason = False, body.get("disabled_reason")
        else:
            return 400, {"badRequest": {"message": "No updates were requested."}}
        return 200, {"service": self._service(host)}

    def _migrate(self, server_id: str, body: Any) -> Answer:
        server = self.servers.get(server_id)
        request = (body or {}).get("os-migrateLive")
        if server is None:
            return 404, {"itemNotFound": {"message": f"server {server_id} not found"}}
        if request is None or set(request) != {"host", "block_migration"} or request["block_migration"] != "auto":
            return 400, {"badRequest": {"message": f"invalid os-migrateLive body at 2.53: {body}"}}
        if server_id in self.refusing or server.status not in ("ACTIVE", "PAUSED") or server.task_state:
            return 409, {"conflictingRequest": {"message": f"Cannot 'os-migrateLive' instance {server_id}"}}
        server.task_state, server.status, server.ticks = "migrating", "MIGRATING", self.ticks_per_migration
        self.migrations.append(
            {
                "id": len(self.migrations) + 1,
                "instance_uuid": server_id,
                "migration_type": "live-migration",
                "status": "running",
                "source_compute": server.host,
                "dest_compute": None,
                "memory_total_bytes": 1024 * 2**20,
                "memory_processed_bytes": 0,
            }
        )
        self.most_in_flight = max(self.most_in_flight, sum(s.task_state == "migrating" for s in self.servers.values()))
        return 202, None

    def _tick(self) -> None:
        """Time passes for every migration in flight; Nova's scheduler picks a destination at the end. As
        Nova does, the server is the destination's (host, ACTIVE, no task) some polls before the source is
        done and the migration, `running` until then, `completed` (nova/compute/manager.py
        _post_live_migration)."""
        for migration in self.migrations:
            server = self.servers[migration["instance_uuid"]]
            if migration["status"] != "running":
                continue
            if migration["source_compute"] in self.finishing_on and server.host != migration["source_compute"]:
                server.ticks -= 1
                if server.ticks <= 0:
                    migration["status"] = "completed"
                    self.finishing_on.discard(migration["source_compute"])
                continue
            server.ticks -= 1
            migration["memory_processed_bytes"] = migration["memory_total_bytes"] // 2
            if server.ticks > 0:
                continue
            destination = self._destination(server)
            server.task_state, server.status = None, "ACTIVE"
            if server.id in self.failing or destination is None:
                migration["status"] = "error"
            else:
                migration["dest_compute"] = destination.name
                server.host, server.ticks = destination.name, self.source_finishing_ticks
                self.finishing_on.add(migration["source_compute"])

    def _destination(self, server: Server) -> Host | None:
        fitting = [
            h
            for h in self.hosts.values()
            if h.name != server.host and h.enabled and h.up and all(
                amount <= self.free(h).get(rc, 0) for rc, amount in server.resources.items()
            )
        ]  # fmt: skip
        return max(fitting, key=lambda h: self.free(h)["MEMORY_MB"], default=None)

    # -- placement ----------------------------------------------------------------------------------

    def _placement(self, method: str, parts: list[str], query: dict[str, str], body: Any) -> Answer:
        match method, parts:
            case "GET", ["resource_providers", provider, what]:
                host = next((h for h in self.hosts.values() if h.provider == provider), None)
                if host is None:
                    return 404, {"errors": [{"status": 404, "detail": f"No resource provider with uuid {provider}"}]}
                if what == "inventories":
                    return 200, {"resource_provider_generation": 1, "inventories": host.inventories()}
                if what == "usages":
                    return 200, {"resource_provider_generation": 1, "usages": self.used(host.name)}
                if what == "allocations":
                    held = {s.id: {"resources": s.resources} for s in self.servers.values() if s.host == host.name}
                    return 200, {"resource_provider_generation": 1, "allocations": held}
        return 404, {"errors": [{"status": 404, "detail": f"{method} {'/'.join(parts)}"}]}


class HttpTransport:
    """What keystoneauth sends for a proxy request (maintenance_nova.SdkTransport), minus the token:
    the service's endpoint and path, JSON, and the microversion headers."""

    def __init__(self, url: str):
        self.url = url

    def request(self, service: str, method: str, path: str, body: object | None, microversion: str) -> tuple[int, Any]:
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(f"{self.url}/{service}{path}", data=data, method=method)
        request.add_header("OpenStack-API-Version", f"{service} {microversion}")
        if service == "compute":
            request.add_header("X-OpenStack-Nova-API-Version", microversion)
        if data is not None:
            request.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(request, timeout=10) as response:
                status, text = response.status, response.read()
        except urllib.error.HTTPError as error:
            status, text = error.code, error.read()
        return status, json.loads(text) if text else None
