"""Nova and Placement as nova-compute-maintenance uses them, each call at a fixed microversion.

Compute API 2.53 (nova/api/openstack/compute, api-ref "Compute API"): from 2.53 services and
hypervisors are addressed by UUID, and a hypervisor's UUID is its compute node's resource
provider in Placement; 2.25 made `block_migration: auto` and 2.34 live migration asynchronous
(the API answers 202 and the migration record says how it ended). Placement 1.0 has every call
used here. The calls:

- GET  /os-services?binary=nova-compute              services.py index
- PUT  /os-services/<uuid>  {"status": ..., "disabled_reason": ...}   services.py _update_v253
- GET  /os-hypervisors/detail                         hypervisors.py detail
- GET  /servers/detail?all_tenants=1&host=<host>      servers.py (host is an admin filter)
- POST /servers/<id>/action  {"os-migrateLive": {"host": null, "block_migration": "auto"}}
                                                      migrate_server.py _migrate_live
- GET  /servers/<id>/migrations                       server_migrations.py index (in progress)
- GET  /os-migrations?instance_uuid=<id>&migration_type=live-migration   migrations.py index
- GET  /resource_providers/<uuid>/allocations, /inventories, /usages     (Placement)

The transport carries the requests: openstacksdk's session in the pod (Keystone, the catalog's
internal endpoints, the OS_* variables), or whatever a test gives it.
"""

from __future__ import annotations

import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

import maintenance_plan as plan

COMPUTE_MICROVERSION = "2.53"
PLACEMENT_MICROVERSION = "1.0"
MICROVERSIONS = {"compute": COMPUTE_MICROVERSION, "placement": PLACEMENT_MICROVERSION}
# A migration Nova has in progress (nova/db/main/api.py migration_get_in_progress_by_instance); a live one
# says `running` from its start until the source is done (nova/compute/manager.py _post_live_migration).
IN_PROGRESS = ("queued", "preparing", "running", "post-migrating")


class NovaError(RuntimeError):
    def __init__(self, status: int, message: str):
        super().__init__(f"{status or 'no answer'}: {message}")
        self.status = status


class Transport(Protocol):
    def request(
        self, service: str, method: str, path: str, body: object | None, microversion: str
    ) -> tuple[int, Any]: ...


class SdkTransport:
    """openstacksdk's Keystone session: `service` is the proxy (compute, placement)."""

    def __init__(self, connection: Any):
        self.connection = connection

    @classmethod
    def connect(cls, variables: Mapping[str, str] | None = None) -> SdkTransport:
        """From the process's OS_* variables (as compute_service.py), or from `variables` alone."""
        import openstack

        if variables is None:
            return cls(openstack.connect())
        given = {k.removeprefix("OS_").lower(): v for k, v in variables.items() if k.startswith("OS_")}
        return cls(openstack.connect(load_yaml_config=False, load_envvars=False, **given))

    def request(self, service: str, method: str, path: str, body: object | None, microversion: str) -> tuple[int, Any]:
        from keystoneauth1.exceptions import ClientException
        from openstack.exceptions import SDKException

        try:  # Keystone, the catalog and version discovery are asked at the first call of each service
            proxy = getattr(self.connection, service)
            response = proxy.request(path, method, json=body, microversion=microversion, raise_exc=False)
        except (ClientException, SDKException) as error:
            raise NovaError(0, f"{service}: {error}") from None
        try:
            return response.status_code, response.json() if response.content else None
        except ValueError:
            return response.status_code, response.text


@dataclass(frozen=True)
class Hypervisor:
    id: str  # the compute node's UUID, also its resource provider's
    host: str  # its nova-compute service's host
    enabled: bool
    up: bool


class Nova:
    def __init__(self, transport: Transport):
        self.transport = transport

    def _call(self, service: str, method: str, path: str, body: object | None = None, expect: int = 200) -> Any:
        status, answer = self.transport.request(service, method, path, body, MICROVERSIONS[service])
        if status != expect:
            raise NovaError(status, f"{method} {path}: {_fault(answer)}")
        return answer

    def compute_services(self) -> list[plan.Service]:
        return [_service(s) for s in self._call("compute", "GET", "/os-services?binary=nova-compute")["services"]]

    def change_service(self, service: plan.Service, change: plan.ServiceChange) -> plan.Service:
        body: dict[str, str | None] = {"status": "enabled"}
        if not change.enable:
            body = {"status": "disabled", "disabled_reason": change.reason}
        return _service(self._call("compute", "PUT", f"/os-services/{service.id}", body)["service"])

    def hypervisors(self) -> list[Hypervisor]:
        answer = self._call("compute", "GET", "/os-hypervisors/detail")["hypervisors"]
        return [
            Hypervisor(h["id"], (h.get("service") or {}).get("host", ""), h["status"] == "enabled", h["state"] == "up")
            for h in answer
        ]

    def servers_on(self, host: str) -> list[plan.Server]:
        query = urllib.parse.urlencode({"all_tenants": "1", "host": host})
        return [
            plan.Server(s["id"], s.get("name") or "", s["status"], s.get("OS-EXT-STS:task_state"))
            for s in self._call("compute", "GET", f"/servers/detail?{query}")["servers"]
        ]

    def live_migrate(self, server: plan.Server) -> None:
        """To wherever Nova's scheduler picks; it answers 202 once the server is MIGRATING."""
        body = {"os-migrateLive": {"host": None, "block_migration": "auto"}}
        self._call("compute", "POST", f"/servers/{server.id}/action", body, expect=202)

    def migration_progress(self, server: plan.Server) -> str:
        for migration in self._call("compute", "GET", f"/servers/{server.id}/migrations")["migrations"]:
            total, done = migration.get("memory_total_bytes") or 0, migration.get("memory_processed_bytes") or 0
            copied = f", {100 * done // total}% of {total // 2**20} MiB of memory copied" if total else ""
            return f"migration {migration['status']}{copied}"
        return ""

    def last_live_migration(self, server: plan.Server) -> str:
        last = self._last_live_migration(server.id)
        if last is None:
            return "Nova has no live migration of it"
        to = f" to {last['dest_compute']}" if last.get("dest_compute") else ""
        return f"its last live migration, from {last.get('source_compute')}{to}, is {last['status']}"

    def unfinished_live_migration(self, server_id: str) -> plan.Unfinished | None:
        """Its last live migration, if Nova still has it in progress. From /os-migrations, which answers for a
        server deleted meanwhile too (/servers/<id>/migrations would answer 404)."""
        last = self._last_live_migration(server_id)
        if last is None or last["status"] not in IN_PROGRESS:
            return None
        return plan.Unfinished(last["id"], last["status"])

    def _last_live_migration(self, server_id: str) -> Mapping[str, Any] | None:
        query = urllib.parse.urlencode({"instance_uuid": server_id, "migration_type": "live-migration"})
        found = self._call("compute", "GET", f"/os-migrations?{query}")["migrations"]
        return max(found, key=lambda m: m["id"]) if found else None

    def allocations_on(self, provider: str) -> dict[str, dict[str, int]]:
        """What each consumer (a server, by its UUID) holds on a resource provider."""
        answer = self._call("placement", "GET", f"/resource_providers/{provider}/allocations")["allocations"]
        return {consumer: dict(held["resources"]) for consumer, held in answer.items()}

    def room(self, hypervisor: Hypervisor) -> plan.Room:
        base = f"/resource_providers/{hypervisor.id}"
        inventories = self._call("placement", "GET", f"{base}/inventories")["inventories"]
        usages = self._call("placement", "GET", f"{base}/usages")["usages"]
        return plan.room(hypervisor.host, inventories, usages)


def _service(s: Mapping[str, Any]) -> plan.Service:
    enabled, up = s["status"] == "enabled", s.get("state") != "down"
    return plan.Service(s["id"], s["host"], enabled, s.get("disabled_reason"), up)


def _fault(answer: Any) -> str:
    """Nova's {"<kind>": {"message": ...}} or Placement's {"errors": [{"detail": ...}]}."""
    if isinstance(answer, Mapping):
        if answer.get("errors"):
            return "; ".join(str(e.get("detail") or e.get("title")) for e in answer["errors"])
        for value in answer.values():
            if isinstance(value, Mapping) and "message" in value:
                return str(value["message"])
    return str(answer)[:300]
