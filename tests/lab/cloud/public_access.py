"""The front door in the lab: cert-manager's and the Gateway's stand-ins, and the proof from a laptop outside.

1. Before the deploy, the cert-manager stand-in (tests/lab/cloud/certmanager.py) issues every
   Certificate of the plan into its Secret, which the pods and the lab's API server then see.
2. After it, the Gateway's proxy (tests/lab/cloud/gateway.py) is programmed from the plan's Gateway or,
   where the stack attaches to the cluster's, the Gateway its owner keeps (a stand-in, reported),
   and the plan's HTTPRoutes and ReferenceGrants; it runs as a pod of the proxies' namespace, which
   the NetworkPolicies of Horizon and the console proxy admit.
   The gateway speaks TLS to each backend a BackendTLSPolicy targets, verifying the policy's CA
   and hostname (tests/lab/cloud/backendtls.py), and sends nothing to one whose policy is invalid.
3. A laptop outside the cluster (tests/lab/cloud/laptop.py), trusting only the public certificate's
   root, runs tests/lab/cloud/public_scenario.py through the gateway; the user's pod, inside the
   cluster, must not reach Horizon or the console proxy past the gateway.
Its findings are report.json's `tls`; tests/lab/cloud/run.py adds `encrypted`, TLS inside the cluster
(tests/lab/cloud/endpoint_tls.py), and `rotation`, every certificate renewed under load (tests/lab/cloud/rotation.py).
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cryptography import x509

from components.mechanism.certificates import PUBLIC_TLS
from components.mechanism.oslo import KEYSTONE, public_url
from components.services.specs import public_routes
from components.settings.gateway import ENVOY_PROXY_LABELS
from tests.lab.cloud.backendtls import BackendTlsPolicies
from tests.lab.cloud.certmanager import CertManager, Issued
from tests.lab.cloud.gateway import LOAD_BALANCER_ADDRESS, PROXY_NETNS, GatewayProxy
from tests.lab.cloud.gatewayapi import Backend, Gateway, Programmed, owners_gateway, plan_gateway, program
from tests.lab.cloud.isolation import connects
from tests.lab.cloud.laptop import Laptop
from tests.lab.cloud.userpod import NETNS as USER_NETNS
from tools.runtime import REPO

if TYPE_CHECKING:
    from tests.lab.cloud.apiserver import LabApiServer
    from tests.lab.cloud.deploy import Cloud


def _describe(issued_chain: tuple[x509.Certificate, ...]) -> dict[str, Any]:
    leaf = issued_chain[0]
    try:
        names = leaf.extensions.get_extension_for_class(x509.SubjectAlternativeName).value.get_values_for_type(
            x509.DNSName
        )
    except x509.ExtensionNotFound:  # a CA's certificate names no host
        names = []
    return {
        "dns_names": names,
        "not_after": leaf.not_valid_after_utc.isoformat(),
        "issued_by": leaf.issuer.rfc4514_string(),
        "chain": len(issued_chain),
    }


def _backends(programmed: Programmed) -> dict[str, str]:
    """How the gateway speaks to each routed Service: TLS verifying a name, or plain HTTP."""
    found = {}
    for route in programmed.routes:
        for rule in route.rules:
            for b in rule.backends:
                plain = "plain HTTP (no BackendTLSPolicy)"
                how = f"TLS, verifying {b.tls.hostname} ({b.tls.policy})" if b.tls else plain
                found[f"{b.namespace}/{b.service}:{b.port}"] = how
    return found


@dataclass
class FrontDoor:
    cloud: Cloud
    log: Callable[[str], None]
    certs: CertManager
    problems: list[str] = field(default_factory=list)  # Certificates left unissued
    gateway: Gateway | None = None
    proxy: GatewayProxy | None = None
    laptop: Laptop | None = None
    api: LabApiServer | None = None  # where the cloud's Jobs write (the bundle Job's ConfigMaps)

    @classmethod
    def issue(cls, cloud: Cloud, api: LabApiServer, log: Callable[[str], None]) -> FrontDoor:
        """cert-manager's work, before any pod that mounts a certificate's Secret starts."""
        certs = CertManager([r.revealed for r in cloud.plan.custom])
        door = cls(cloud, log, certs, certs.issue_all(), api=api)
        namespace = cloud.plan.settings.namespace
        for (where, name), issued in certs.secrets.items():
            api.add_secret(where, issued.manifest())
            if where == namespace:
                cloud.objects[("Secret", name)] = dict(issued.data)
            log(f"cert-manager (stand-in): Secret {where}/{name} issued for Certificate {issued.certificate}")
        for problem in door.problems:
            log(f"cert-manager (stand-in): {problem}")
        return door

    def renew(self, api: LabApiServer, namespace: str, certificate: str) -> Issued:
        """cert-manager renewing one Certificate: its new Secret in the API server, and in the cloud's pods
        after the kubelet's sync (Cloud.api_update_secret), as issue() put the first one there."""
        issued = self._publish(api, self.certs.renew(namespace, certificate))
        self.log(f"cert-manager (stand-in): renewed Certificate {namespace}/{certificate} into Secret {issued.name}")
        return issued

    def apply(self, api: LabApiServer, resources: list[dict[str, Any]]) -> list[Issued]:
        """cert-manager after a `pulumi up` of a later plan: the Certificates it added or changed issued, published."""
        issued = [self._publish(api, i) for i in self.certs.apply(resources)]
        for i in issued:
            by = f"{i.annotations['cert-manager.io/issuer-kind']} {i.annotations['cert-manager.io/issuer-name']}"
            self.log(f"cert-manager (stand-in): issued Certificate {i.namespace}/{i.certificate} by {by}")
        return issued

    def _publish(self, api: LabApiServer, issued: Issued) -> Issued:
        api.add_secret(issued.namespace, issued.manifest())
        if issued.namespace == self.cloud.plan.settings.namespace:
            self.cloud.api_update_secret(issued.namespace, issued.name, issued.data)
        return issued

    def backend_cas_changed(self) -> list[str]:
        """The gateway takes a changed CA of its BackendTLSPolicies hot (Envoy Gateway watches their Secrets)."""
        if self.proxy is None or self.gateway is None:
            return []
        return self.proxy.swap_backend_cas(self._program(self.gateway))

    def stand_ins(self) -> list[dict[str, str]]:
        """What plays the cluster's parts here, for the report's not_run."""
        found = [{"what": "cert-manager", "why": "a stand-in issues each Certificate into its Secret as cert-manager "
                  "v1.21 writes it (tests/lab/cloud/certmanager.py): selfSigned and CA issuers exactly"}]  # fmt: skip
        found += [{"what": what, "why": why} for what, why in self.certs.stand_ins.items()]
        if self.gateway is not None:
            found.append({"what": "the Gateway's implementation (Envoy Gateway's proxy)", "why": "Debian's haproxy, "
                          "programmed from the Gateway API objects with Envoy's edge headers and default timeouts, "
                          "and TLS to the backends BackendTLSPolicies target as Envoy Gateway verifies them "
                          "(tests/lab/cloud/gateway.py, backendtls.py)"})  # fmt: skip
            if self.gateway.stand_in:
                found.append({"what": f"Gateway {self.gateway.namespace}/{self.gateway.name}",
                              "why": self.gateway.stand_in})  # fmt: skip
        return found

    def _gateway(self) -> Gateway | None:
        settings = self.cloud.plan.settings
        found = plan_gateway(r.revealed for r in self.cloud.plan.custom)
        if found is None and settings.gateway is not None and settings.gateway.existing is not None:
            existing = settings.gateway.existing
            found = owners_gateway(existing.name, existing.namespace, existing.section_name or "https",
                                   (settings.namespace, PUBLIC_TLS))  # fmt: skip
        return found

    def secret_data(self, namespace: str, name: str) -> Mapping[str, str]:
        if (namespace, name) in self.certs.secrets:
            return self.certs.secrets[(namespace, name)].data
        if namespace == self.cloud.plan.settings.namespace and ("Secret", name) in self.cloud.objects:
            return self.cloud.objects[("Secret", name)]
        raise LookupError(f"Secret {namespace}/{name} does not exist: the listener has no certificate")

    def _object(self, kind: str, namespace: str, name: str) -> Mapping[str, str] | None:
        """A Secret's or ConfigMap's data as the cluster has it now; None where it does not exist."""
        if kind == "Secret":
            try:
                return self.secret_data(namespace, name)
            except LookupError:
                return None
        if kind == "ConfigMap" and self.api is not None:  # written through the API (the CA bundle Job's)
            found = self.api.get_object("", "configmaps", namespace, name)
            if found is not None:
                return dict(found.get("data") or {})
        if namespace == self.cloud.plan.settings.namespace:
            return self.cloud.objects.get((kind, name))
        return None

    def _port_name(self, namespace: str, service: str, port: int) -> str | None:
        for found in self.cloud.table.services:
            if (found.namespace, found.name) == (namespace, service):
                return next((p.name or None for p in found.ports if p.port == port), None)
        return None

    def _address(self, backend: Backend) -> str | None:
        service = next((s for s in self.cloud.table.services
                        if (s.namespace, s.name) == (backend.namespace, backend.service)), None)  # fmt: skip
        return service.cluster_ip if service is not None else None

    def _program(self, gateway: Gateway) -> Programmed:
        """The plan's routes on the Gateway, each backend's TLS resolved from the objects as they are now."""
        kinds: dict[str, list[dict[str, Any]]] = {"HTTPRoute": [], "ReferenceGrant": [], "BackendTLSPolicy": []}
        for r in self.cloud.plan.custom:
            if r.kind in kinds:
                kinds[r.kind].append(r.revealed)
        policies = BackendTlsPolicies(kinds["BackendTLSPolicy"], self._object, self._port_name)
        return program(gateway, kinds["HTTPRoute"], kinds["ReferenceGrant"], backend_tls=policies)

    def open_gateway(self) -> None:
        """The Gateway's proxy pod, programmed from the plan's routes, on the control-plane node."""
        settings = self.cloud.plan.settings
        self.gateway = self._gateway()
        if self.gateway is None or settings.gateway is None:
            return
        programmed = self._program(self.gateway)
        proxies = settings.gateway.proxies
        labels = {
            **(dict(proxies.labels) or ENVOY_PROXY_LABELS),
            "gateway.envoyproxy.io/owning-gateway-name": self.gateway.name,
            "gateway.envoyproxy.io/owning-gateway-namespace": self.gateway.namespace,
        }
        node = self.cloud.cluster.control_plane
        state = self.cloud.cluster.state / "gateway"
        log_file = self.cloud.out / "logs" / "gateway" / "haproxy.log"
        self.proxy = GatewayProxy(programmed, node, state, log_file, proxies.namespace, labels)
        self.proxy.write(self.secret_data, self._address)
        self.proxy.start()
        self.cloud.network_policies.add(self.proxy.pod_address())
        self.log(f"gateway (stand-in): {self.proxy.pod_name} at {LOAD_BALANCER_ADDRESS}, "
                 f"{len(programmed.routes)} routes, problems {programmed.problems}")  # fmt: skip

    def _reach(self) -> dict[str, Any]:
        """The Services only the gateway may reach (their NetworkPolicies admit the proxies alone):
        refused from the user's pod, reached from the proxy's."""
        found: dict[str, Any] = {}
        for route in public_routes(self.cloud.plan.settings):
            if route.gateway_only:
                address = self.cloud.table.address(route.backend)
                found[route.backend] = {
                    "from_user_pod": connects(USER_NETNS, address, route.port),
                    "from_gateway": connects(PROXY_NETNS, address, route.port),
                }
        found["ok"] = bool(found) and all(not v["from_user_pod"] and v["from_gateway"] for v in found.values())
        return found

    def prove(self, python: Path, disk: Path, admin: Mapping[str, str]) -> dict[str, Any]:
        """The proof from outside: report.json's `tls`."""
        if self.gateway is None or self.proxy is None:
            return {"public_endpoints_ok": False, "checks": {}, "not_run": "the stack routes nothing (no gateway)"}
        settings = self.cloud.plan.settings
        hosts = {route.host_key: route.hostname for route in public_routes(settings)}
        listener = self.proxy.programmed.listeners[0]
        namespace, name = listener.certificates[0]
        issued = self.certs.secrets.get((namespace, name))
        anchor = issued.trust_anchor if issued else self.secret_data(namespace, name).get("ca.crt", "")
        self.laptop = Laptop(self.cloud.cluster.state / "laptop", dict.fromkeys(hosts.values(), self.proxy.address),
                             anchor, self.proxy.address, self.proxy.node.ip)  # fmt: skip
        self.laptop.start()
        env = {
            "PATH": f"{python.parent}:/usr/sbin:/usr/bin:/sbin:/bin",
            "PYTHONPATH": str(REPO),
            "HOME": str(self.laptop.home),
            **admin,
            "OS_AUTH_URL": public_url(settings, KEYSTONE, "/v3"),
            "OS_INTERFACE": "public",
            **self.laptop.environment(),
            "PUBLIC_HOSTS": json.dumps(hosts),
            "FLAVOR": "tiny",  # the user scenario's (tests/lab/cloud/scenario.py)
            "NETWORK": "private",
        }
        command = [str(python), "-m", "tests.lab.cloud.public_scenario", str(disk)]
        with (self.cloud.out / "public-scenario.log").open("w") as log:
            done = self.laptop.run(command, env=env, cwd=REPO, stdout=subprocess.PIPE, stderr=log, timeout=1500)
        try:
            checks = dict(json.loads(done.stdout.strip().splitlines()[-1])["checks"])
        except (IndexError, KeyError, json.JSONDecodeError):
            checks = {"laptop": {"ok": False, "error": f"exited {done.returncode} without facts; see "
                                 f"{self.cloud.out / 'public-scenario.log'}"}}  # fmt: skip
        checks["gateway_only"] = self._reach()
        return self.report(checks, hosts)

    def report(self, checks: dict[str, Any], hosts: Mapping[str, str]) -> dict[str, Any]:
        assert self.gateway is not None and self.proxy is not None
        programmed = self.proxy.programmed
        problems = programmed.problems + self.problems
        routed = {h for r in programmed.routes for h in r.hostnames}
        passed = bool(checks) and all(c.get("ok") for c in checks.values())
        return {
            "public_endpoints_ok": passed and not problems and set(hosts.values()) <= routed,
            "checks": checks,
            "gateway": {
                "name": f"{self.gateway.namespace}/{self.gateway.name}",
                "stand_in": self.gateway.stand_in,
                "proxy": f"haproxy in pod {self.proxy.namespace}/{self.proxy.pod_name}",
                "address": self.proxy.address,
                "listeners": [f"{ln.name} {ln.protocol}:{ln.port}" for ln in programmed.listeners],
                "routes": {r.name: sorted(r.hostnames) for r in programmed.routes},
                "unrouted_public_hosts": sorted(set(hosts.values()) - routed),
                "problems": problems,
                # Each BackendTLSPolicy: Accepted (its backends over TLS, verified), or why its backends get nothing.
                "backend_tls": programmed.backend_tls,
                "backends": _backends(programmed),
            },
            "certificates": {
                f"{ns}/{name}": {
                    **_describe(issued.chain),
                    "certificate": issued.certificate,
                    "issuer": f"{issued.annotations['cert-manager.io/issuer-kind']} "
                    f"{issued.annotations['cert-manager.io/issuer-name']}",
                }
                for (ns, name), issued in self.certs.secrets.items()
            },
        }

    def stop(self) -> None:
        if self.laptop is not None:
            self.laptop.stop()
        if self.proxy is not None:
            self.proxy.stop()
