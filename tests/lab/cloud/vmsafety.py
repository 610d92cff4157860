"""VM safety, for real: restart the libvirt pod under a running VM, as a runtime restarts a container.

The pod is deleted the way the kubelet deletes it (SIGTERM to the container's first process,
SIGKILL to whatever is left in its cgroup after the grace period, or at once when the first
process has exited), then the DaemonSet's new pod is started and awaited Ready. The VM survived
when its QEMU process is the same one afterwards and its console log kept growing: under
pod-per-service-host-pid libvirtd and QEMU live outside the pod's cgroup; under pod-per-service
they are the pod's.
"""

from __future__ import annotations

import os
import re
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
    signs_before: dict[str, object]  # VmSigns.as_dict(): freshness and whether QEMU ran, for a failure's why
    signs_after: dict[str, object]
    # The guest kernel's panic, when its console shows one before the restart: it was dead before the event.
    guest_panic_before: str | None = None

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


def _console_log(cloud: Cloud, host: str, instance_dir_uuid: str) -> Path:
    return cloud.cluster.node(host).host_path("/var/lib/nova") / "instances" / instance_dir_uuid / "console.log"


# How a guest kernel's death begins on its console (an oops, then the panic that stops it).
PANIC = re.compile(r"^.*(general protection fault|BUG: |Oops: |Kernel panic - not syncing).*$", re.M)


def guest_panic(cloud: Cloud, host: str, instance_dir_uuid: str) -> str | None:
    """The first line of a kernel oops or panic on the guest's console, if it has one."""
    try:
        text = _console_log(cloud, host, instance_dir_uuid).read_text(errors="replace").replace("\r", "")
    except OSError:
        return None
    found = PANIC.search(text)
    return found.group(0).strip()[:300] if found else None


def _alive_lines(cloud: Cloud, host: str, instance_dir_uuid: str) -> int:
    try:
        return _console_log(cloud, host, instance_dir_uuid).read_text(errors="replace").count(ALIVE)
    except OSError:
        return 0


def _cpu_seconds(pid: int) -> float | None:
    """The process's user and system CPU time (/proc/<pid>/stat fields 14 and 15)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@dataclass(frozen=True)
class VmSigns:
    """What the host sees of a VM at one moment, without asking the guest: its QEMU, the lines on its
    console log and when the log was last written (the host's clock), and, to tell a stopped guest from
    a silent one, the CPU QEMU used over CPU_SAMPLE_SECONDS (a paused or hung-in-halt guest uses next to
    none; a counting one wakes every second) and libvirt's domstate with its reason."""

    at: float  # time.time() of the reading
    qemu_pid: int | None
    alive_lines: int
    console_written_at: float | None  # the console log's mtime
    qemu_cpu_seconds: float | None = None  # over CPU_SAMPLE_SECONDS
    domstate: str = ""

    def as_dict(self) -> dict[str, object]:
        return asdict(self)


CPU_SAMPLE_SECONDS = 3.0


def vm_signs(cloud: Cloud, host: str, instance: str, server_id: str, *, deep: bool = False) -> VmSigns:
    """The VM's signs now; `deep` also samples QEMU's CPU and asks libvirt (a few seconds)."""
    pid = _qemu_pid(instance, host)
    try:
        written_at: float | None = _console_log(cloud, host, server_id).stat().st_mtime
    except OSError:
        written_at = None
    cpu, state = None, ""
    if deep and pid is not None:
        first = _cpu_seconds(pid)
        time.sleep(CPU_SAMPLE_SECONDS)
        last = _cpu_seconds(pid)
        cpu = round(last - first, 2) if first is not None and last is not None else None
        state = _domstate(cloud, host, instance)
    return VmSigns(time.time(), pid, _alive_lines(cloud, host, server_id), written_at, cpu, state)


def _domstate(cloud: Cloud, host: str, instance: str) -> str:
    try:
        _, pod = _libvirt_pod(cloud, host)
    except LookupError as error:
        return str(error)
    code, output = pod.container("libvirt").exec_command(["virsh", "domstate", "--reason", instance], timeout=30)
    return output.strip()[-200:] if code == 0 else f"virsh failed ({code}): {output.strip()[-200:]}"


def survived(before: VmSigns, after: VmSigns, event_at: float) -> bool:
    """The same QEMU, more alive lines, and the console written after the event on the host's clock."""
    return (
        before.qemu_pid is not None
        and after.qemu_pid == before.qemu_pid
        and after.alive_lines > before.alive_lines
        and after.console_written_at is not None
        and after.console_written_at > event_at
    )


def alive_values(cloud: Cloud, host: str, instance_dir_uuid: str) -> tuple[int, ...]:
    """The guest's counter (seconds since its boot) on every alive line of its console so far."""
    log = cloud.cluster.node(host).host_path("/var/lib/nova") / "instances" / instance_dir_uuid / "console.log"
    try:
        return parse_console(log.read_text(errors="replace")).alive_values
    except OSError:
        return ()


def restart_libvirt(
    cloud: Cloud, host: str, instance: str, server_id: str, log: Callable[[str], None]
) -> RestartResult:
    _, old = _libvirt_pod(cloud, host)
    before = vm_signs(cloud, host, instance, server_id, deep=True)
    panic = guest_panic(cloud, host, server_id)
    if panic:
        log(f"vm-safety: the guest of {instance} panicked before the restart: {panic}")
    log(f"vm-safety: deleting pod {old.plan.name} on {host} under {instance}: {before.as_dict()}")
    deleted_at = time.time()
    cloud.delete_pod(old.plan.name)
    _, new = _libvirt_pod(cloud, host)
    deadline = time.monotonic() + READY_TIMEOUT
    while not new.ready and time.monotonic() < deadline:
        time.sleep(1)
    time.sleep(GROWTH_WAIT)
    after = vm_signs(cloud, host, instance, server_id, deep=True)
    kept = survived(before, after, deleted_at)
    log(f"vm-safety: new pod {new.plan.name} ready={new.ready}; {after.as_dict()}; VM survived: {kept}")
    return RestartResult(
        cloud.plan.settings.hypervisor_isolation.value,
        old.plan.name,
        before.qemu_pid,
        after.qemu_pid,
        before.alive_lines,
        after.alive_lines,
        new.ready,
        kept,
        before.as_dict(),
        after.as_dict(),
        panic,
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
