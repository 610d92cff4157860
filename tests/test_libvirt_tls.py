"""`tls.libvirt` in the plan: libvirt's listener, QEMU's TLS, nova's options, the console proxy's
certificate, the per-node certificate keeper and what its account may ask of the API.

What the configuration does with the real software is tests/real/test_libvirt_tls.py's; here, what
the plan declares, and that the ValidatingAdmissionPolicy admits a node's own request only (its CEL
evaluated with cel-python: tests/admission.py).
"""

from __future__ import annotations

import configparser
from typing import Any

import pytest

from components.nodes import libvirt_tls
from tests.admission import admits as policy_admits
from tests.conftest import plan_of
from tests.helpers import containers, objects, pod_template
from tools.plan import Plan

GROUP = "kvm-general"  # prod's node group


@pytest.fixture(scope="module")
def prod() -> Plan:
    return plan_of("prod")


def _files(plan: Plan, secret: str = "compute-etc") -> dict[str, str]:
    return dict(plan.by_name(secret, "Secret").revealed["stringData"])


def _key_values(text: str) -> dict[str, str]:
    return dict(line.split(" = ", 1) for line in text.splitlines() if line)


def test_libvirtd_listens_on_tls_alone_with_sasl_over_it(prod: Plan) -> None:
    files = _files(prod)
    libvirtd = _key_values(files[f"libvirtd-{GROUP}.conf"])
    assert libvirtd["listen_tls"] == "1" and libvirtd["listen_tcp"] == "0"
    assert libvirtd["tls_port"] == '"16514"' and libvirtd["auth_tls"] == '"sasl"'
    # The default certificate paths: the only ones `virt-admin server-update-tls` reads again.
    assert not {"key_file", "cert_file", "ca_file", "tcp_port", "auth_tcp"} & set(libvirtd)
    assert files["libvirt-sasl.conf"].startswith("mech_list: SCRAM-SHA-256\n")
    qemu = _key_values(files[f"qemu-{GROUP}.conf"])
    assert qemu["vnc_tls"] == qemu["vnc_tls_x509_verify"] == qemu["migrate_tls_force"] == "1"
    assert qemu["default_tls_x509_cert_dir"] == '"/etc/pki/qemu"'


@pytest.mark.parametrize("stack", ["dev", "staging"])
def test_without_tls_libvirt_the_stacks_keep_tcp_with_sasl(stack: str) -> None:
    stack_plan = plan_of(stack)
    assert stack_plan.settings.tls.libvirt is None
    files = _files(stack_plan)
    for name, text in files.items():
        if name.startswith("libvirtd-"):
            assert _key_values(text)["listen_tcp"] == "1" and _key_values(text)["auth_tcp"] == '"sasl"'
        if name.startswith("qemu-"):
            assert "vnc_tls" not in text and "migrate_tls" not in text
    assert files["libvirt-sasl.conf"].startswith("mech_list: DIGEST-MD5\n")
    assert not [name for name in objects(stack_plan, "DaemonSet") if name.startswith("libvirt-tls")]
    assert "auth_schemes" not in _files(stack_plan, "nova-etc").get("nova-novncproxy.conf", "")


def test_nova_compute_migrates_over_tls_with_qemus_own_tls(prod: Plan) -> None:
    nova = configparser.ConfigParser(interpolation=None)
    nova.read_string(_files(prod)[f"nova-{GROUP}.conf"])
    assert nova["libvirt"]["live_migration_scheme"] == "tls"
    assert nova["libvirt"]["live_migration_with_native_tls"] == "true"
    assert "live_migration_tunnelled" not in nova["libvirt"]  # nova refuses both (driver.py init_host)


def test_the_console_proxy_alone_holds_its_vencrypt_certificate(prod: Plan) -> None:
    proxy = configparser.ConfigParser(interpolation=None)
    proxy.read_string(_files(prod, "nova-etc")["nova-novncproxy.conf"])
    assert dict(proxy["vnc"]) == {
        "auth_schemes": "vencrypt",
        "vencrypt_client_key": "/etc/nova-vencrypt/tls.key",
        "vencrypt_client_cert": "/etc/nova-vencrypt/tls.crt",
        "vencrypt_ca_certs": "/etc/nova-vencrypt/ca.crt",
    }
    mounting = [
        f"{name}/{c['name']}"
        for kind in ("Deployment", "DaemonSet", "StatefulSet", "Job", "CronJob")
        for name, r in objects(prod, kind).items()
        if any(
            v.get("secret", {}).get("secretName") == libvirt_tls.PROXY_CERT
            for v in pod_template(r)["spec"].get("volumes", [])
        )
        for c in containers(r)
        if any(m["mountPath"] == libvirt_tls.PROXY_DIR for m in c.get("volumeMounts", []))
    ]
    assert mounting == ["nova-novncproxy/nova-novncproxy"]
    certificate = prod.by_name(libvirt_tls.PROXY_CERT, "Certificate").inputs["spec"]
    assert certificate["issuerRef"] == {"group": "cert-manager.io", "kind": "Issuer", "name": "libvirt-ca"}
    assert "client auth" in certificate["usages"] and "server auth" not in certificate["usages"]


def test_each_compute_node_group_runs_the_certificate_keeper_with_its_own_account(prod: Plan) -> None:
    daemonset = prod.by_name(f"libvirt-tls-{GROUP}", "DaemonSet")
    pod = pod_template(daemonset)["spec"]
    assert pod["serviceAccountName"] == "libvirt-tls" and pod["automountServiceAccountToken"] is True
    assert "hostNetwork" not in pod and "hostPID" not in pod
    [container] = containers(daemonset)
    security = container["securityContext"]
    assert security["capabilities"] == {"drop": ["ALL"], "add": ["CHOWN"]} and "privileged" not in security
    assert [m["mountPath"] for m in container["volumeMounts"] if not m["mountPath"].startswith("/scripts/")] == [
        "/run/libvirt"
    ]
    env = {e["name"]: e.get("value", e.get("valueFrom")) for e in container["env"]}
    assert env["NODE_IP"] == {"fieldRef": {"fieldPath": "status.hostIP"}}
    assert env["NODE_NAME"] == {"fieldRef": {"fieldPath": "spec.nodeName"}}
    assert (env["ISSUER_KIND"], env["ISSUER_NAME"]) == ("Issuer", "libvirt-ca")
    # The libvirt container waits for the node's certificate; only libvirt-tls's pod holds a token.
    [libvirt] = [c for c in containers(prod.by_name(f"libvirt-{GROUP}", "DaemonSet")) if c["name"] == "libvirt"]
    assert {e["name"]: e.get("value") for e in libvirt["env"]}["LIBVIRT_PKI_DIR"] == libvirt_tls.PKI_DIR
    assert pod_template(prod.by_name(f"libvirt-{GROUP}", "DaemonSet"))["spec"]["automountServiceAccountToken"] is False


def test_the_account_may_only_create_read_and_delete_certificate_requests(prod: Plan) -> None:
    assert prod.by_name("libvirt-tls", "Role").inputs["rules"] == [
        {"apiGroups": ["cert-manager.io"], "resources": ["certificaterequests"], "verbs": ["create", "get", "delete"]}
    ]
    binding = prod.by_name("libvirt-tls", "RoleBinding")
    policy = prod.by_name("openstack-libvirt-tls", "ValidatingAdmissionPolicy")
    narrowing = prod.by_name("openstack-libvirt-tls", "ValidatingAdmissionPolicyBinding")
    assert {policy.urn, narrowing.urn} <= set(binding.dependencies)
    assert narrowing.inputs["spec"] == {"policyName": "openstack-libvirt-tls", "validationActions": ["Deny"]}


def test_on_a_host_that_runs_libvirt_the_operator_gives_it_its_certificates() -> None:
    # The host's libvirt holds the Ceph key under a UUID the operator names (components/settings/ceph.py).
    ceph = {**plan_of("prod").settings.ceph.model_dump(by_alias=True, exclude_defaults=True)}  # type: ignore[union-attr]
    ceph["clients"] = {"cinder": {"libvirtSecretUuid": "5d0b7c2e-3f0a-4c35-9d6e-2f1a0f7e9b10"}}
    plan = plan_of("prod", hypervisorIsolation="baremetal-hypervisor", ceph=ceph)
    assert not [name for name in objects(plan, "DaemonSet") if name.startswith("libvirt-tls")]
    assert not objects(plan, "ValidatingAdmissionPolicy").keys() & {"openstack-libvirt-tls"}
    assert libvirt_tls.PROXY_CERT in objects(plan, "Certificate")  # the proxy's is still the program's
    nova = configparser.ConfigParser(interpolation=None)
    nova.read_string(_files(plan)[f"nova-{GROUP}.conf"])
    assert nova["libvirt"]["live_migration_scheme"] == "tls"


# -- the ValidatingAdmissionPolicy -----------------------------------------------------------------

ACCOUNT = "system:serviceaccount:openstack:libvirt-tls"
NODE_NAME = "authentication.kubernetes.io/node-name"


def _request(name: str = "libvirt-tls-compute-1", **spec: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": name},
        "spec": {
            "request": "LS0t",
            "issuerRef": {"group": "cert-manager.io", "kind": "Issuer", "name": "libvirt-ca"},
            "usages": ["digital signature", "key encipherment", "server auth", "client auth"],
            **spec,
        },
    }


def admits(
    plan: Plan, operation: str, obj: dict[str, Any] | None, username: str = ACCOUNT, node: str | None = "compute-1"
) -> bool:
    policy = plan.by_name("openstack-libvirt-tls", "ValidatingAdmissionPolicy").inputs["spec"]
    extra = {NODE_NAME: [node]} if node else {}
    name = (obj or {}).get("metadata", {}).get("name", "libvirt-tls-compute-1")
    request = {"operation": operation, "name": name, "userInfo": {"username": username, "extra": extra}}
    return policy_admits(policy, request, obj, obj or {})


def test_a_node_asks_for_its_own_certificate_of_the_libvirt_ca(prod: Plan) -> None:
    assert admits(prod, "CREATE", _request())
    assert admits(prod, "DELETE", None)


@pytest.mark.parametrize(
    ("why", "obj", "node"),
    [
        ("another node's name", _request("libvirt-tls-compute-2"), "compute-1"),
        ("a token that names no node", _request(), None),
        ("the internal CA's issuer", _request(issuerRef={"kind": "Issuer", "name": "internal-ca"}), "compute-1"),
        (
            "a ClusterIssuer of the same name",
            _request(issuerRef={"kind": "ClusterIssuer", "name": "libvirt-ca"}),
            "compute-1",
        ),
        ("a CA certificate", _request(isCA=True), "compute-1"),
        ("code signing", _request(usages=["digital signature", "code signing"]), "compute-1"),
    ],
)
def test_anything_else_is_refused(prod: Plan, why: str, obj: dict[str, Any], node: str | None) -> None:
    assert not admits(prod, "CREATE", obj, node=node), why


def test_deleting_another_nodes_request_is_refused_and_other_accounts_are_not_judged(prod: Plan) -> None:
    assert not admits(prod, "DELETE", _request("libvirt-tls-compute-2"))
    assert admits(prod, "CREATE", _request("anything", isCA=True), username="system:serviceaccount:cert-manager:x")
