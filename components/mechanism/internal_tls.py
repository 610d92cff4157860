"""Internal TLS: the certificates the APIs, memcached and RabbitMQ serve in the cluster, and the CA clients verify with.

With `tls.internal` naming a CA, every API workload of the catalog (components/tables/catalog.py `apis`:
keystone-api, glance-api, ...) serves HTTPS with the Certificate `<api>-internal-tls`, whose
dnsNames are exactly its Service's cluster names. Only that API's pods mount its Secret (the
kubelet of a node reads whole every Secret its pods name: a key goes only where it is served).
memcached serves `memcached-internal-tls` the same way, naming each of its pods too
(components/infrastructure/memcached.py).

Every OpenStack pod and Job verifies with the CA certificates in `ca.crt` of the Secret
`internal-ca-bundle`, which a Job writes from the trusted CAs (components/infrastructure/ca_rotation.py): one
CA, or two while the CA is being replaced (components/mechanism/internal_ca.py). Each trusted CA reaches it
through a Certificate of its issuer (`<root>-trust`) whose Secret cert-manager writes with that CA
as `ca.crt`. The issuer's own Secret (with `tls.selfSigned`, the root `internal-ca`) holds the
CA's key and is mounted nowhere. The trust Certificates' own key pairs are good for no TLS peer:
their only extended usage is e-mail protection, which a TLS client refuses from a server and a TLS
server from a client. cert-manager writes `ca.crt` for CA and Vault issuers; an ACME issuer writes
none, so `tls.internal.issuer` must be a CA of that kind (README, "Public endpoints and certificates").

kolla-ansible's backend TLS (`kolla_enable_tls_backend`) gives each host one certificate for all
its services, and every client `openstack_cacert`; here each API has its own, as each has its Service.
"""

from __future__ import annotations

from collections.abc import Mapping

import pulumi

from components.mechanism import certificates
from components.mechanism.internal_ca import ROOT, Ca, ca_phase
from components.mechanism.workload import Manifest, Mount
from components.settings.gateway import CA_BUNDLE, InternalTls
from components.settings.model import Settings
from components.tables import catalog

CA = ROOT  # the self-signed root (tls.internal.selfSigned) and the CA Issuer it backs
# Directories, not files (subPath): the kubelet updates a mounted Secret in place, but never a subPath.
CA_DIR = "/etc/openstack-ca"
CA_FILE = f"{CA_DIR}/ca.crt"
SERVER_DIR = "/etc/openstack-tls"
SERVER_CERT, SERVER_KEY = f"{SERVER_DIR}/tls.crt", f"{SERVER_DIR}/tls.key"
CA_VOLUME, SERVER_VOLUME = "internal-ca", "internal-tls"
OWNER = "internal-tls"  # their app.kubernetes.io/name
# The label without which mariadb-operator ignores a change of a Secret its MariaDB names.
MARIADB_OPERATOR_WATCH = {"k8s.mariadb.com/watch": ""}


def secret_name(api: str) -> str:
    """The Certificate and Secret an API (or memcached) serves inside the cluster."""
    return f"{api}-internal-tls"


def apis(settings: Settings) -> tuple[str, ...]:
    """The API workloads (and their Services) of the services the stack deploys."""
    deployed = catalog.deployed(settings.services.enabled())
    return tuple(api for name in deployed for api in catalog.entry(name).apis)


# Every API workload of the catalog, whichever service declares it.
ALL_APIS = frozenset(api for entry in catalog.SERVICES for api in entry.apis)
# Horizon too: the gateway hands it users' passwords and session cookies, which must not cross the
# cluster's network in clear (its uWSGI serves HTTPS as the APIs' do).
DASHBOARD = "horizon"
# And Nova's console proxy: the gateway hands it the console token in the websocket's URL and then
# the console's keystrokes. websockify wraps every new connection with the certificate and key as
# the files hold them then (components/services/nova.py console_proxy_sections), so a renewal needs no restart.
CONSOLE_PROXY = "nova-novncproxy"
ALL_HTTPS = ALL_APIS | {DASHBOARD, CONSOLE_PROXY}


def https_servers(settings: Settings) -> tuple[str, ...]:
    """The HTTP workloads that serve HTTPS under internal TLS: the deployed APIs, Horizon and the console proxy."""
    dashboard = (DASHBOARD,) if settings.services.on(DASHBOARD) else ()
    console = (CONSOLE_PROXY,) if settings.services.on("nova") else ()
    return (*apis(settings), *dashboard, *console)


def serves_tls(settings: Settings, process: str) -> bool:
    """Whether this process serves HTTPS inside the cluster: an API, Horizon or the console proxy, where
    tls.internal names a CA."""
    return settings.tls.internal_enabled and process in ALL_HTTPS


def dns_names(settings: Settings, service: str) -> list[str]:
    """Every name a client in the cluster may reach the Service by (the search path's short names too)."""
    ns = settings.namespace
    return [service, f"{service}.{ns}", f"{service}.{ns}.svc", settings.service_host(service)]


def pod_dns_names(settings: Settings, pods: list[str], headless: str) -> list[str]:
    """Each StatefulSet pod's own name through its headless Service, `<pod>.<headless>.<ns>.svc`,
    without the cluster domain (which the pods' DNS search path completes) and with it."""
    names = [f"{pod}.{headless}.{settings.namespace}.svc" for pod in pods]
    return [*names, *(f"{name}.{settings.endpoints.cluster_domain}" for name in names)]


def rabbitmq_dns_names(settings: Settings, cluster: str, replicas: int) -> list[str]:
    """The client Service's names, and each node's through the headless `<cluster>-nodes` Service.

    The operator calls each node's management API as `<cluster>-server-<i>.<cluster>-nodes.<ns>.svc`
    and the Service's as `<cluster>.<ns>.svc`, verifying the names (internal/rabbitmqclient of
    v2.21.1); its docs/examples/tls names both, with and without the cluster domain.
    """
    pods = [f"{cluster}-server-{i}" for i in range(replicas)]
    return [*dns_names(settings, cluster), *pod_dns_names(settings, pods, f"{cluster}-nodes")]


def issuer(internal: InternalTls) -> dict[str, str]:
    """The issuer of every certificate served inside the cluster: during a CA rotation, the phase's."""
    return ca_phase(internal).signer.issuer


def api_certificate(settings: Settings, api: str, internal: InternalTls) -> Manifest:
    return server_certificate(secret_name(api), dns_names(settings, api), internal)


def server_certificate(secret: str, names: list[str], internal: InternalTls) -> Manifest:
    return {
        "secretName": secret,
        "dnsNames": names,
        "duration": certificates.DURATION,
        "renewBefore": certificates.RENEW_BEFORE,
        "privateKey": certificates.PRIVATE_KEY,
        "usages": ["server auth", "digital signature"],
        "issuerRef": issuer(internal),
    }


def trust_certificate(ca: Ca) -> Manifest:
    """A certificate of the CA's issuer kept for its Secret's ca.crt only: that CA's certificate."""
    return {
        "secretName": ca.trust,
        "commonName": ca.trust,
        "duration": certificates.DURATION,
        "renewBefore": certificates.RENEW_BEFORE,
        "privateKey": certificates.PRIVATE_KEY,
        "usages": ["email protection"],
        "issuerRef": ca.issuer,
    }


def ca_volume() -> Manifest:
    """Only ca.crt of the bundle's Secret: the pod sees no key."""
    items = [{"key": "ca.crt", "path": "ca.crt"}]
    return {"name": CA_VOLUME, "secret": {"secretName": CA_BUNDLE, "items": items, "defaultMode": 0o444}}


def server_volume(api: str) -> Manifest:
    items = [{"key": "tls.crt", "path": "tls.crt"}, {"key": "tls.key", "path": "tls.key"}]
    return {"name": SERVER_VOLUME, "secret": {"secretName": secret_name(api), "items": items, "defaultMode": 0o440}}


CA_MOUNT = Mount(CA_VOLUME, CA_DIR)
SERVER_MOUNT = Mount(SERVER_VOLUME, SERVER_DIR)


class InternalCertificates(pulumi.ComponentResource):
    """The internal CAs (the roots the program makes), a trust Certificate per trusted CA (what the
    bundle Job reads), each API's certificate and those of `servers`: the program's other workloads
    that serve TLS (memcached), each with the names its module declares, as `<workload>-internal-tls`."""

    def __init__(
        self, settings: Settings, servers: Mapping[str, list[str]], opts: pulumi.ResourceOptions | None = None
    ):
        super().__init__("openstack:infra:InternalCertificates", "internal-certificates", None, opts)
        internal = settings.tls.internal
        assert internal is not None and internal.enabled, "built only where tls.internal names a CA"
        ns, cas = settings.namespace, ca_phase(internal)
        for root in cas.roots:
            certificates.self_signed_ca(root, ns, self, owner=OWNER)
        for ca in cas.trusted:
            certificates.cert_manager("Certificate", ca.trust, ns, trust_certificate(ca), self, owner=OWNER)
        for api in https_servers(settings):
            spec = api_certificate(settings, api, internal)
            certificates.cert_manager("Certificate", secret_name(api), ns, spec, self, owner=OWNER)
        for server, names in servers.items():
            spec = server_certificate(secret_name(server), names, internal)
            certificates.cert_manager("Certificate", secret_name(server), ns, spec, self, owner=OWNER)
        self.register_outputs({})
