"""The compute node's libvirt certificate: asked of cert-manager, kept current, loaded without a restart.

Runs in the pod `libvirt-tls` on each compute node under `tls.libvirt` (components/libvirt_tls.py),
in the nova-libvirt image: its python3 (standard library only), openssl, virt-admin and virsh.

1. openssl makes an RSA key and a request naming the node: NODE_NAME as common name and DNS name,
   NODE_IP (the node's address, which `live_migration_inbound_addr` and the migration URI
   `qemu+tls://<address>/system` name) as IP address. The key never leaves the node.
2. It asks cert-manager with the CertificateRequest `libvirt-tls-<node>` (the one name the
   ValidatingAdmissionPolicy lets this node's pod create), issuer ISSUER_KIND/ISSUER_NAME, and
   reads the certificate and the CA from the request's status: the pod reads no Secret.
3. The files go into a new directory under PKI_DIR (the host's /run/libvirt/pki: memory), laid
   out as libvirt and QEMU read them (/etc/pki/CA, /etc/pki/libvirt, /etc/pki/qemu, which the
   libvirt container links to `current/...`); then the symlink `current` is swapped to it in one
   rename, so a reader never sees the new certificate with the old key.
4. libvirtd loads the renewed pair: `virt-admin server-update-tls libvirtd` (libvirt 6.2: it
   reads the default paths again, virNetTLSContextReloadForServer). Each running guest's VNC
   server loads it: QMP `display-reload` (QEMU 6.0; libvirt before 10.2 has no command for it,
   so through `virsh qemu-monitor-command`). QEMU reads /etc/pki/qemu at each migration, and a
   migrating libvirtd its client files at each connection: nothing else holds them.
5. Every CHECK_SECONDS it renews once two thirds of the certificate's life have passed (what
   cert-manager's renewBefore of a third does), or at once when the certificate does not name
   the node's address any more.

`libvirt_tls.py check` is the pod's readiness: the current certificate exists, names NODE_IP and
has not expired. `libvirt_tls.py renew` renews and reloads at once (an operator's `kubectl exec`).
"""

from __future__ import annotations

import base64
import grp
import json
import os
import shutil
import ssl
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from kube_api import KubeApi, KubeError

GROUP_VERSION = "cert-manager.io/v1"
REQUEST_PREFIX = "libvirt-tls-"
USAGES = ["digital signature", "key encipherment", "server auth", "client auth"]
RETRY_SECONDS = 10
REQUEST_TIMEOUT = 600  # cert-manager signs within seconds; an Issuer still being made takes longer
QEMU_RELOAD = json.dumps({"execute": "display-reload", "arguments": {"type": "vnc", "tls-certs": True}})
ADMIN_SOCKET = Path("/run/libvirt/libvirt-admin-sock")
LIBVIRT_SOCKET = Path("/run/libvirt/libvirt-sock")


def log(message: str) -> None:
    print(f"libvirt-tls: {message}", file=sys.stderr, flush=True)


@dataclass(frozen=True)
class Node:
    name: str
    address: str
    issuer_kind: str
    issuer_name: str
    duration: str
    qemu_group: str
    pki: Path

    @classmethod
    def from_env(cls) -> Node:
        env = os.environ
        return cls(
            env["NODE_NAME"], env["NODE_IP"], env["ISSUER_KIND"], env["ISSUER_NAME"], env["DURATION"],
            env["QEMU_GROUP"], Path(env["PKI_DIR"]),
        )  # fmt: skip

    @property
    def request_name(self) -> str:
        return f"{REQUEST_PREFIX}{self.name}"

    @property
    def current(self) -> Path:
        return self.pki / "current"


def _openssl(*args: str, stdin: bytes | None = None) -> str:
    done = subprocess.run(["openssl", *args], input=stdin, capture_output=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"openssl {args[0]}: {done.stderr.decode(errors='replace').strip()}")
    return done.stdout.decode()


@dataclass(frozen=True)
class Held:
    """The certificate in service: when it was issued and ends, and the IP addresses it names."""

    not_before: float
    not_after: float
    addresses: frozenset[str]

    @classmethod
    def read(cls, certificate: Path) -> Held | None:
        if not certificate.is_file():
            return None
        dates = _openssl("x509", "-in", str(certificate), "-noout", "-startdate", "-enddate").splitlines()
        found = dict(line.split("=", 1) for line in dates if "=" in line)
        alt = _openssl("x509", "-in", str(certificate), "-noout", "-ext", "subjectAltName")
        addresses = {part.strip()[len("IP Address:") :] for part in alt.replace("\n", ",").split(",")
                     if part.strip().startswith("IP Address:")}  # fmt: skip
        return cls(ssl.cert_time_to_seconds(found["notBefore"]), ssl.cert_time_to_seconds(found["notAfter"]),
                   frozenset(addresses))  # fmt: skip

    def due(self, address: str, now: float) -> str | None:
        """Why it must be renewed now, or None."""
        if address not in self.addresses:
            return f"it does not name the node's address {address} (it names {sorted(self.addresses)})"
        if now >= self.not_before + (self.not_after - self.not_before) * 2 / 3:
            return "two thirds of its life have passed"
        return None


def certificate_file(node: Node) -> Path:
    return node.current / "libvirt" / "servercert.pem"


def request(node: Node, workdir: Path) -> tuple[str, Path]:
    """A new key (in workdir) and the PEM request naming the node."""
    key = workdir / "key.pem"
    names = f"subjectAltName=DNS:{node.name},IP:{node.address}"
    csr = _openssl("req", "-new", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-subj",
                   f"/CN={node.name}", "-addext", names)  # fmt: skip
    return csr, key


def ask(api: KubeApi, node: Node, csr: str) -> tuple[str, str]:
    """The CertificateRequest of this node, made anew, until cert-manager answers: (chain, CA) as PEM."""
    path = f"/apis/{GROUP_VERSION}/namespaces/{api.namespace}/certificaterequests"
    try:
        api.delete(f"{path}/{node.request_name}")  # the previous renewal's: a request is never changed
    except KubeError as error:
        if error.status != 404:
            raise
    body = {
        "apiVersion": GROUP_VERSION,
        "kind": "CertificateRequest",
        "metadata": {"name": node.request_name, "labels": {"app.kubernetes.io/name": "nova",
                                                             "app.kubernetes.io/component": "libvirt-tls"}},
        "spec": {
            "request": base64.b64encode(csr.encode()).decode(),
            "issuerRef": {"group": "cert-manager.io", "kind": node.issuer_kind, "name": node.issuer_name},
            "usages": USAGES,
            "duration": node.duration,
        },
    }  # fmt: skip
    for attempt in range(30):  # deleting takes a moment where a finalizer holds the old one
        try:
            api.create(path, body)
            break
        except KubeError as error:
            if error.status != 409 or attempt == 29:
                raise
            time.sleep(2)
    deadline = time.monotonic() + REQUEST_TIMEOUT
    while time.monotonic() < deadline:
        found = api.get(f"{path}/{node.request_name}")
        status = found.get("status") or {}
        conditions = {c.get("type"): c for c in status.get("conditions") or []}
        for refused in ("Denied", "InvalidRequest"):
            if (conditions.get(refused) or {}).get("status") == "True":
                raise RuntimeError(f"CertificateRequest {node.request_name}: {refused}: "
                                   f"{conditions[refused].get('message', '')}")  # fmt: skip
        ready = conditions.get("Ready") or {}
        if ready.get("status") == "False" and ready.get("reason") == "Failed":
            raise RuntimeError(f"CertificateRequest {node.request_name} failed: {ready.get('message', '')}")
        if ready.get("status") == "True" and status.get("certificate"):
            if not status.get("ca"):
                raise RuntimeError(
                    f"{node.issuer_kind} {node.issuer_name} gives no CA certificate (an ACME issuer): "
                    "libvirt and QEMU verify their peers with it, tls.libvirt needs a CA issuer"
                )
            return base64.b64decode(status["certificate"]).decode(), base64.b64decode(status["ca"]).decode()
        time.sleep(2)
    raise RuntimeError(f"CertificateRequest {node.request_name}: not issued after {REQUEST_TIMEOUT}s "
                       f"(does {node.issuer_kind} {node.issuer_name} exist and sign?)")  # fmt: skip


def _write(path: Path, text: str, mode: int, gid: int = 0) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    os.chown(path, 0, gid)
    path.chmod(mode)


def install(node: Node, chain: str, ca: str, key: Path) -> Path:
    """A new directory with the files where libvirt and QEMU read them, then `current` swapped to it."""
    qemu_gid = grp.getgrnam(node.qemu_group).gr_gid
    version = node.pki / f"v{time.time_ns()}"
    private = key.read_text()
    # libvirtd's (root's): its server and the client a migrating libvirtd presents (libvirt's default paths).
    _write(version / "CA" / "cacert.pem", ca, 0o644)
    for role in ("server", "client"):
        _write(version / "libvirt" / f"{role}cert.pem", chain, 0o644)
        _write(version / "libvirt" / "private" / f"{role}key.pem", private, 0o600)
        # QEMU's, for migrations and the VNC server: QEMU runs as QEMU_GROUP's user and reads the key.
        _write(version / "qemu" / f"{role}-cert.pem", chain, 0o644)
        _write(version / "qemu" / f"{role}-key.pem", private, 0o640, qemu_gid)
    _write(version / "qemu" / "ca-cert.pem", ca, 0o644)
    (version / "libvirt" / "private").chmod(0o700)
    for directory in (version, version / "CA", version / "libvirt", version / "qemu"):
        directory.chmod(0o755)
    swap = node.pki / "current.new"
    swap.unlink(missing_ok=True)
    swap.symlink_to(version.name)
    swap.replace(node.current)  # rename(2): atomic
    for old in node.pki.glob("v*"):
        if old != version:
            shutil.rmtree(old, ignore_errors=True)
    return version


def _run(command: list[str]) -> tuple[int, str]:
    done = subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)
    return done.returncode, (done.stdout + done.stderr).strip()


def reload_libvirt() -> bool:
    """libvirtd and every running guest's VNC server take the files now in place; False: try again later."""
    if not ADMIN_SOCKET.exists():
        log("libvirtd is not running yet: it reads the files when it starts")
        return True
    code, output = _run(["virt-admin", "-c", "libvirtd:///system", "server-update-tls", "libvirtd"])
    if code != 0:
        log(f"virt-admin server-update-tls failed ({output}): tried again at the next check")
        return False
    log("libvirtd's TLS listener and client loaded the renewed certificate")
    code, output = _run(["virsh", "-c", "qemu:///system", "list", "--name"])
    for domain in output.split() if code == 0 else []:
        code, answer = _run(["virsh", "-c", "qemu:///system", "qemu-monitor-command", domain, QEMU_RELOAD])
        log(f"{domain}: VNC certificate reload: {'done' if code == 0 else answer}")
    return True


def renew(api: KubeApi, node: Node, why: str) -> None:
    log(f"asking for a certificate of {node.name} ({node.address}): {why}")
    with tempfile.TemporaryDirectory(dir=node.pki) as work:
        csr, key = request(node, Path(work))
        chain, ca = ask(api, node, csr)
        version = install(node, chain, ca, key)
    log(f"certificate installed in {version}")


def keep_current(node: Node, check_seconds: float) -> None:
    api = KubeApi.in_cluster()
    node.pki.mkdir(parents=True, exist_ok=True)
    node.pki.chmod(0o755)
    reload_pending = False
    while True:
        held = Held.read(certificate_file(node))
        why = "the node has none" if held is None else held.due(node.address, time.time())
        if why is not None:
            try:
                renew(api, node, why)
                reload_pending = True
            except (KubeError, RuntimeError, OSError) as error:
                log(f"no certificate this time: {error}")
        if reload_pending:
            reload_pending = not reload_libvirt()
        # Soon again while the node has no certificate or libvirtd has not taken it.
        missing = Held.read(certificate_file(node)) is None
        time.sleep(RETRY_SECONDS if missing or reload_pending else check_seconds)


def check(node: Node) -> int:
    held = Held.read(certificate_file(node))
    if held is None:
        print(f"no certificate at {certificate_file(node)}", file=sys.stderr)
        return 1
    if node.address not in held.addresses or time.time() >= held.not_after:
        print(f"the certificate does not name {node.address} or has expired", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    here = Node.from_env()
    if sys.argv[1:] == ["check"]:
        sys.exit(check(here))
    if sys.argv[1:] == ["renew"]:  # by hand (kubectl exec): a new certificate now, loaded as a renewal is
        renew(KubeApi.in_cluster(), here, "asked to")
        sys.exit(0 if reload_libvirt() else 1)
    keep_current(here, float(os.environ.get("CHECK_SECONDS", "300")))
