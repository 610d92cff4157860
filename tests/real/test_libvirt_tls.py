"""libvirt's TLS (`tls.libvirt`, prod's) with real software: two compute nodes of Debian's libvirtd and QEMU.

Each node (tests/real/libvirt_nodes.py) runs what the plan runs there: the pod libvirt-tls's
script, which asks the lab's API server (tests/lab/cloud/apiserver.py, with the plan's RBAC) for the
node's certificate with a CertificateRequest that the lab's cert-manager (tests/lab/cloud/certmanager.py
and certificate_requests.py) signs with the plan's CA Issuer `libvirt-ca`; then the libvirt
container's libvirt_start.sh with the plan's libvirtd.conf, qemu.conf and SASL files. Shown:

- libvirtd listens on TLS only: a client with a certificate of the CA (the other node's, as a
  migrating libvirtd presents it) and the SASL credentials is served; one without a certificate,
  or with one of another CA, is refused; the TCP port is closed;
- a guest migrates between the nodes peer to peer over `qemu+tls://` with QEMU's own TLS
  (nova's flags), and not without it (qemu.conf migrate_tls_force);
- the console proxy's own code (nova's RFB security proxy with the plan's nova-novncproxy.conf,
  under eventlet as nova-novncproxy runs) reaches the guest's ServerInit through VeNCrypt with
  its certificate, and is refused with one of another CA or none;
- `libvirt_tls.py renew`: libvirtd serves the new certificate to the next client and the guest's
  VNC server too, libvirtd and QEMU the same processes.

Not shown here: Ceph (prod's rbd secrets are left out: LIBVIRT_CEPH_CLIENTS), and libvirt out of
the pod's cgroup (ESCAPE_POD_CGROUP: the test's node has no cgroup tree of its own); neither
concerns TLS.
"""

from __future__ import annotations

import hashlib
import json
import shlex
import shutil
import ssl
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import plan_of
from tests.lab.cloud import certificate_requests, socket_read
from tests.lab.cloud.apiserver import LabApiServer
from tests.lab.cloud.certmanager import CertManager
from tests.lab.cloud.run import machine_overrides
from tests.lab.cloud.vmsafety import tls_listener
from tests.lab.realenv.openstack_venv import OpenStackVenv
from tests.real import pki
from tests.real.libvirt_nodes import SCRIPTS, STATE, Node, join, machine_cgroups, remove_cgroups, start_node
from tools.plan import Plan

API_PORT = 6443
GROUP = "kvm-general"  # prod's node group
GUEST = "tls-guest"
RBAC_KINDS = {"Role", "RoleBinding", "ClusterRole", "ClusterRoleBinding"}
PKI = "/run/libvirt/pki/current"
VNC_CLIENT = Path(__file__).parent / "vnc_through_nova_proxy.py"


class _NoWorld:
    """The lab API server's cluster, of which this test serves CertificateRequests only."""

    def __getattr__(self, name: str) -> Any:
        raise AssertionError(f"the test's API server serves no {name}")


@dataclass
class Cloud:
    plan: Plan
    a: Node
    b: Node
    api: LabApiServer
    certs: CertManager
    password: str

    def virsh(self, on: Node, uri: str, *args: str, env: dict[str, str] | None = None) -> tuple[int, str]:
        done = on.sh(
            f"virsh -c '{uri}' " + " ".join(args), env={"LIBVIRT_AUTH_FILE": f"{STATE}/auth.conf", **(env or {})}
        )
        return done.returncode, (done.stdout + done.stderr).strip()


def _env(plan: Plan, daemonset: str, container: str, node: Node, **extra: str) -> dict[str, str]:
    """The container's environment in the plan, its downward-API values this node's."""
    pod = plan.by_name(daemonset, "DaemonSet").revealed["spec"]["template"]["spec"]
    [found] = [c for c in pod["containers"] if c["name"] == container]
    values = {e["name"]: e["value"] for e in found["env"] if "value" in e}
    return {**values, "NODE_NAME": node.name, "NODE_IP": node.address, **extra}


def _start(plan: Plan, node: Node, api: LabApiServer, password: str) -> None:
    files = plan.by_name("compute-etc", "Secret").revealed["stringData"]
    scripts = node.state / "scripts"
    scripts.mkdir()
    for script in ("libvirt_tls.py", "kube_api.py", "libvirt_start.sh"):
        shutil.copy(SCRIPTS / script, scripts / script)
    account = api.issue(plan.settings.namespace, "libvirt-tls")  # what the kubelet mounts for the pod
    (node.state / "account").mkdir()
    for name, text in account.items():
        (node.state / "account" / name).write_text(text)
    (node.state / "libvirtd.conf").write_text(files[f"libvirtd-{GROUP}.conf"])
    (node.state / "qemu.conf").write_text(files[f"qemu-{GROUP}.conf"])
    (node.state / "sasl.conf").write_text(files["libvirt-sasl.conf"])
    (node.state / "auth.conf").write_text(files["libvirt-auth.conf"])
    # Ubuntu's libvirt-daemon-system makes libvirt-qemu, libvirtd's compiled-in QEMU user, which
    # it resolves at start (tests/lab/cloud/images.py gives the lab's nova-libvirt image the same).
    placed = node.sh(
        "set -e; getent passwd libvirt-qemu >/dev/null || useradd --system --uid 64055 --no-create-home libvirt-qemu\n"
        "mkdir -p /run/secrets/kubernetes.io && cp -r /mnt/account /run/secrets/kubernetes.io/serviceaccount\n"
        "mkdir -p /etc/libvirt /etc/sasl2 && cp /mnt/libvirtd.conf /mnt/qemu.conf /etc/libvirt/ && "
        "cp /mnt/sasl.conf /etc/sasl2/libvirt.conf"
    )
    assert placed.returncode == 0, placed.stderr
    kube = {"KUBERNETES_SERVICE_HOST": api.addresses[0], "KUBERNETES_SERVICE_PORT": str(API_PORT)}
    keeper = _env(plan, f"libvirt-tls-{GROUP}", "libvirt-tls", node, **kube)
    node.spawn(["python3", f"{STATE}/scripts/libvirt_tls.py"], "libvirt-tls.log", keeper)
    node.wait_for("the node's certificate", f"test -s {PKI}/libvirt/servercert.pem")
    libvirt = _env(plan, f"libvirt-{GROUP}", "libvirt", node, LIBVIRT_SASL_PASSWORD=password,
                   LIBVIRT_AUTH_FILE=f"{STATE}/auth.conf", ESCAPE_POD_CGROUP="false")  # fmt: skip
    libvirt.pop("LIBVIRT_CEPH_CLIENTS")
    node.spawn(["bash", f"{STATE}/scripts/libvirt_start.sh"], "libvirt.log", libvirt)
    node.wait_for("libvirtd", "virsh -c qemu:///system uri", timeout=180)


@pytest.fixture(scope="module")
def cloud(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cloud]:
    # As the lab plans it for this machine: its QEMU limits capped at the hard limits QEMU inherits here.
    plan = plan_of("prod", **machine_overrides("prod", "qemu"))
    assert plan.settings.tls.libvirt is not None and plan.settings.tls.libvirt.self_signed
    state = tmp_path_factory.mktemp("libvirt-tls")
    cgroups_before = machine_cgroups()
    a = start_node("compute-a", state / "a")
    b = start_node("compute-b", state / "b")
    api: LabApiServer | None = None
    try:
        join(a, b)
        rbac = [r.revealed for r in plan.custom if r.kind in RBAC_KINDS]
        api = LabApiServer(_NoWorld(), rbac, state / "apiserver", (a.address,))  # type: ignore[arg-type]
        certs = CertManager([r.revealed for r in plan.custom])
        assert certs.issue_all() == [] or all("libvirt" not in p for p in certs.issue_all())
        certificate_requests.serve(api, certs)
        api.start(a.netns, API_PORT)
        password = plan.by_name("libvirt-sasl", "Secret").revealed["stringData"]["password"]
        for node in (a, b):
            _start(plan, node, api, password)
        yield Cloud(plan, a, b, api, certs, password)
    finally:
        for node in (a, b):
            node.stop()
        if api is not None:
            api.stop()
        remove_cgroups(machine_cgroups() - cgroups_before)


def _tls(node: Node) -> str:
    return f"qemu+tls://{node.address}/system"


def _other_ca_client(node: Node) -> str:
    """A directory with the libvirt CA and a client certificate of another CA, as a libvirt pkipath."""
    other = pki.make_ca("another CA")
    issued = pki.leaf(other, ["intruder"])
    ca = node.sh(f"cat {PKI}/CA/cacert.pem").stdout
    directory = node.state / "other-ca-client"
    directory.mkdir(exist_ok=True)
    # The client trusts both CAs (libvirt's own check of its certificate passes); the server only its own.
    (directory / "cacert.pem").write_text(ca + pki.pem(other[0]).decode())
    (directory / "clientcert.pem").write_bytes(issued["tls.crt"])
    (directory / "clientkey.pem").write_bytes(issued["tls.key"])
    return f"{STATE}/{directory.name}"


def test_libvirtd_listens_on_tls_alone_and_takes_a_client_of_its_ca_only(cloud: Cloud) -> None:
    a, b = cloud.a, cloud.b
    # The keeper's readiness on each node: its certificate there, naming the node's address.
    for node in (a, b):
        keeper = _env(cloud.plan, f"libvirt-tls-{GROUP}", "libvirt-tls", node)
        ready = node.sh(f"python3 {STATE}/scripts/libvirt_tls.py check", env=keeper)
        assert ready.returncode == 0, ready.stderr
        log = (node.state / "libvirt-tls.log").read_text()
        assert log.count("asking for a certificate") == 1, log  # once: what it holds is current
    # b's libvirtd files, as b's libvirtd presents them when it migrates a guest to a.
    code, answer = cloud.virsh(b, _tls(a), "uri")
    assert (code, answer) == (0, _tls(a))
    no_cert = b.state / "no-client-cert"
    no_cert.mkdir()
    (no_cert / "cacert.pem").write_text(b.sh(f"cat {PKI}/CA/cacert.pem").stdout)
    # The same client, credentials and CA; only its certificate differs. libvirtd checks it after the
    # handshake and closes the session (libvirt 9.0 says nothing more to the client, nor at log level 3).
    code, refusal = cloud.virsh(b, f"{_tls(a)}?pkipath={STATE}/{no_cert.name}", "uri")
    assert code != 0 and "TLS" in refusal, refusal
    code, refusal = cloud.virsh(b, f"{_tls(a)}?pkipath={_other_ca_client(b)}", "uri")
    assert code != 0 and "TLS" in refusal, refusal
    assert "16509" not in a.sh("ss -ltn").stdout and not b.port_open(a.address, 16509)
    assert b.port_open(a.address, 16514)


def _fingerprint_served(client: Node, server: Node, port: int = 16514) -> str:
    """The SHA-256 of the certificate the server's TLS port serves, to the client node's own client certificate."""
    code = (
        "import hashlib, socket, ssl\n"
        "c = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT); c.check_hostname = False\n"
        f"c.load_verify_locations('{PKI}/CA/cacert.pem')\n"
        f"c.load_cert_chain('{PKI}/libvirt/clientcert.pem', '{PKI}/libvirt/private/clientkey.pem')\n"
        f"s = c.wrap_socket(socket.create_connection(('{server.address}', {port}), timeout=10))\n"
        "print(hashlib.sha256(s.getpeercert(binary_form=True)).hexdigest())\n"
    )
    done = client.sh(f'python3 -c "{code}"')
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def _guest_xml() -> str:
    # No disk: the firmware finds nothing to boot and waits; VNC on every address, so that the
    # guest keeps it on the node it migrates to (nova rewrites the listen address instead).
    return (
        f"<domain type='qemu'><name>{GUEST}</name><memory unit='MiB'>64</memory><vcpu>1</vcpu>"
        "<os><type arch='x86_64' machine='pc'>hvm</type></os>"
        "<devices><graphics type='vnc' autoport='yes' listen='0.0.0.0'/></devices></domain>"
    )


def _running_on(cloud: Cloud, node: Node) -> bool:
    code, state = cloud.virsh(node, "qemu:///system", "domstate", GUEST)
    return code == 0 and state.startswith("running")


@pytest.fixture(scope="module")
def guest(cloud: Cloud) -> Iterator[str]:
    (cloud.a.state / "guest.xml").write_text(_guest_xml())
    code, answer = cloud.virsh(cloud.a, "qemu:///system", "create", f"{STATE}/guest.xml")
    assert code == 0, answer
    yield GUEST


def _vnc_port(cloud: Cloud, node: Node) -> int:
    code, display = cloud.virsh(node, "qemu:///system", "vncdisplay", GUEST)
    assert code == 0, display
    return 5900 + int(display.strip().rsplit(":", 1)[1])


def test_a_guest_migrates_peer_to_peer_over_tls_and_never_in_clear(cloud: Cloud, guest: str) -> None:
    a, b = cloud.a, cloud.b
    # What nova's driver asks libvirt for (driver.py _parse_migration_flags with native TLS; its
    # migrate_uri tcp://<live_migration_inbound_addr>), from a's libvirt to b's.
    code, answer = cloud.virsh(a, "qemu:///system", "migrate", "--live", "--p2p", "--tls", "--persistent",
                               "--undefinesource", guest, _tls(b), f"tcp://{b.address}")  # fmt: skip
    assert code == 0, answer
    assert _running_on(cloud, b) and not _running_on(cloud, a)
    code, refusal = cloud.virsh(b, "qemu:///system", "migrate", "--live", "--p2p", guest, _tls(a),
                                f"tcp://{a.address}")  # fmt: skip
    assert code != 0 and "tls" in refusal.lower(), refusal
    assert _running_on(cloud, b)


def _console(cloud: Cloud, venv: OpenStackVenv, node: Node, conf: Path) -> dict[str, Any]:
    """nova's RFB security proxy between a VNC client of the test and the guest's VNC server."""
    shutil.copy(VNC_CLIENT, node.state / VNC_CLIENT.name)
    shutil.copy(socket_read.__file__, node.state / "socket_read.py")  # what the client imports
    command = f"{venv.python} {STATE}/{VNC_CLIENT.name} {STATE}/{conf.name} 127.0.0.1 {_vnc_port(cloud, node)}"
    done = node.sh(command, timeout=60)
    assert done.stdout.strip(), done.stderr
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def _proxy_conf(cloud: Cloud, node: Node, name: str, files: dict[str, bytes] | None) -> Path:
    """The plan's nova-novncproxy.conf, its certificate files placed where it names them (or others)."""
    text = cloud.plan.by_name("nova-etc", "Secret").revealed["stringData"]["nova-novncproxy.conf"]
    directory = node.state / name
    directory.mkdir(exist_ok=True)
    if files is None:  # the proxy's own certificate, from its Secret
        issued = cloud.certs.secrets[(cloud.plan.settings.namespace, "nova-novncproxy-vencrypt")]
        files = {k: v.encode() for k, v in issued.data.items()}
    for key, data in files.items():
        (directory / key).write_bytes(data)
    conf = node.state / f"{name}.conf"
    conf.write_text(text.replace("/etc/nova-vencrypt", f"{STATE}/{name}"))
    return conf


def test_the_console_proxy_reaches_the_guest_through_vencrypt_with_its_certificate_only(
    cloud: Cloud, guest: str, openstack_venv: OpenStackVenv
) -> None:
    node = cloud.b if _running_on(cloud, cloud.b) else cloud.a
    text = cloud.plan.by_name("nova-etc", "Secret").revealed["stringData"]["nova-novncproxy.conf"]
    assert "auth_schemes = vencrypt\n" in text
    seen = _console(cloud, openstack_venv, node, _proxy_conf(cloud, node, "proxy", None))
    assert seen["ok"], seen
    assert seen["tenant_security_types"] == [1]  # the proxy offers the browser None: it did VeNCrypt
    assert seen["name"] == f"QEMU ({GUEST})" and seen["width"] > 0 and seen["tls"].startswith("TLS"), seen
    ca = node.sh(f"cat {PKI}/CA/cacert.pem").stdout.encode()
    other = pki.leaf(pki.make_ca("another CA"), ["nova-novncproxy"])
    refused = _console(cloud, openstack_venv, node, _proxy_conf(cloud, node, "other", {**other, "ca.crt": ca}))
    assert not refused["ok"] and "ServerInit" not in refused.get("reached", ""), refused
    none_conf = _proxy_conf(cloud, node, "none", {"ca.crt": ca})
    without = ("vencrypt_client_key", "vencrypt_client_cert")
    kept = [line for line in none_conf.read_text().splitlines() if not line.startswith(without)]
    none_conf.write_text("\n".join(kept) + "\n")
    refused = _console(cloud, openstack_venv, node, none_conf)
    assert not refused["ok"], refused


def test_a_renewal_reaches_libvirtd_and_the_guests_vnc_without_a_restart(
    cloud: Cloud, guest: str, openstack_venv: OpenStackVenv
) -> None:
    node = cloud.b if _running_on(cloud, cloud.b) else cloud.a
    other = cloud.a if node is cloud.b else cloud.b
    # This node's own (the machine runs others: the lab's): from their pid files in the node's /run.
    pids = f"for f in /run/libvirtd.pid /run/libvirt/qemu/{GUEST}.pid; do cat $f; echo; done"
    before_pids = node.sh(pids).stdout.split()
    assert len(before_pids) == 2, before_pids
    before = _fingerprint_served(other, node)
    conf = _proxy_conf(cloud, node, "proxy", None)
    vnc_before = _console(cloud, openstack_venv, node, conf)["served"]
    renewed = node.sh(f"python3 {STATE}/scripts/libvirt_tls.py renew",
                      env=_env(cloud.plan, f"libvirt-tls-{GROUP}", "libvirt-tls", node,
                               KUBERNETES_SERVICE_HOST=cloud.api.addresses[0],
                               KUBERNETES_SERVICE_PORT=str(API_PORT)))  # fmt: skip
    assert renewed.returncode == 0, renewed.stderr
    new = hashlib.sha256(ssl.PEM_cert_to_DER_cert(node.sh(f"cat {PKI}/libvirt/servercert.pem").stdout)).hexdigest()
    assert new != before
    time.sleep(1)
    assert _fingerprint_served(other, node) == new
    assert _console(cloud, openstack_venv, node, conf)["served"] == new != vnc_before
    assert node.sh(pids).stdout.split() == before_pids
    code, answer = cloud.virsh(other, _tls(node), "uri")
    assert code == 0, answer


@dataclass
class _InNode:
    """A node's commands as the lab's exec into its libvirt container runs them (its auth.conf in place)."""

    node: Node

    def exec_command(self, command: list[str], timeout: float, env: dict[str, str] | None = None) -> tuple[int, str]:
        done = self.node.sh(shlex.join(command), env={"LIBVIRT_AUTH_FILE": f"{STATE}/auth.conf"}, timeout=timeout)
        return done.returncode, done.stdout + done.stderr


def test_the_labs_listener_check_tells_each_refusal(cloud: Cloud) -> None:
    """tests/lab/cloud/vmsafety.py's check, which the lab reports as libvirt_listener, against real libvirtd."""
    found = tls_listener(_InNode(cloud.b), cloud.a.address)
    assert found["authenticated"], found
    assert found["anonymous_refused"] and found["foreign_ca_refused"], found
    assert found["wrong_password_refused"] and found["tcp_closed"], found
