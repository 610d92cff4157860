"""The one place where a Job's cluster addresses and file locations become local ones.

A Job in the cluster reaches `mariadb.<ns>.svc.<clusterDomain>:3306` and reads its files
at `/etc/<service>/…`, `/scripts/…` and `/var/lib/<service>/…`. Run on this machine, the
same text must point at the servers on loopback and at a directory of the run. Nothing
else is rewritten: every other host name (the catalog's `nova-api.…` URLs) and every
other value reaches the software exactly as the plan has it.

Three rules, applied alike to env values, rendered files, script text and command args:
- `[<pod>.]<served service or alias>.<ns>.svc.<domain>[:<port>]` → `127.0.0.1[:<local port>]`;
- `0.0.0.0:<port of a served service>` (a server's listen address) → `127.0.0.1:<local port>`;
- an absolute path under /etc/, /scripts/ or /var/lib/ → the same path under `root`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path

from components.mechanism import oslo
from components.mechanism.bootstrap import RABBITMQ_ADMIN_SECRET
from components.settings.model import Settings

LOOPBACK = "127.0.0.1"
# The Services a Job talks to that run here, and their ports in the cluster.
SERVED: dict[str, tuple[int, ...]] = {
    "mariadb": (oslo.MARIADB_PORT,),
    "rabbitmq": (oslo.RABBITMQ_PORT, oslo.RABBITMQ_MANAGEMENT_PORT),
    "memcached": (oslo.MEMCACHED_PORT,),
    "keystone-api": (oslo.KEYSTONE_PORT,),
}
# Other names of those servers in the cluster: under HA the database is reached through
# Galera's write Service (oslo.database_service). A StatefulSet's pods are reached by their
# own names in front of their headless Service (memcached-0.memcached...): one server here.
ALIASES = {f"{oslo.MARIADB}-primary": oslo.MARIADB}
_POD = r"(?:[a-z0-9](?:[-a-z0-9]*[a-z0-9])?\.)?"
# Where pods find their mounted files and the directories their images provide. Not
# after a word, dot, colon or slash, so URL paths and already mapped paths stay alone.
_PATH = re.compile(r"(?<![\w.:/-])/(etc|scripts|var/lib)/")
_STATE_DIR = re.compile(r"(?<![\w.:/-])/var/lib/([\w.-]+)")
# Without --config-file, a WSGI app finds its config where the image keeps it
# (/etc/<project>/); here the app is told where that directory is instead.
CONFIG_DIR_ENV: dict[str, tuple[str, str]] = {"keystone-api": ("OS_KEYSTONE_CONFIG_DIR", "/etc/keystone")}


class UnmappedPortError(ValueError):
    pass


@dataclass(frozen=True)
class LocalMapping:
    namespace: str
    cluster_domain: str
    ports: Mapping[tuple[str, int], int]  # (Service, port in the cluster) → local port
    root: Path  # this pod's filesystem: /etc/x lives at root/etc/x
    # Secrets an operator creates in the cluster (no plan holds them), with local values.
    operator_secrets: Mapping[str, Mapping[str, str]] = field(default_factory=dict, repr=False)

    @classmethod
    def for_stack(
        cls,
        settings: Settings,
        ports: Mapping[tuple[str, int], int],
        root: Path,
        rabbitmq_admin: tuple[str, str],
    ) -> LocalMapping:
        missing = [(s, p) for s, served in SERVED.items() for p in served if (s, p) not in ports]
        if missing:
            raise UnmappedPortError(f"no local port for {missing}")
        user, password = rabbitmq_admin
        return cls(
            namespace=settings.namespace,
            cluster_domain=settings.endpoints.cluster_domain,
            ports=dict(ports),
            root=root,
            operator_secrets={RABBITMQ_ADMIN_SECRET: {"username": user, "password": password}},
        )

    def for_pod(self, root: Path) -> LocalMapping:
        """The same addresses, with the files of another pod."""
        return replace(self, root=root)

    @property
    def _host(self) -> re.Pattern[str]:
        names = sorted({*SERVED, *ALIASES}, key=len, reverse=True)  # the longest name first
        services = "|".join(re.escape(s) for s in names)
        suffix = re.escape(f".{self.namespace}.svc.{self.cluster_domain}")
        return re.compile(rf"\b{_POD}(?P<service>{services}){suffix}(?::(?P<port>\d+))?\b")

    def local_port(self, service: str, port: int) -> int:
        try:
            return self.ports[(service, port)]
        except KeyError:
            raise UnmappedPortError(f"{service}:{port} is not served locally") from None

    def url(self, service: str, port: int, path: str = "") -> str:
        """A served Service as reached from here, e.g. keystone-api:5000 → http://127.0.0.1:N."""
        return f"http://{LOOPBACK}:{self.local_port(service, port)}{path}"

    def text(self, value: str) -> str:
        def host(match: re.Match[str]) -> str:
            port, service = match["port"], ALIASES.get(match["service"], match["service"])
            return LOOPBACK if port is None else f"{LOOPBACK}:{self.local_port(service, int(port))}"

        def listen(match: re.Match[str]) -> str:
            local = [p for (_, cluster), p in self.ports.items() if cluster == int(match[1])]
            return f"{LOOPBACK}:{local[0]}" if len(local) == 1 else match[0]

        value = self._host.sub(host, value)
        value = re.sub(r"\b0\.0\.0\.0:(\d+)\b", listen, value)
        return _PATH.sub(lambda m: f"{self.root}/{m[1]}/", value)

    def image_dirs(self, text: str) -> set[Path]:
        """The /var/lib/<service> directories a text names; the images create them."""
        return {self.path(f"/var/lib/{name}") for name in _STATE_DIR.findall(text)}

    def implicit_env(self, workload: str) -> dict[str, str]:
        if workload not in CONFIG_DIR_ENV:
            return {}
        variable, directory = CONFIG_DIR_ENV[workload]
        return {variable: str(self.path(directory))}

    def path(self, absolute: str) -> Path:
        """Where a pod's absolute path lives here."""
        if not absolute.startswith("/"):
            raise ValueError(f"{absolute!r} is not an absolute path")
        return self.root / absolute.lstrip("/")
