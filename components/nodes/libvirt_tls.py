"""libvirt's TLS (`tls.libvirt`): live migration and the consoles' VNC on a CA of their own.

With `tls.libvirt` naming a CA (the stack's Issuer or ClusterIssuer, or `selfSigned`: the root
`libvirt-ca` and its CA Issuer, as `tls.internal` makes `internal-ca`):

- **Migration.** libvirtd listens on TLS alone (16514, `listen_tcp = 0`), asks every client for a
  certificate of that CA (libvirt's default, `tls_no_verify_certificate = 0`) and, as before, for
  SASL (SCRAM-SHA-256 over TLS, as kolla-ansible's `libvirt_tls`). nova-compute migrates with
  `live_migration_scheme = tls` (the source's libvirtd calls `qemu+tls://<inbound addr>/system`,
  nova/virt/libvirt/driver.py `_live_migration_uri`) and `live_migration_with_native_tls` (the
  VIR_MIGRATE_TLS flag: QEMU's own TLS for the memory and disk streams, `_handle_native_tls`).
  qemu.conf's `migrate_tls_force` refuses any migration without it.
- **Consoles.** Each guest's VNC server speaks VeNCrypt with x509 (`vnc_tls`) and admits only a
  client certificate of the CA (`vnc_tls_x509_verify`); the console proxy offers VeNCrypt alone
  (`[vnc] auth_schemes = vencrypt`), with its own certificate `nova-novncproxy-vencrypt`.
- **Per-node certificates.** The pod `libvirt-tls` on every compute node asks cert-manager for
  the node's certificate through a CertificateRequest of its own name and writes it where
  libvirt and QEMU read it (components/scripts/libvirt_tls.py): one certificate per node, naming
  its address (what `live_migration_inbound_addr` and the migration URI name) and its name,
  serving as libvirtd's and QEMU's server and client certificate. Its ServiceAccount may create,
  read and delete CertificateRequests, narrowed by a ValidatingAdmissionPolicy to the one named
  after its own node (the node name bound into the pod's token, Kubernetes 1.30) and to this
  CA's issuer: a compromised node gets a certificate of the libvirt CA, never one of the internal
  or public CA. The key is made on the node and never leaves it; the pod reads no Secret.

openstack-helm's libvirt chart makes a Certificate per pod from an init container that may read
and patch every Secret of the namespace, copies it once at start, and serves libvirtd a shared
certificate; kolla-ansible copies per-host files the operator provides and restarts the
containers when they change.
"""

from __future__ import annotations

from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from components.mechanism import certificates, kube
from components.mechanism.created import DeployGraph
from components.mechanism.meta import metadata
from components.mechanism.spec import KUBE_API, Process
from components.mechanism.workload import Manifest, Mount, Probe, env
from components.settings.gateway import LIBVIRT_CA, LibvirtTls
from components.settings.model import Settings
from components.tables.roles import LIBVIRT_TLS_POD

NAME = "libvirt-tls"  # the per-node DaemonSet, its ServiceAccount, Role and RoleBinding
SERVICE, COMPONENT = "nova", "libvirt-tls"
CA = LIBVIRT_CA  # the self-signed root (tls.libvirt.selfSigned) and the CA Issuer it backs
TLS_PORT = 16514  # libvirtd's TLS listener (libvirtd.conf tls_port's default)
SASL_MECH = "SCRAM-SHA-256"  # kolla-ansible's libvirt_sasl_mech_list with TLS
# The host's /run/libvirt, which the libvirt container and libvirt-tls both mount: memory, not disk.
PKI_DIR = "/run/libvirt/pki"
QEMU_TLS_DIR = "/etc/pki/qemu"  # qemu.conf default_tls_x509_cert_dir's default
REQUEST_PREFIX = "libvirt-tls-"  # + the node's name: the CertificateRequest each node's pod makes
PROXY_CERT = "nova-novncproxy-vencrypt"  # the console proxy's VeNCrypt client certificate
PROXY_DIR = "/etc/nova-vencrypt"
PROXY_VOLUME = "vencrypt"
# RSA with key encipherment: libvirt's and QEMU's checks of their own certificates want it where the
# key usage is critical, whatever the key, until late releases (libvirt's virnettlscert.c now exempts
# ECDSA; QEMU's "crypto: stop requiring key encipherment", 2025), and libvirt's guide
# (docs/kbase/tlscerts.rst) issues its servers and clients so.
PRIVATE_KEY = {"algorithm": "RSA", "size": 2048, "rotationPolicy": "Always"}
NODE_USAGES = ("digital signature", "key encipherment", "server auth", "client auth")
CHECK_SECONDS = 300


def enabled(settings: Settings) -> bool:
    return settings.tls.libvirt is not None and settings.services.on("nova")


def in_pods(settings: Settings) -> bool:
    """Whether the program runs libvirt, and so its certificates (options 2 and 3: the host's)."""
    return enabled(settings) and not settings.hypervisor_isolation.host_runs_hypervisor


def issuer(libvirt: LibvirtTls) -> dict[str, str]:
    if libvirt.issuer is not None:
        return certificates.issuer(libvirt.issuer.kind, libvirt.issuer.name)
    return certificates.issuer("Issuer", CA)


def access_name(settings: Settings) -> str:
    """The ValidatingAdmissionPolicy (cluster-scoped: the namespace in its name), and the graph's node."""
    return f"{settings.namespace}-{NAME}"


def account(settings: Settings) -> str:
    return f"system:serviceaccount:{settings.namespace}:{NAME}"


# -- configuration ---------------------------------------------------------------------------------


def libvirtd_options() -> dict[str, object]:
    """libvirtd.conf under TLS: the TLS listener alone. key_file, cert_file and ca_file keep their
    defaults (/etc/pki/...), the only paths `virt-admin server-update-tls` reads again."""
    return {"listen_tls": 1, "listen_tcp": 0, "tls_port": f'"{TLS_PORT}"', "auth_tls": '"sasl"'}


def qemu_options() -> dict[str, object]:
    """qemu.conf under TLS: VeNCrypt with client certificates, migrations only over TLS."""
    return {
        "default_tls_x509_cert_dir": f'"{QEMU_TLS_DIR}"',
        "default_tls_x509_verify": 1,
        "vnc_tls": 1,
        "vnc_tls_x509_verify": 1,
        "migrate_tls_force": 1,
    }


def nova_compute_options() -> dict[str, object]:
    return {"live_migration_scheme": "tls", "live_migration_with_native_tls": True}


def console_proxy_options() -> dict[str, object]:
    """[vnc] of the console proxy: VeNCrypt alone (nova/console/rfb/authvencrypt.py: X509None, the
    chain verified against the CA; a VNC server that offers no VeNCrypt is refused, never met in clear)."""
    return {
        "auth_schemes": "vencrypt",
        "vencrypt_client_key": f"{PROXY_DIR}/tls.key",
        "vencrypt_client_cert": f"{PROXY_DIR}/tls.crt",
        "vencrypt_ca_certs": f"{PROXY_DIR}/ca.crt",
    }


def proxy_volume() -> Manifest:
    items = [{"key": k, "path": k} for k in ("tls.crt", "tls.key", "ca.crt")]
    return {"name": PROXY_VOLUME, "secret": {"secretName": PROXY_CERT, "items": items, "defaultMode": 0o440}}


# A directory, not files: the kubelet swaps a renewed Secret's files in place; nova opens them per connection.
PROXY_MOUNT = Mount(PROXY_VOLUME, PROXY_DIR)


def libvirt_env() -> tuple[Manifest, ...]:
    """What libvirt_start.sh links /etc/pki's directories from, and how long it waits for the node's certificate."""
    return (env("LIBVIRT_PKI_DIR", PKI_DIR), env("LIBVIRT_PKI_WAIT", "600"))


def node_process(settings: Settings) -> Process:
    """The container of the pod libvirt-tls (components/scripts/libvirt_tls.py)."""
    libvirt = settings.tls.libvirt
    assert libvirt is not None
    ref = issuer(libvirt)
    return Process(
        name=NAME,
        image="nova-libvirt",
        command=("python3", "/scripts/libvirt_tls.py"),
        needs=(access_name(settings),),
        scripts=("libvirt_tls.py", KUBE_API),
        env=(
            {"name": "NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
            {"name": "NODE_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.hostIP"}}},
            env("ISSUER_KIND", ref["kind"]),
            env("ISSUER_NAME", ref["name"]),
            env("DURATION", certificates.DURATION),
            env("QEMU_GROUP", "nova"),  # components/nodes/libvirt.py QEMU_GROUP
            env("PKI_DIR", PKI_DIR),
            env("CHECK_SECONDS", str(CHECK_SECONDS)),
        ),
        probe=Probe(command=("python3", "/scripts/libvirt_tls.py", "check")),
        service_account=NAME,
        node_pod=LIBVIRT_TLS_POD,
    )


# -- what the nodes' pods may ask the API ----------------------------------------------------------

REQUEST_RULES = [
    {"apiGroups": ["cert-manager.io"], "resources": ["certificaterequests"], "verbs": ["create", "get", "delete"]}
]
NODE_NAME_KEY = "authentication.kubernetes.io/node-name"  # in a pod's bound token (Kubernetes 1.30)


def request_policy_spec(settings: Settings) -> dict[str, Any]:
    """A CertificateRequest the nodes' account may create or delete: its own node's only, of this CA's issuer."""
    libvirt = settings.tls.libvirt
    assert libvirt is not None
    ref = issuer(libvirt)
    own = f"'{REQUEST_PREFIX}' + request.userInfo.extra['{NODE_NAME_KEY}'][0]"
    has_node = f"'{NODE_NAME_KEY}' in request.userInfo.extra && size(request.userInfo.extra['{NODE_NAME_KEY}']) == 1"
    usages = "[" + ", ".join(f"'{u}'" for u in NODE_USAGES) + "]"
    return {
        "failurePolicy": "Fail",
        "matchConstraints": {
            "resourceRules": [
                {
                    "apiGroups": ["cert-manager.io"],
                    "apiVersions": ["*"],
                    "operations": ["CREATE", "UPDATE", "DELETE"],
                    "resources": ["certificaterequests"],
                }
            ]
        },
        "matchConditions": [{"name": NAME, "expression": f"request.userInfo.username == '{account(settings)}'"}],
        "validations": [
            {
                "expression": has_node,
                "message": f"{NAME}: the request comes from a pod's token that names its node ({NODE_NAME_KEY})",
            },
            {
                "expression": f"{has_node} && request.name == {own}",
                "message": f"{NAME} may create or delete only {REQUEST_PREFIX}<its own node's name>",
            },
            {
                "expression": "request.operation == 'DELETE' || ("
                f"object.spec.issuerRef.name == '{ref['name']}' && "
                f"object.spec.issuerRef.kind == '{ref['kind']}' && "
                "(!has(object.spec.issuerRef.group) || object.spec.issuerRef.group == 'cert-manager.io'))",
                "message": f"{NAME} asks only {ref['kind']} {ref['name']} (tls.libvirt) for certificates",
            },
            {
                "expression": "request.operation == 'DELETE' || ("
                "(!has(object.spec.isCA) || !object.spec.isCA) && "
                f"(!has(object.spec.usages) || object.spec.usages.all(u, u in {usages})))",
                "message": f"{NAME} asks for a node's certificate only: no CA, usages among {', '.join(NODE_USAGES)}",
            },
        ],
    }


def proxy_certificate(libvirt: LibvirtTls) -> Manifest:
    """The console proxy's client certificate towards the guests' VNC servers."""
    return {
        "secretName": PROXY_CERT,
        "commonName": "nova-novncproxy",
        "duration": certificates.DURATION,
        "renewBefore": certificates.RENEW_BEFORE,
        "privateKey": PRIVATE_KEY,
        "usages": ["client auth", "digital signature", "key encipherment"],
        "issuerRef": issuer(libvirt),
    }


class LibvirtCertificates(pulumi.ComponentResource):
    """The libvirt CA (when the program makes it) and the console proxy's certificate. No edge in the
    graph: the proxy's pod waits in ContainerCreating until cert-manager writes its Secret."""

    def __init__(self, settings: Settings, opts: pulumi.ResourceOptions | None = None):
        super().__init__("openstack:compute:LibvirtCertificates", "libvirt-certificates", None, opts)
        libvirt = settings.tls.libvirt
        assert libvirt is not None, "built only where tls.libvirt names a CA"
        if libvirt.self_signed:
            certificates.self_signed_ca(CA, settings.namespace, self, owner=NAME)
        spec = proxy_certificate(libvirt)
        certificates.cert_manager("Certificate", PROXY_CERT, settings.namespace, spec, self, owner=NAME)
        self.register_outputs({})


class LibvirtNodeAccess(pulumi.ComponentResource):
    """The compute nodes' right to ask for their certificates; registered in the deploy graph under
    the policy's name, which the libvirt-tls DaemonSets wait for."""

    def __init__(self, settings: Settings, graph: DeployGraph, opts: pulumi.ResourceOptions | None = None):
        super().__init__("openstack:compute:LibvirtNodeAccess", NAME, None, opts)
        ns, cluster, child = settings.namespace, access_name(settings), pulumi.ResourceOptions(parent=self)
        meta = metadata(NAME, ns, SERVICE, COMPONENT)
        k8s.core.v1.ServiceAccount(NAME, metadata=meta, automount_service_account_token=False, opts=child)
        role = k8s.rbac.v1.Role(NAME, metadata=meta, rules=REQUEST_RULES, opts=child)
        narrowing = kube.admission_policy(cluster, SERVICE, COMPONENT, request_policy_spec(settings), self)
        # The right to ask exists only once the policy narrows it.
        k8s.rbac.v1.RoleBinding(
            NAME,
            metadata=meta,
            role_ref={"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": NAME},
            subjects=[{"kind": "ServiceAccount", "name": NAME, "namespace": ns}],
            opts=pulumi.ResourceOptions(parent=self, depends_on=[role, *narrowing]),
        )
        graph.add(cluster, self)
        self.register_outputs({})
