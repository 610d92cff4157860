"""One run of the cloud test: plan, node, deploy, use, report, tear down."""

from __future__ import annotations

import contextlib
import json
import os
import resource
import shutil
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from components.mechanism import internal_tls
from components.services.cinder import volume_pods
from tests.lab.cloud import (
    apply_scenario,
    certificate_requests,
    encryption,
    endpoint_tls,
    rotation,
    upgrade_scenario,
)
from tests.lab.cloud.apiserver import LabApiServer
from tests.lab.cloud.capture import Capture, CaptureError
from tests.lab.cloud.ceph import CephStandIn, CephStartError, monitors_override
from tests.lab.cloud.cluster import FABRIC_NETNS, LAYOUTS, Cluster, provider_counters
from tests.lab.cloud.deploy import API_SERVER_PORT, Cloud, DeployFailedError, api_server_endpoint
from tests.lab.cloud.gateway import PROXY_NETNS
from tests.lab.cloud.guest import BOOTED, Guest, build_guest
from tests.lab.cloud.images import ReleaseVenvs
from tests.lab.cloud.isolation import check_isolation
from tests.lab.cloud.netpol import CniMode
from tests.lab.cloud.node import kill_cgroups
from tests.lab.cloud.plan_images import image_commands, release_venvs
from tests.lab.cloud.public_access import FrontDoor
from tests.lab.cloud.report import Report
from tests.lab.cloud.services import API_SERVER_ADDRESS
from tests.lab.cloud.tempest_run import TempestError, TempestRequest, run_tempest
from tests.lab.cloud.uplink import UplinkBridges
from tests.lab.cloud.userpod import UserPod
from tests.lab.cloud.vmsafety import libvirt_listener, restart_libvirt
from tests.lab.realenv.openstack_venv import ensure_venv
from tools.plan import Plan, build_plan
from tools.release_pins import cache_base
from tools.runtime import REPO, stack_config, stack_file

# The stacks the test starts: their stack files, changed only where this machine differs
# from a real node (machine_overrides): no Open vSwitch kernel module, maybe no working KVM.
TEST_STACKS = ("prod", "staging")
# Which cluster each stack's lab gets (tests/lab/cloud/cluster.py): prod the full one (a control-plane,
# a network and two compute nodes), staging a small one (control plane with the network role, and
# one compute node), which is enough for what staging proves (the VM dies with its libvirt pod).
LAYOUT = {"prod": "full", "staging": "small"}
# Where an everyday change of the stack file is applied to the running cloud (tests/lab/cloud/apply_scenario.py):
# one stack, the one whose run is shortest, as the change rolls the same way on either.
APPLY_STACKS = ("staging",)
JOB_TIMEOUT = 600.0
KVM_PROBE_SECONDS = 20
NO_LVM = "LVM needs device-mapper and the LIO iSCSI target configfs; this machine's kernel has neither"
NO_ISCSI = "iscsid needs the kernel's iSCSI transport (scsi_transport_iscsi); this machine's kernel has no modules"
RBAC_KINDS = ("ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding")


def ceph_override(config: dict[str, str]) -> dict[str, Any]:
    """A stack with a Ceph cluster meets the lab's stand-in (tests/lab/cloud/ceph.py) at its address: its
    monitors are the one machine difference, as the virt type is; fsid, pools and clients stay."""
    ceph = json.loads(config.get("openstack:ceph") or "{}")
    if not ceph:  # unset, or Pulumi.yaml's default {} that the CLI hands over for it
        return {}
    return {"ceph": monitors_override(ceph)}


def machine_overrides(stack: str, virt_type: str, stack_path: Path | None = None) -> dict[str, Any]:
    """The stack's settings with this machine's virtualisation and OVS datapath, nothing else.

    Its virtualisation includes its size: a node group that reserves as many CPUs for the host
    as this machine has would leave guests none (Placement's VCPU inventory would be empty).
    `stack_path` reads the stack's file from elsewhere (a changed one: tests/lab/cloud/apply_scenario.py).
    """
    config = stack_config(stack, stack_path)  # as the CLI passes it: objects as JSON text
    compute = dict(json.loads(config.get("openstack:compute") or "{}"))
    groups = compute.get("nodeGroups") or [{"name": "default"}]
    cpus = os.cpu_count() or 1
    # Containers start with this machine's limits, which the lab cannot raise (its root lacks
    # CAP_SYS_RESOURCE); containerd's have no process limit. QEMU, as nova, cannot be given more
    # processes than the hard limit it inherits.
    # libvirt sets RLIMIT_NOFILE one above max_files (virProcessSetMaxFiles), RLIMIT_NPROC to max_processes.
    limits = {
        "qemuMaxProcesses": (resource.RLIMIT_NPROC, 131072, 0),
        "qemuMaxFiles": (resource.RLIMIT_NOFILE, 32768, 1),
    }
    capped = {}
    for key, (limit, planned, above) in limits.items():
        hard = resource.getrlimit(limit)[1]
        if hard != resource.RLIM_INFINITY and hard - above < planned:
            capped[key] = hard - above
    compute["nodeGroups"] = [
        {
            **group,
            "virtType": virt_type,
            "reservedHostCpus": min(group.get("reservedHostCpus", 0), cpus - 1),
            **{k: min(v, group.get(k, v)) for k, v in capped.items()},
        }
        for group in groups
    ]
    # No OVS kernel module here: the userspace datapath, and this machine's OVS (3.1) cannot tunnel
    # offloaded packets, so userspace TSO is off and the lab's guest computes its own checksums.
    neutron = {
        **json.loads(config.get("openstack:neutron") or "{}"),
        "datapathType": "netdev",
        "userspaceTso": False,
    }
    return {"compute": compute, "neutron": neutron, **ceph_override(config)}


def build_cluster(plan: Plan, state: Path, layout: str) -> Cluster:
    """The lab's nodes, labelled with the plan's own node selectors (compute: its first node group)."""
    selectors = plan.settings.node_selectors
    roles = {
        "control_plane": selectors.control_plane,
        "network": selectors.network,
        "compute": selectors.compute,
        "storage": selectors.storage,
    }
    return Cluster.build(state, LAYOUTS[layout], roles, plan.settings.compute.node_groups[0].node_selector)


def cannot_run(plan: Plan) -> dict[str, str]:
    """The plan's workloads that this machine cannot run, and why (reported as not run)."""
    why_not = {"iscsid": NO_ISCSI}
    for backend, pod in volume_pods(plan.settings):
        if backend == "lvm":
            why_not[pod.name] = NO_LVM
    found = {}
    for r in plan.custom:
        if r.kind == "DaemonSet":
            component = r.inputs["spec"]["template"]["metadata"]["labels"].get("app.kubernetes.io/component")
            if component in why_not:
                found[r.k8s_name or r.name] = why_not[component]
    return found


def admin_env(cloud: Cloud, ca_file: Path | None = None) -> dict[str, str]:
    """The cloud admin's OS_* variables, as the plan's own registration Jobs get them; the internal
    CA's file, which those pods mount (OS_CACERT), is `ca_file` here: a pod's view of the Secret."""
    resolved = _admin_env(cloud)
    for name, value in resolved.items():
        if value == internal_tls.CA_FILE:
            if ca_file is None:
                raise LookupError(f"{name} names the internal CA's file, which the lab has not written")
            resolved[name] = str(ca_file)
    return resolved


def _admin_env(cloud: Cloud) -> dict[str, str]:
    for r in cloud.plan.custom:
        if r.kind != "Job":
            continue
        for container in r.revealed["spec"]["template"]["spec"]["containers"]:
            entries = {e["name"]: e for e in container.get("env", [])}
            if entries.get("OS_USERNAME", {}).get("value") == "admin":
                resolved = {}
                for name, entry in entries.items():
                    if not name.startswith("OS_"):
                        continue
                    if "value" in entry:
                        resolved[name] = entry["value"]
                    else:
                        ref = entry["valueFrom"]["secretKeyRef"]
                        resolved[name] = cloud.objects[("Secret", ref["name"])][ref["key"]]
                return resolved
    raise LookupError("no Job of the plan authenticates as admin")


def api_server(cloud: Cloud, log: Callable[[str], None]) -> LabApiServer:
    """The lab's Kubernetes API, with the plan's RBAC and Secrets; the kubelet mounts its tokens."""
    plan = cloud.plan
    rbac = [r.revealed for r in plan.custom if r.kind in RBAC_KINDS]
    addresses = (API_SERVER_ADDRESS, cloud.cluster.control_plane.ip)
    api = LabApiServer(cloud, rbac, cloud.cluster.state / "apiserver", addresses,
                       plan.settings.endpoints.cluster_domain, log=log)  # fmt: skip
    for r in plan.custom:
        if r.kind == "Secret":
            api.add_secret(plan.settings.namespace, r.revealed)
    cloud.factory.tokens = api.issue
    return api


def ceph_stand_in(plan: Plan, state: Path, log: Callable[[str], None]) -> CephStandIn | None:
    """The external Ceph cluster of a stack that names one, played on the lab's fabric; None without."""
    if plan.settings.ceph is None:
        return None
    return CephStandIn(plan.settings.ceph, state / "ceph", log)


def start_ceph(ceph: CephStandIn, cluster: Cluster, cloud: Cloud, api: LabApiServer) -> None:
    """The cluster up and healthy, and the keyring Secrets its administrator would give the stack, in the
    API server and the kubelet's view before any pod that mounts them starts (tests/lab/cloud/pods.py)."""
    ceph.start(cluster.nodes, FABRIC_NETNS)
    for name, data in ceph.keyring_secrets().items():
        api.add_secret(cloud.plan.settings.namespace, {"metadata": {"name": name}, "stringData": data})
        cloud.objects[("Secret", name)] = dict(data)


def ceph_env(ceph: CephStandIn | None, cloud: Cloud) -> dict[str, str]:
    """What tests/lab/cloud/scenario.py needs for its Ceph steps: which settings keep data there, the
    pools, and a client's ceph.conf whose keyrings include the admin's (the administrator's view)."""
    if ceph is None:
        return {"CEPH_USERS": "[]"}
    users = sorted(".".join(key) for key in cloud.plan.settings.ceph_users())
    return {
        "CEPH_USERS": json.dumps(users),
        "CEPH_POOLS": json.dumps(ceph.ceph.pools.model_dump()),
        "CEPH_CONF": str(ceph.client_conf_path),
        "CEPH_ID": "admin",
    }


def report_api(report: Report, api: LabApiServer) -> None:
    """What the plan's pods asked of the API: refusals are findings (the plan's RBAC is too narrow)."""
    report.api = {
        "requests": len(api.requests),
        "denied": api.denied,
        "by_client": {who: sum(1 for w, *_ in api.requests if w == who) for who in {w for w, *_ in api.requests}},
    }


def use_cloud(
    cloud: Cloud,
    api: LabApiServer,
    user: UserPod,
    venv: Path,
    guest: Guest,
    why_not: dict[str, str],
    ceph: CephStandIn | None = None,
    ca_file: Path | None = None,
    steps: str = "",
) -> dict[str, Any]:
    """Run tests/lab/cloud/scenario.py as a user inside the cluster would: from a pod, by the cluster's names;
    `steps` (comma-separated) some of its steps, by default all."""
    settings = cloud.plan.settings
    # The scenario makes volumes of the default type: whether the first backend's pod runs here.
    volume_cannot_run = why_not.get(volume_pods(settings)[0][1].name, "")
    env = {
        "PATH": f"{venv / 'bin'}:/usr/sbin:/usr/bin:/sbin:/bin",
        "PYTHONPATH": str(REPO),
        "HOME": str(user.home),
        **admin_env(cloud, ca_file),
        "VOLUME_TYPE": settings.cinder.default_backend,
        "VOLUME_BACKEND_RUNS": "false" if volume_cannot_run else "true",
        "VOLUME_NOT_RUN": volume_cannot_run,
        "COMPUTE_HOSTS": ",".join(n.name for n in cloud.cluster.labelled(settings.node_selectors.compute)),
        # An administrator's kubectl: the API server at its Service's name, its CA, a cluster-admin token.
        "KUBE_SERVER": "https://kubernetes.default.svc",
        "KUBE_TOKEN": api.admin_token(),
        "KUBE_CA_FILE": str(api.ca),
        "KUBE_NAMESPACE": settings.namespace,
        **ceph_env(ceph, cloud),
    }
    command = [str(venv / "bin" / "python"), "-m", "tests.lab.cloud.scenario", str(guest.kernel), str(guest.initramfs),
               str(guest.disk), *([steps] if steps else [])]  # fmt: skip
    with (cloud.out / "scenario.log").open("a") as log:
        done = user.run(command, env=env, cwd=REPO, stdout=subprocess.PIPE, stderr=log, timeout=1800)
    try:
        return json.loads(done.stdout.strip().splitlines()[-1])
    except (IndexError, json.JSONDecodeError):
        return {"errors": {"scenario": f"exited {done.returncode} without facts; see {cloud.out / 'scenario.log'}"}}


def prove_public_access(
    door: FrontDoor, cloud: Cloud, venv: Path, guest: Guest, log: Callable[[str], None], ca_file: Path | None = None
) -> dict[str, Any]:
    """The gateway's proxy started, then the proof from a laptop outside (tests/lab/cloud/public_access.py)."""
    try:
        door.open_gateway()
        found = door.prove(venv / "bin" / "python", guest.disk, admin_env(cloud, ca_file))
    except (RuntimeError, LookupError, OSError, subprocess.SubprocessError) as error:
        found = {"public_endpoints_ok": False, "checks": {}, "error": f"{type(error).__name__}: {error}"}
    failed = [name for name, check in found.get("checks", {}).items() if not check.get("ok")]
    log(f"public access: ok {found['public_endpoints_ok']}, failed checks {failed} {found.get('error', '')}")
    return found


def gateway_netns(door: FrontDoor) -> str | None:
    """The gateway proxy's network, where the stack routes through one (Horizon admits only it)."""
    return PROXY_NETNS if door.proxy is not None else None


def prove_endpoints_tls(
    cloud: Cloud, user: UserPod, venv: Path, ca_file: Path | None, log: Callable[[str], None], gateway: str | None
) -> dict[str, Any]:
    """What each endpoint inside the cluster accepts, tried from where its clients are (endpoint_tls.py)."""
    try:
        runs = endpoint_tls.places(cloud, user, gateway) if ca_file is not None else {}
        found = endpoint_tls.check(cloud, runs, venv / "bin" / "python", ca_file)
    except (LookupError, OSError, subprocess.SubprocessError) as error:
        found = {"encrypted_ok": False, "error": f"{type(error).__name__}: {error}"}
    failed = sorted(name for name, e in found.get("endpoints", {}).items() if not e.get("ok"))
    why = found.get("error") or found.get("not_run", "")
    log(f"internal TLS endpoints: ok {found.get('encrypted_ok')}, failed {failed} {why}")
    return found


def internal_tls_seen(
    cloud: Cloud,
    user: UserPod,
    venv: Path,
    ca_file: Path | None,
    wire: Capture | None,
    log: Callable[[str], None],
    gateway: str | None = None,
) -> dict[str, Any]:
    """The `tls` report's part inside the cluster: what the clients sent (the capture's `encrypted`, `wire`),
    what each endpoint accepts (`endpoints`), what stays in clear and why, and `encrypted_ok` for both."""
    seen = encryption_seen(cloud, wire, log)
    endpoints = prove_endpoints_tls(cloud, user, venv, ca_file, log, gateway)
    return {
        **seen,
        "endpoints": endpoints,
        "not_encrypted": endpoint_tls.not_encrypted(cloud.plan.settings),
        "encrypted_ok": bool(seen.get("capture_ok")) and bool(endpoints.get("encrypted_ok")),
    }


def prove_rotation(
    door: FrontDoor,
    cloud: Cloud,
    api: LabApiServer,
    user: UserPod,
    venv: Path,
    ca_file: Path | None,
    server: dict[str, Any],
    log: Callable[[str], None],
    later_plan: Callable[[dict[str, Any]], Plan],
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Every certificate renewed while clients call the APIs, within a rotation of the internal CA, before the
    libvirt restart ends the VM (tests/lab/cloud/rotation.py): `tls.rotation` and `tls.ca_rotation`."""
    try:
        return rotation.prove(door, cloud, api, user, venv / "bin" / "python", ca_file, admin_env(cloud, ca_file),
                              server, log, later_plan)  # fmt: skip
    except (RuntimeError, LookupError, OSError, subprocess.SubprocessError, DeployFailedError) as error:
        log(f"rotation failed: {type(error).__name__}: {error}")
        failed = {"ok": False, "error": f"{type(error).__name__}: {error}"}
        return failed, failed


def prove_apply(
    door: FrontDoor,
    cloud: Cloud,
    user: UserPod,
    venv: Path,
    ca_file: Path | None,
    server: dict[str, Any],
    virt: str,
    log: Callable[[str], None],
) -> dict[str, Any]:
    """An everyday change of the stack file applied as `pulumi up` would, under load, checked against
    `--against`'s prediction (tests/lab/cloud/apply_scenario.py)."""
    stack = cloud.plan.stack
    # The cloud runs the plan the CA rotation ended with (tests/lab/cloud/rotation.py): its tls is what the stack
    # file says once the rotation is done, so the change applied is the node group's alone.
    rotated = {"tls": cloud.plan.settings.tls.model_dump(mode="json", by_alias=True, exclude_none=True)}

    def plan_of(path: Path) -> Plan:
        return build_plan(stack, {**machine_overrides(stack, virt, path), **rotated}, stack_path=path)

    try:
        return apply_scenario.prove(door, cloud, user, venv / "bin" / "python", admin_env(cloud, ca_file), server,
                                    stack_file(stack), plan_of, log)  # fmt: skip
    except (RuntimeError, LookupError, OSError, ValueError, subprocess.SubprocessError) as error:
        log(f"apply failed: {type(error).__name__}: {error}")
        return {"ok": False, "error": f"{type(error).__name__}: {error}"}


def prove_upgrade(
    door: FrontDoor,
    cloud: Cloud,
    user: UserPod,
    venv: Path,
    ca_file: Path | None,
    facts: dict[str, Any],
    plans: upgrade_scenario.UpgradePlans,
    venvs: ReleaseVenvs,
    log: Callable[[str], None],
) -> dict[str, Any]:
    """The release upgrade of the running cloud under load, checked against `--against`'s upgrade view
    (tests/lab/cloud/upgrade_scenario.py), with the user's VMs (vm1, vm2) running."""
    servers = [{**facts[key], "name": name} for key, name in (("server", "vm1"), ("peer_server", "vm2"))
               if facts.get(key)]  # fmt: skip
    try:
        return upgrade_scenario.prove(door, cloud, user, venv / "bin" / "python", admin_env(cloud, ca_file), servers,
                                      plans, venvs.venvs, log)  # fmt: skip
    except (RuntimeError, LookupError, OSError, ValueError, subprocess.SubprocessError) as error:
        log(f"upgrade failed: {type(error).__name__}: {error}")
        return {"error": f"{type(error).__name__}: {error}"}


def merged_facts(first: dict[str, Any], later: dict[str, Any]) -> dict[str, Any]:
    """What the scenario found before and after an upgrade, as one run would have reported it: a later
    fact of the same object (the server's host after the maintenance) over the earlier one."""
    merged = dict(first)
    for key, value in later.items():
        earlier = merged.get(key)
        merged[key] = merged_facts(earlier, value) if isinstance(earlier, dict) and isinstance(value, dict) else value
    return merged


def virt_type(guest: Guest, log: Callable[[str], None]) -> str:
    """kvm when this machine's /dev/kvm boots the guest, else qemu (software emulation)."""
    if not Path("/dev/kvm").exists():
        return "qemu"
    command = [
        "qemu-system-x86_64", "-machine", "accel=kvm", "-m", "128", "-nographic", "-no-reboot", "-nodefaults",
        "-serial", "stdio", "-kernel", str(guest.kernel), "-initrd", str(guest.initramfs), "-append", "console=ttyS0",
    ]  # fmt: skip
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=KVM_PROBE_SECONDS)
        booted = BOOTED in done.stdout
    except subprocess.TimeoutExpired as timeout:
        booted = BOOTED in (timeout.stdout or b"").decode(errors="replace")
    log(f"KVM {'boots' if booted else 'does not boot'} the guest here: virtType {'kvm' if booted else 'qemu'}")
    return "kvm" if booted else "qemu"


def _stop_once(signum: int, frame: object) -> None:
    """The first Ctrl-C or SIGTERM stops the run; further ones (timeout forwards its own) must not
    interrupt the teardown and leave the cloud half-stopped."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    raise KeyboardInterrupt


def tempest_step(
    cloud: Cloud,
    user: UserPod,
    venv: Path,
    request: TempestRequest,
    why_not: dict[str, str],
    log: Callable[[str], None],
    ca_file: Path | None = None,
) -> dict[str, Any]:
    """Tempest's API tests against the cloud (tests/lab/cloud/tempest_run.py), as a user inside the cluster."""
    try:
        found = run_tempest(
            cloud.plan, request, cloud.cluster.state, cloud.out, admin_env(cloud, ca_file), venv / "bin" / "python",
            why_not, user.run, log,
        )  # fmt: skip
    except (TempestError, OSError, subprocess.SubprocessError) as error:
        return {"error": f"{type(error).__name__}: {error}"}
    classes = [f["class"] for f in found["failures"]]
    counts = {k: found[k] for k in ("passed", "failed", "skipped")}
    counts |= {"cloud_failures": classes.count("cloud"), "lab_failures": classes.count("lab")}
    log(f"tempest {request.selection}: {counts}")
    only = {"filter": request.only} if request.only else {}
    return {"selection": request.selection, **only, "workers": request.workers, **counts}


def start_capture(cloud: Cloud, log: Callable[[str], None]) -> Capture | None:
    """The packet capture on every node (tests/lab/cloud/encryption.py), or None when tcpdump would not start."""
    wire = encryption.capture(cloud, cloud.cluster.state / "capture")
    try:
        wire.start()
    except (CaptureError, OSError) as error:
        log(f"capture: {error}")
        return None
    return wire


def encryption_seen(cloud: Cloud, wire: Capture | None, log: Callable[[str], None]) -> dict[str, Any]:
    """The `tls` report's `encrypted`, `capture_ok` and `wire` from the capture."""
    if wire is None:
        return {"encrypted": {}, "capture_ok": False, "capture_error": "tcpdump did not start (see events.log)"}
    wire.stop()
    try:
        seen = encryption.encrypted(cloud, wire)
    except (CaptureError, OSError) as error:
        return {"encrypted": {}, "capture_ok": False, "capture_error": f"reading the capture: {error}"}
    log(f"encrypted: {json.dumps(seen['encrypted'])} ok {seen['capture_ok']}")
    return seen


def run(
    stack: str,
    out: Path,
    keep: bool = False,
    cni: CniMode = CniMode.NODE_IPS_NOT_IN_IPBLOCK,
    tempest: TempestRequest | None = None,
    tempest_only: bool = False,
) -> Report:
    """Start the stack's cloud, prove it (the scenarios below, then Tempest if asked), stop it.
    `tempest_only`: deploy the stack's own release and run only Tempest (`make test-tempest`), so that
    the full set's hours are not added to the scenarios' (and the upgrade's second deploy)."""
    signal.signal(signal.SIGINT, _stop_once)
    signal.signal(signal.SIGTERM, _stop_once)
    shutil.rmtree(out / "logs", ignore_errors=True)
    out.mkdir(parents=True, exist_ok=True)
    (out / "scenario.log").unlink(missing_ok=True)  # the scenario's runs of this run append to it
    events = (out / "events.log").open("w")
    started = time.monotonic()

    def log(line: str) -> None:
        stamped = f"{time.monotonic() - started:7.1f}s {line}"
        events.write(stamped + "\n")
        events.flush()
        print(stamped, flush=True)

    def phase(name: str, since: float) -> None:
        report.seconds[name] = time.monotonic() - since

    since = time.monotonic()
    venv = ensure_venv()  # the stack file's release: the user's and the clients' tools
    guest = build_guest(cache_base() / "guest")
    virt = virt_type(guest, log)

    def plan_of(path: Path) -> Plan:
        return build_plan(stack, machine_overrides(stack, virt, path), stack_path=path)

    # A stack whose lab proves an upgrade deploys the release before its own (tests/lab/cloud/upgrade_scenario.py).
    upgrade = None if tempest_only else upgrade_scenario.upgrade_plans(stack, stack_file(stack), out, plan_of)
    overrides = machine_overrides(stack, virt)
    plan = upgrade.previous if upgrade else build_plan(stack, overrides)
    plans = [plan, *([upgrade.upgrading, upgrade.final] if upgrade else [])]
    venvs = release_venvs(plans, plan.settings.release, lambda release: ensure_venv(release).path)
    report = Report(stack, plan.settings.hypervisor_isolation.value)
    if virt != "kvm":
        why = "/dev/kvm here does not boot a guest: guests run under QEMU's software emulation (TCG)"
        report.not_run.append({"what": "KVM", "why": why})
    phase("prepare", since)
    # The nodes' state (hostPaths, pods, claims); CLOUD_STATE_DIR moves it (two labs at once).
    state = Path(os.environ.get("CLOUD_STATE_DIR") or Path("/var/tmp") / f"cloud-{stack}")
    cluster = build_cluster(plan, state, LAYOUT[stack])
    kill_cgroups()  # whatever an earlier run that was killed left behind
    cluster.create()
    uplinks = UplinkBridges(cluster.nodes, log)
    uplinks.start()
    why_not = cannot_run(plan)
    cloud = Cloud(plan, cluster, venvs, out, log, why_not, cni)
    cloud.factory.image_commands = image_commands(plans)
    api = api_server(cloud, log)
    cloud.api = api  # an apply of a new plan changes its Secrets and RBAC
    door = FrontDoor.issue(cloud, api, log)  # cert-manager's Secrets, before any pod mounts them
    certificate_requests.serve(api, door.certs)  # and the CertificateRequests pods make (libvirt-tls)
    user = UserPod(cluster.control_plane, cluster.state / "user", plan.settings.namespace,
                   plan.settings.endpoints.cluster_domain)  # fmt: skip
    ceph = ceph_stand_in(plan, cluster.state, log)
    wire: Capture | None = None
    ca_file: Path | None = None
    try:
        since = time.monotonic()
        try:
            if ceph is not None:  # first: the plan's pods mount its keyring Secrets
                start_ceph(ceph, cluster, cloud, api)
                phase("ceph", since)
                since = time.monotonic()
            api.start(cluster.control_plane.netns_path, API_SERVER_PORT)
            cloud.start_cluster_services(api_server_endpoint(cluster.control_plane))
            user.start()
            cloud.deploy()
            # The internal CA as the cloud's pods trust it (the bundle the Job wrote), for the lab's clients.
            ca_file = endpoint_tls.write_internal_ca(cloud, user.state)
            cloud.run_cron_jobs(JOB_TIMEOUT)
        except (DeployFailedError, CephStartError, endpoint_tls.InternalCaMissingError) as error:
            report.deploy_error = str(error)
            log(f"deploy failed: {error}")
        phase("deploy", since)
        if tempest_only:
            why = "asked for Tempest only (--tempest-only, make test-tempest); make test-cloud runs them"
            report.not_run.append({"what": "the lab's own scenarios (user, public access, rotation, upgrade, apply, "
                                   "libvirt restart, maintenance)", "why": why})  # fmt: skip
        if not report.deploy_error and tempest_only and tempest:
            since = time.monotonic()
            # The image, networks and flavor a user makes first: what tempest.conf names (tempest_discover.py).
            report.user = use_cloud(cloud, api, user, venv.path, guest, why_not, ceph, ca_file, "prepare")
            log(f"user: {json.dumps(report.user)[:2000]}")
            report.tempest = tempest_step(cloud, user, venv.path, tempest, why_not, log, ca_file)
            phase("tempest", since)
        elif not report.deploy_error:
            since = time.monotonic()
            wire = start_capture(cloud, log)  # what crosses the wires while both users work
            # Before an upgrade the servers (and a volume); the Ceph proof and the maintenance after it.
            first = "server,volume" if upgrade else ""
            report.user = use_cloud(cloud, api, user, venv.path, guest, why_not, ceph, ca_file, first)
            report.provider = provider_counters()
            log(f"user: {json.dumps(report.user)[:2000]}")
            phase("use", since)
            since = time.monotonic()
            report.tls = prove_public_access(door, cloud, venv.path, guest, log, ca_file)
            phase("public_access", since)
            if upgrade is None:  # else once the scenario's last steps ran: their migrations cross the wires too
                report.tls |= internal_tls_seen(cloud, user, venv.path, ca_file, wire, log, gateway_netns(door))
            server = report.user.get("server", {})
            since = time.monotonic()
            changed_plan = lambda changed: build_plan(stack, {**overrides, **changed})  # noqa: E731
            report.tls["rotation"], report.tls["ca_rotation"] = prove_rotation(
                door, cloud, api, user, venv.path, ca_file, server, log, changed_plan
            )
            phase("rotation", since)
            if upgrade is not None:  # with vm1 and vm2 running; the scenario's other steps then on the new release
                since = time.monotonic()
                report.upgrade = prove_upgrade(door, cloud, user, venv.path, ca_file, report.user, upgrade, venvs, log)
                phase("upgrade", since)
                since = time.monotonic()
                later = use_cloud(cloud, api, user, venv.path, guest, why_not, ceph, ca_file, "ceph,maintenance")
                report.user = merged_facts(report.user, later)
                log(f"user after the upgrade: {json.dumps(later)[:2000]}")
                phase("use_after_upgrade", since)
                # The capture ran through the upgrade: libvirt's hops (tls.libvirt) are the maintenance's migrations.
                report.tls |= internal_tls_seen(cloud, user, venv.path, ca_file, wire, log, gateway_netns(door))
                server = report.user.get("server", {})
            if stack in APPLY_STACKS:  # while the VM runs: the libvirt restart below ends it on staging
                since = time.monotonic()
                report.apply = prove_apply(door, cloud, user, venv.path, ca_file, server, virt, log)
                phase("apply", since)
            report.libvirt_listener = libvirt_listener(cloud, server.get("host"))
            report.network_policies = check_isolation(cloud)
            if server.get("status") == "ACTIVE" and server.get("instance_name"):
                since = time.monotonic()
                result = restart_libvirt(cloud, server["host"], server["instance_name"], server["id"], log)
                report.libvirt_restart = result.as_dict()
                if result.guest_panic_before:  # judged by QEMU alone (tests/cloud/test_cloud.py), and said here
                    report.not_run.append(
                        {
                            "what": "the libvirt restart seen from the guest: its kernel panicked before the restart",
                            "why": "under QEMU's software emulation (TCG), after its live migrations: "
                            + result.guest_panic_before,
                        }
                    )
                phase("libvirt_restart", since)
            if tempest:  # last: the other checks stay as fast, and it sees the cloud they left
                since = time.monotonic()
                report.tempest = tempest_step(cloud, user, venv.path, tempest, why_not, log, ca_file)
                phase("tempest", since)
        report_api(report, api)
        report.not_run += door.stand_ins()
        if any(who.endswith("libvirt-tls") for who, *_ in api.requests):
            report.not_run.append(dict(certificate_requests.STAND_IN))
        if door.proxy is not None:
            report.gateway_proxy = {"kind": "Gateway", "pods": 1, "ready": int(door.proxy.running)}
        if ceph is not None:
            report.external_stand_ins["ceph"] = ceph.facts()
        report.build(cloud, why_not)
        (out / "report.json").write_text(json.dumps(report.data, indent=2) + "\n")
        print(report.summary(), flush=True)
        if keep:
            log("cloud left running; Ctrl-C ends it")
            with contextlib.suppress(KeyboardInterrupt):
                while True:
                    time.sleep(3600)
    finally:
        if wire is not None:  # a run stopped between the capture's start and its reading
            wire.stop()
        uplinks.stop()
        door.stop()
        cloud.stop()
        if ceph is not None:  # after the pods (QEMU among them) that hold its images open
            ceph.stop()
        api.stop()
        user.stop()
        cluster.delete()
    return report
