"""nova-compute-maintenance's Nova calls through openstacksdk and keystoneauth, as in its pod.

    python tests/maintenance/sdk_roundtrip.py     (the OpenStack virtualenv's interpreter; tests/real runs it)

The quick tests carry the controller's requests with a plain HTTP transport; the pod carries them
with SdkTransport: a Keystone password login from OS_* variables, the catalog's internal
endpoints, version discovery, the microversion headers. Here that path runs for real, against a
test double of Keystone (token and catalog) in front of tests/maintenance/fakenova.py, which
answers only requests at the pinned microversions. Exits non-zero, naming what failed.
"""

from __future__ import annotations

import json
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

# Run as a script: its doubles beside it, the controller's modules side by side as in /scripts.
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "components" / "scripts"))
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # tests.doubles.json_http, which fakenova serves through
import maintenance_plan as plan
from fakenova import FakeNova
from maintenance_nova import Nova, NovaError, SdkTransport

logins: list[str] = []


class Discovering(FakeNova):
    """Nova's and Placement's version documents, which keystoneauth reads before the first call."""

    def handle(self, method: str, target: str, body: Any, version: str) -> tuple[int, Any]:
        path = target.rstrip("/")
        compute = {"id": "v2.1", "status": "CURRENT", "version": "2.96", "min_version": "2.1",
                   "links": [{"rel": "self", "href": f"{self.url}/compute/v2.1/"}]}  # fmt: skip
        if path == "/compute/v2.1":
            return 200, {"version": compute}
        if path == "/compute":
            return 200, {"versions": [compute]}
        if path == "/placement":
            placement = {
                "id": "v1.0",
                "max_version": "1.39",
                "min_version": "1.0",
                "status": "CURRENT",
                "links": [{"rel": "self", "href": ""}],  # as placement/handlers/root.py answers
            }
            return 200, {"versions": [placement]}
        return super().handle(method, target.replace("/compute/v2.1/", "/compute/"), body, version)


def keystone(nova: FakeNova) -> ThreadingHTTPServer:
    class Keystone(BaseHTTPRequestHandler):
        def _send(self, code: int, doc: Any, token: str | None = None) -> None:
            data = json.dumps(doc).encode()
            self.send_response(code)
            if token:
                self.send_header("X-Subject-Token", token)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            address = self.server.server_address
            assert isinstance(address, tuple)  # a TCP server's (host, port)
            url = f"http://127.0.0.1:{address[1]}/v3/"
            self._send(200, {"version": {"id": "v3.14", "status": "stable", "links": [{"rel": "self", "href": url}]}})

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            user = body["auth"]["identity"]["password"]["user"]
            logins.append(f"{user['name']}@{body['auth']['scope']['project']['name']}")

            def entry(kind: str, url: str) -> dict[str, Any]:
                endpoint = {"id": kind, "interface": "internal", "region": "RegionOne", "region_id": "RegionOne"}
                return {"type": kind, "name": kind, "id": kind, "endpoints": [{**endpoint, "url": url}]}

            domain = {"id": "default", "name": "Default"}
            token = {
                "methods": ["password"],
                "expires_at": "2099-01-01T00:00:00.000000Z",
                "issued_at": "2026-01-01T00:00:00.000000Z",
                "user": {"id": "u", "name": user["name"], "domain": domain},
                "project": {"id": "p", "name": "service", "domain": domain},
                "roles": [{"id": "r", "name": "admin"}],
                "catalog": [entry("compute", f"{nova.url}/compute/v2.1"), entry("placement", f"{nova.url}/placement")],
            }
            self._send(201, {"token": token}, token="a-token")

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Keystone)
    threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
    return server


def main() -> None:
    fake = Discovering()
    with fake.serve():
        identity = keystone(fake)
        fake.add_host("n1")
        fake.add_host("n2")
        server = fake.add_server("vm1", "n1")
        # The Deployment's variables (components/nodes/maintenance.py, compute.py), its password literal here.
        variables = {
            "OS_AUTH_URL": f"http://127.0.0.1:{identity.server_address[1]}/v3",
            "OS_USERNAME": "nova",
            "OS_PASSWORD": "nova-password",
            "OS_PROJECT_NAME": "service",
            "OS_USER_DOMAIN_NAME": "Default",
            "OS_PROJECT_DOMAIN_NAME": "Default",
            "OS_REGION_NAME": "RegionOne",
            "OS_INTERFACE": "internal",
            "OS_COMPUTE_API_VERSION": "2.53",
        }
        nova = Nova(SdkTransport.connect(variables))
        services = {s.host: s for s in nova.compute_services()}
        assert set(services) == {"n1", "n2"}, services
        changed = nova.change_service(services["n1"], plan.ServiceChange(enable=False, reason=plan.CORDONED))
        assert (changed.enabled, changed.reason) == (False, "cordoned"), changed
        assert nova.change_service(changed, plan.ServiceChange(enable=True)).enabled
        hypervisors = {h.host: h for h in nova.hypervisors()}
        assert nova.allocations_on(hypervisors["n1"].id) == {server.id: server.resources}
        assert nova.room(hypervisors["n2"]).free["MEMORY_MB"] == 8192 - 512
        [vm] = nova.servers_on("n1")
        nova.live_migrate(vm)
        assert nova.migration_progress(vm).startswith("migration running"), nova.migration_progress(vm)
        assert nova.last_live_migration(vm) == "its last live migration, from n1, is running"
        try:
            nova.change_service(plan.Service("nope", "n9", True), plan.ServiceChange(enable=True))
            raise AssertionError("an unknown service was updated")
        except NovaError as error:
            assert error.status == 404, error
        assert logins == ["nova@service"], logins
        identity.shutdown()
    print("ok: every call of the controller went through openstacksdk at its microversion")


if __name__ == "__main__":
    main()
