"""VM safety, for real: restart the libvirt pod under a running VM, as a runtime restarts a container.

The pod is deleted the way the kubelet deletes it (SIGTERM to the container's first process,
SIGKILL to whatever is left in its cgroup after the grace period, or at once when the first
process has exited), then the DaemonSet's new pod is started and awaited Ready. The VM survived
when its QEMU process is the same one afterwards and its console log kept growing: under
pod-per-service-host-pid libvirtd and QEMU live outside the pod's cgroup; under pod-per-service
they are the pod's.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Protocol

from components.nodes import libvirt_tls
from tests.lab.cloud.deploy import Cloud, Workload
from tests.lab.cloud.guest import ALIVE, parse_console
from tests.lab.cloud.kubelet import PodRuntime
from tests.lab.cloud.node import LAB_NODES

READY_TIMEOUT = 240.0
# The guest prints an alive line every 10 s: wait for two more to call it running.
GROWTH_WAIT = 25.0


@dataclass
class RestartResult:
    topology: str
    pod: str
    qemu_pid_before: int | None
    qemu_pid_after: int | None
    alive_lines_before: int
    alive_lines_after: int
    new_pod_ready: bool
    vm_survived: bool

    def as_dict(self) -> dict[str, object]:
        return asdict(self)


def _libvirt_pod(cloud: Cloud, host: str) -> tuple[Workload, PodRuntime]:
    """The DaemonSet pod with a libvirt container on the node `host` (Nova's host is the node's name)."""
    for workload in cloud.workloads.values():
        containers = workload.template["spec"]["containers"]
        if workload.kind == "DaemonSet" and any(c["name"] == "libvirt" for c in containers):
            for pod in workload.pods:
                if pod.node.name == host:
                    return workload, pod
    raise LookupError(f"no running pod with a libvirt container on {host}")


def _qemu_pid(instance: str, host: str) -> int | None:
    """The host PID of the instance's QEMU on node `host` (its cgroup is in that node's tree)."""
    wanted = f"guest={instance},".encode()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
            cgroups = (entry / "cgroup").read_text()
        except OSError:
            continue
        program = cmdline.split(b"\0", 1)[0]
        if b"qemu-system" in program and wanted in cmdline and f"/{LAB_NODES}/{host}/" in cgroups:
            return int(entry.name)
    return None


def _alive_lines(cloud: Cloud, host: str, instance_dir_uuid: str) -> int:
    log = cloud.cluster.node(host).host_path("/var/lib/nova") / "instances" / instance_dir_uuid / "console.log"
    try:
        return log.read_text(errors="replace").count(ALIVE)
    except OSError:
        return 0


def alive_values(cloud: Cloud, host: str, instance_dir_uuid: str) -> tuple[int, ...]:
    """The guest's counter (seconds since its boot) on every alive line of its console so far."""
    log = cloud.cluster.node(host).host_path("/var/lib/nova") / "instances" / instance_dir_uuid / "console.log"
    try:
        return parse_console(log.read_text(errors="replace")).alive_values
    except OSError:
        return ()


def vm_signs(cloud: Cloud, host: str, instance: str, server_id: str) -> tuple[int | None, int]:
    """The VM's QEMU PID and its console's alive lines so far: the same PID and more lines later
    say it kept running in between."""
    return _qemu_pid(instance, host), _alive_lines(cloud, host, server_id)


def restart_libvirt(
    cloud: Cloud, host: str, instance: str, server_id: str, log: Callable[[str], None]
) -> RestartResult:
    _, old = _libvirt_pod(cloud, host)
    before, alive_before = vm_signs(cloud, host, instance, server_id)
    log(f"vm-safety: deleting pod {old.plan.name} on {host} under {instance} (QEMU pid {before})")
    cloud.delete_pod(old.plan.name)
    _, new = _libvirt_pod(cloud, host)
    deadline = time.monotonic() + READY_TIMEOUT
    while not new.ready and time.monotonic() < deadline:
        time.sleep(1)
    time.sleep(GROWTH_WAIT)
    after, alive_after = vm_signs(cloud, host, instance, server_id)
    survived = before is not None and after == before and alive_after > alive_before
    log(f"vm-safety: new pod {new.plan.name} ready={new.ready}; QEMU pid {after}; VM survived: {survived}")
    return RestartResult(
        cloud.plan.settings.hypervisor_isolation.value,
        old.plan.name,
        before,
        after,
        alive_before,
        alive_after,
        new.ready,
        survived,
    )


def libvirt_listener(cloud: Cloud, host: str | None) -> dict[str, object]:
    """What a migrating peer meets on this node's libvirt port: SASL, with the pod's credentials; under
    tls.libvirt TLS with a client certificate of libvirt's CA first (tls_listener).

    Asked from a libvirt container, as another node's libvirtd connects when it migrates a guest:
    with its mounted auth.conf, and once more with the right user and a wrong password.
    """
    # virsh is in the nova-libvirt image (not nova-compute's): from another node's libvirt pod when
    # there is one, as a migrating libvirtd connects, else from the node's own.
    pods = [
        p for w in cloud.workloads.values() for p in w.pods for c in p.plan.containers
        if c.container.name == "libvirt"
    ]  # fmt: skip
    if not pods or host is None:
        return {"not_run": "no libvirt pod, or no server's host"}
    client = next((p for p in pods if p.node.name != host), pods[0])
    container = client.container("libvirt")
    if libvirt_tls.enabled(cloud.plan.settings):
        return {"from": client.node.name, **tls_listener(container, cloud.cluster.node(host).ip)}
    uri = f"qemu+tcp://{cloud.cluster.node(host).ip}/system"
    code, output = container.exec_command(["virsh", "-c", uri, "uri"], timeout=60)
    # A client with the right user and a wrong password: libvirt's SASL must say why it refuses.
    wrong = "[credentials-x]\nauthname=nova\npassword=not-the-password\n\n[auth-libvirt-default]\ncredentials=x\n"
    script = f"printf '{wrong}' > /tmp/wrong-auth.conf && LIBVIRT_AUTH_FILE=/tmp/wrong-auth.conf virsh -c {uri} uri"
    refused_code, refusal = container.exec_command(["/bin/sh", "-c", script], timeout=60)
    return {
        "uri": uri,
        "from": client.node.name,
        "authenticated": code == 0,
        "answer": output.strip()[-200:],
        # libvirt's own refusal (remote_driver: "authentication failed: ... SASL(-13)"), not any failure.
        "anonymous_refused": refused_code != 0 and "authentication failed" in refusal,
        "refusal": refusal.strip()[-300:],
    }


WRONG_PASSWORD = "[credentials-x]\nauthname=nova\npassword=not-the-password\n\n[auth-libvirt-default]\ncredentials=x\n"


class Exec(Protocol):
    def exec_command(
        self, command: list[str], timeout: float, env: dict[str, str] | None = None
    ) -> tuple[int, str]: ...


def tls_listener(container: Exec, address: str) -> dict[str, object]:
    """The TLS listener as peers meet it (tls.libvirt): the container's own files (its node's certificate
    under /etc/pki, its auth.conf) are served; the same client without a certificate, with one of another
    CA (it trusts both CAs, so libvirt's own check of its certificate passes: only the server refuses),
    or with a wrong SASL password is refused; TCP 16509 is closed."""
    uri = f"qemu+tls://{address}/system"

    def virsh(setup: str, target: str, auth: str = "") -> tuple[int, str]:
        script = f'set -e; d=$(mktemp -d); cd $d; {setup}\n{auth}virsh -c "{target}" uri'
        code, output = container.exec_command(["/bin/sh", "-c", script], timeout=60)
        return code, output.strip()[-300:]

    # A CA of no one's and a client certificate it signs (openssl in the nova-libvirt image).
    foreign = (
        "openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=foreign-ca -keyout ca.key -out ca.pem "
        "2>/dev/null; "
        "openssl req -new -newkey rsa:2048 -nodes -subj /CN=intruder -keyout clientkey.pem -out c.csr 2>/dev/null; "
        "printf 'extendedKeyUsage=clientAuth\\nkeyUsage=digitalSignature,keyEncipherment\\n' > ext; "
        "openssl x509 -req -in c.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 1 -extfile ext "
        "-out clientcert.pem 2>/dev/null; cat /etc/pki/CA/cacert.pem ca.pem > cacert.pem"
    )
    code, answer = virsh("", uri)
    anonymous = virsh("cp /etc/pki/CA/cacert.pem .", f"{uri}?pkipath=$d")
    foreign_ca = virsh(foreign, f"{uri}?pkipath=$d")
    wrong = virsh(f"printf '{WRONG_PASSWORD}' > auth.conf", uri, "LIBVIRT_AUTH_FILE=$d/auth.conf ")
    tcp = virsh("", f"qemu+tcp://{address}/system")
    authenticated = code == 0 and answer.endswith(uri)
    return {
        "uri": uri,
        "authenticated": authenticated,
        "answer": answer,
        # Refusals count only where the same client with its certificate was served.
        "anonymous_refused": authenticated and anonymous[0] != 0,
        "foreign_ca_refused": authenticated and foreign_ca[0] != 0,
        "wrong_password_refused": authenticated and wrong[0] != 0 and "authentication failed" in wrong[1],
        "tcp_closed": tcp[0] != 0 and "refused" in tcp[1].lower(),
        "refusals": {
            "anonymous": anonymous[1],
            "foreign_ca": foreign_ca[1],
            "wrong_password": wrong[1],
            "tcp": tcp[1],
        },
    }
