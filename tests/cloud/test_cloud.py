"""The running cloud: every pod of a stack's plan started as Kubernetes would start it, then used.

`python -m tests.lab.cloud` (tests/lab/cloud/) starts the prod and staging plans on this machine, with
only their virtualisation and Open vSwitch datapath changed to what this machine has, boots a
VM and restarts the libvirt pod under it; these tests read the report it writes. They are the
product's proof of work: a pod that does not become Ready, a probe that never passes, a Job
that fails, a VM without a DHCP lease or metadata fail them. Needs root (namespaces, cgroups).
"""

from __future__ import annotations

import itertools
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from components.cloud import upgrade
from components.cloud.upgrade_recipes import CONTROL_PLANE_ORDER
from components.mechanism import oslo
from components.nodes.compute_pods import compute_daemonsets
from tests.cloud.conftest import SUMMARIES
from tests.conftest import plan_of
from tools.runtime import REPO

# Whole runs take minutes; the harness has its own deadlines (tests/lab/cloud/run.py). prod's with its upgrade.
RUN_TIMEOUT = 3600
# Tempest's smoke set runs against one stack's cloud before it stops (the full set: make test-tempest): prod's,
# after its upgrade, so it is also the proof that the upgraded cloud works; two workers, as make test-tempest.
TEMPEST = {"prod": ("--tempest", "smoke", "--tempest-workers", "2")}
# The issuer of the public certificate each stack names (stacks/Pulumi.<stack>.yaml: tls.public.issuer).
PUBLIC_ISSUERS = {"prod": "ClusterIssuer letsencrypt", "staging": "ClusterIssuer letsencrypt-staging"}
# Under option 5 libvirt and its guests live outside the pod's cgroup; under option 4 they are the pod's.
SURVIVES = {"pod-per-service-host-pid": True, "pod-per-service": False}


@pytest.fixture(scope="module", params=["prod", "staging"])
def report(request: pytest.FixtureRequest) -> dict[str, Any]:
    stack = request.param
    if os.geteuid() != 0:
        pytest.fail("the cloud test needs root (network namespaces, cgroups, mounts): run it as root", pytrace=False)
    out = REPO / "build" / "cloud" / stack
    out.mkdir(parents=True, exist_ok=True)
    (out / "report.json").unlink(missing_ok=True)
    (out / "tempest.json").unlink(missing_ok=True)
    command = [sys.executable, "-m", "tests.lab.cloud", "--stack", stack, "--out", str(out), *TEMPEST.get(stack, ())]
    log = out / "run.log"
    with log.open("w") as output:
        subprocess.run(command, cwd=REPO, stdout=output, stderr=subprocess.STDOUT, timeout=RUN_TIMEOUT)
    found = out / "report.json"
    assert found.exists(), f"no report; the run's output is in {log}:\n{log.read_text()[-3000:]}"
    data = json.loads(found.read_text())
    summary = log.read_text().split("cloud test ", 1)
    SUMMARIES.append("cloud test " + summary[1].strip() if len(summary) == 2 else f"{stack}: no summary")
    return data


# The lab each stack gets (tests/lab/cloud/run.py LAYOUT): prod the full cluster, staging a small one.
NODES = {"prod": 4, "staging": 2}


def test_the_plan_deploys(report: dict[str, Any]) -> None:
    assert report["deploy_error"] == ""
    assert report["failed_jobs"] == []


# A container restarted in place, or a Job's failed attempt, passes only with a reason named here (a regex over
# `<pod>/<container>` or the Job's name → why it is expected). None is: a crash that a retry hides is a failure.
ALLOWED_RESTARTS: dict[str, str] = {}


def test_no_container_restarts_and_no_job_retries_without_a_named_reason(report: dict[str, Any]) -> None:
    unexplained = {
        what: count
        for what, count in {**report["restarts"], **report["job_retries"]}.items()
        if not any(re.search(pattern, what) for pattern in ALLOWED_RESTARTS)
    }
    assert unexplained == {}, unexplained


def test_pods_run_on_the_nodes_the_plan_places_them(report: dict[str, Any]) -> None:
    nodes = report["nodes"]
    assert len(nodes) == NODES[report["stack"]]
    assert all(node["pods"] for node in nodes.values()), {n: len(v["pods"]) for n, v in nodes.items()}
    # Compute nodes run the node pods, and no control-plane pod lands there.
    for name, node in nodes.items():
        if "openstack-control-plane" not in node["labels"]:
            assert not any(p.startswith(("keystone-api", "nova-api", "glance-api")) for p in node["pods"]), name


def test_every_pod_is_ready_and_every_probe_passes(report: dict[str, Any]) -> None:
    assert report["unready"] == []
    assert report["pods"]["ready"] == report["pods"]["total"] > 20
    operators = {n: s for n, s in report["stand_ins"].items() if n != "ceph"}
    assert all(s["ready"] == s["pods"] == 1 for s in operators.values()), report["stand_ins"]
    # prod's external Ceph: its monitor, manager and OSD ran to the end (tests/lab/cloud/ceph.py).
    ceph = report["stand_ins"].get("ceph")
    assert (ceph is not None) is (report["stack"] == "prod"), report["stand_ins"]
    if ceph is not None:
        assert ceph["ready"] == ceph["pods"] == 3 and ceph["healthy_after_s"] is not None, ceph
    assert report["failed_probes"] == []
    assert report["probes"]["passed"] == report["probes"]["total"] > 20


def test_every_job_succeeds(report: dict[str, Any]) -> None:
    assert report["jobs"]["succeeded"] == report["jobs"]["total"] > 30
    # The key rotation CronJobs ran against the lab's API server, within their RBAC.
    assert {"keystone-fernet-rotate", "keystone-credential-rotate"} <= set(report["jobs"]["succeeded_names"])
    assert report["api"]["denied"] == []


def test_the_ordering_costs_little_over_the_critical_path(report: dict[str, Any]) -> None:
    deploy = report["deploy"]
    assert 0 < deploy["critical_path_s"] <= deploy["makespan_s"]
    assert deploy["ratio"] < 1.3, deploy


def test_a_server_boots_with_dhcp_and_metadata(report: dict[str, Any]) -> None:
    assert report["user_errors"].get("server") is None, report["user_errors"].get("server")
    server = report["server"]
    assert server["status"] == "ACTIVE"
    assert server["port_status"] == "ACTIVE"
    assert server["dhcp_lease"], "the guest got no lease from neutron's DHCP agent for its port's address"
    assert server["metadata"], "the guest did not get its instance id and uuid from the metadata service"
    # Through the router's SNAT and br-ex's NIC on the network node to the world outside.
    assert server["provider_reachable"], (server, report["provider_network"])


def test_vms_on_two_nodes_reach_each_other_across_the_tunnel(report: dict[str, Any]) -> None:
    if NODES[report["stack"]] < 4:
        assert report["peer_server"] == {}  # one compute node: no second VM
        return
    # vm2 booted on the other compute node (before any migration moved vm1).
    assert report["peer_server"]["host"] == report["peer_server"]["asked_host"] == "node-c2", report["peer_server"]
    assert report["server"]["peer_reachable"], report["peer_server"]


def test_horizon_login_through_its_form(report: dict[str, Any]) -> None:
    """From outside, through the gateway (its NetworkPolicy admits nothing else)."""
    assert report["horizon_login"], report["horizon"]
    assert report["horizon"].get("static_css") == 200  # its stylesheets are served
    assert report["horizon"].get("secure_cookies"), report["horizon"]  # session and CSRF cookies over TLS only


def test_the_public_endpoints_work_from_a_laptop_outside_through_the_gateway(report: dict[str, Any]) -> None:
    """tests/lab/cloud/public_access.py: cert-manager's and the Gateway's stand-ins, then a laptop outside the
    cluster that trusts only the public CA and resolves the public names to the gateway's address."""
    tls = report["tls"]
    checks = tls["checks"]
    failed = {name: check for name, check in checks.items() if not check.get("ok")}
    assert tls["public_endpoints_ok"], (failed, tls["gateway"])
    assert tls["gateway"]["problems"] == [] and tls["gateway"]["unrouted_public_hosts"] == []
    # Only the catalog's public URLs, https at the routed names, with links built from the forwarded headers.
    assert checks["catalog"]["public_urls"] and all(
        url.startswith("https://") for url in checks["catalog"]["public_urls"].values()
    )
    assert checks["image_upload"]["size"] == checks["image_upload"]["bytes"]
    assert checks["server_create"]["status"] == "ACTIVE"
    console = checks["console"]
    assert console["url_scheme"] == "https" and console["status"] == 101, console
    assert console["rfb"].startswith("RFB 003."), console  # the VNC server's greeting, through the tunnel
    # On past the proxy's security negotiation with the guest's VNC server (VeNCrypt under tls.libvirt).
    assert console["handshake"]["reached"] == "ServerInit" and console["handshake"]["security_types"] == [1], console
    assert checks["verification"]["ok"]  # the machine's CA store refuses the certificate: verification is on
    assert checks["unrouted_host"]["status"] == 404
    # Horizon and the console proxy answer the gateway only, not a pod inside the cluster.
    reach = {k: v for k, v in checks["gateway_only"].items() if k != "ok"}
    assert reach and all(v == {"from_user_pod": False, "from_gateway": True} for v in reach.values()), reach
    # The public certificate names every routed host; its issuer is the stack's.
    certificate = tls["certificates"]["openstack/public-tls"]
    assert set(certificate["dns_names"]) == {h for hosts in tls["gateway"]["routes"].values() for h in hosts}
    assert certificate["issuer"] == PUBLIC_ISSUERS[report["stack"]]
    # What the lab stands in for is said so.
    stood_in = {item["what"] for item in report["not_run"]}
    assert {"cert-manager", "the Gateway's implementation (Envoy Gateway's proxy)"} <= stood_in, stood_in
    assert f"ClusterIssuer {certificate['issuer'].split()[-1]}" in stood_in
    assert report["stand_ins"]["gateway-proxy"] == {"kind": "Gateway", "pods": 1, "ready": 1}


def test_every_certificate_renews_under_load_with_no_failed_call_but_during_the_operators_restarts(
    report: dict[str, Any],
) -> None:
    """tests/lab/cloud/rotation.py: two clients call the APIs every second (the laptop through the gateway, the
    user's pod inside) while the cert-manager stand-in renews every certificate that is no CA; each consumer
    does what it does on a cluster (the kubelet rewrites the volumes, the gateway takes its certificate hot,
    mariadb-operator replaces its pod; uWSGI, memcached and RabbitMQ reload by themselves), and every endpoint
    must come to serve its new certificate with the VM running throughout."""
    rotation = report["tls"]["rotation"]
    if not plan_of(report["stack"]).settings.tls.internal_enabled:
        assert "plainText" in rotation["not_run"], rotation
        return
    renewed = rotation["renewed"]
    served = {name for name, ok in renewed.items() if ok}
    wanted = {"public-tls", "keystone-api-internal-tls", "nova-api-internal-tls", "rabbitmq-internal-tls",
              "mariadb-internal-tls", "memcached-internal-tls"}  # fmt: skip
    assert {f"openstack/{name}" for name in wanted} <= served, renewed
    assert not [name for name, ok in renewed.items() if ok is False], rotation["endpoints"]
    # The roots are replaced by the CA rotation, whose issue phase is this renewal (tls.ca_rotation).
    assert set(rotation["not_renewed"]) == {"openstack/internal-ca", "openstack/internal-ca-2"}, rotation
    # Every endpoint now serves another certificate than before.
    changed = {name: e for name, e in rotation["endpoints"].items() if e["renewed_served"]}
    assert changed and all(e["before"] != e["after"] for e in changed.values()), rotation["endpoints"]
    # The clients worked before the renewal, and failed only while the operator replaced MariaDB's pod.
    assert rotation["calls_before_renewal"] > 0 and rotation["failed_before_renewal"] == 0, rotation
    assert rotation["failed_outside_restarts"] == 0, rotation["failures"]
    assert set(rotation["by_client"]) == {"laptop", "user-pod"}
    assert {r["pod"] for r in rotation["restarted"]} == {"mariadb-0"}, rotation["restarted"]
    assert rotation["gateway_listeners_swapped"], rotation
    assert rotation["vm_survived"], rotation["vm"]
    # Last, so that a failure above names its own part rather than a long report cut short.
    assert rotation["ok"], {k: v for k, v in rotation.items() if k not in ("endpoints", "renewed")}


def test_the_internal_ca_is_rotated_under_load_without_an_outage(report: dict[str, Any]) -> None:
    """tests/lab/cloud/ca_rotation.py: under the same client loops, staging's CA internal-ca replaced by internal-ca-2
    in its phases (trust, issue, the rotation removed), each one's plan applied by tests/lab/cloud/apply.py as
    `pulumi up` and the cluster would, and checked against --against's prediction. The bundle holds both CAs,
    then the new one only; the processes that read it once roll when it changes and not at issue; every
    endpoint verifies with the bundle after each phase (at the end with internal-ca-2 alone); no call fails
    but while MariaDB's pod is replaced or a Deployment rolls; the VM runs throughout."""
    found = report["tls"]["ca_rotation"]
    if not plan_of(report["stack"]).settings.tls.internal_enabled:
        assert "plainText" in found["not_run"], found
        return
    phases = found["phases"]
    assert list(phases) == ["trust", "issue", "done"], found
    assert {name: p["error"] for name, p in phases.items()} == {"trust": "", "issue": "", "done": ""}, phases
    assert phases["trust"]["bundle"] == ["CN=internal-ca", "CN=internal-ca-2"], phases["trust"]
    assert phases["done"]["bundle"] == ["CN=internal-ca-2"], phases["done"]
    bundle_job = {"Job/internal-ca-bundle": "Complete"}
    assert phases["trust"]["jobs"] == phases["done"]["jobs"] == bundle_job and phases["issue"]["jobs"] == {}
    read_once = {"keystone-api", "glance-api", "placement-api", "nova-api", "nova-metadata", "neutron-server",
                 "cinder-api", "nova-scheduler", "nova-conductor", "nova-novncproxy", "horizon"}  # fmt: skip
    rolled = {f"Deployment/{name}" for name in read_once}
    assert set(phases["trust"]["rolled"]) == set(phases["done"]["rolled"]) == rolled, found
    assert phases["issue"]["rolled"] == {}
    for name, phase in phases.items():
        check = phase["predicted_vs_actual"]
        for what in ("pods_rolled", "jobs_run", "objects_replaced"):
            assert check[what]["missing"] == [] and check[what]["unexpected"] == [], (name, what, check[what])
    assert {name: p["unverified"] for name, p in phases.items()} == {"trust": [], "issue": [], "done": []}
    assert {r["pod"] for p in phases.values() for r in p["restarted"]} == {"mariadb-0"}, phases
    assert found["failed_outside_restarts"] == 0 and found["vm_survived"], found
    assert found["ok"], {k: v for k, v in found.items() if k != "phases"}


def test_a_capture_on_every_node_sees_what_internal_tls_encrypts(report: dict[str, Any]) -> None:
    """tests/lab/cloud/encryption.py: tcpdump on every node while both users work, each connection to a data
    store or an API classed by what its client sent first. Under plainText (prod) the capture must see SQL
    and AMQP in clear (so it sees what crosses the wires); under internal TLS (staging), none of what the
    plan encrypts."""
    tls = report["tls"]
    wire, encrypted = tls["wire"], tls["encrypted"]
    for store in ("mariadb", "rabbitmq", "memcached", "keystone-api"):
        assert wire[store]["connections"] > 0, (store, wire[store])
    if not plan_of(report["stack"]).settings.tls.internal_enabled:
        assert not tls["internal_tls"] and not tls["capture_ok"] and not tls["encrypted_ok"]
        # Every connection in clear, pooled ones (seen mid-stream: SQL, AMQP frames) and new ones alike.
        for name in ("mariadb", "rabbitmq", "memcached", "keystone-api"):
            assert wire[name]["tls"] == 0 and wire[name]["plain"] == wire[name]["connections"], (name, wire[name])
        return
    assert tls["capture_ok"], {name: wire[name] for name, ok in encrypted.items() if ok is False}
    assert encrypted["mariadb"] and encrypted["rabbitmq"] and encrypted["keystone-api"], encrypted
    assert encrypted["memcached"], wire["memcached"]  # token and session caches (tests/real/test_memcached_tls.py)
    # What goes in clear is only what the report names with why.
    clear = {name for name, ok in encrypted.items() if ok is False}
    assert clear <= set(tls["not_encrypted"]), clear


def test_inside_the_cluster_the_apis_horizon_and_the_data_stores_speak_tls_only(report: dict[str, Any]) -> None:
    """tests/lab/cloud/endpoint_tls.py from the user's pod, and the gateway's BackendTLSPolicies
    (tests/lab/cloud/backendtls.py): under tls.internal (staging) each API Service, amqps and MariaDB complete a
    handshake verifying the internal CA and the Service's name, refuse a client with only the machine's CA
    store, and give plain text nothing; the gateway verifies every API backend. A plain-text stack (prod)
    says there is nothing to check."""
    tls = report["tls"]
    probe = tls["endpoints"]
    not_encrypted = tls["not_encrypted"]
    assert "rabbitmq-nodes" in not_encrypted and "memcached" not in not_encrypted  # said, with why
    settings = plan_of(report["stack"]).settings
    if not settings.tls.internal_enabled:
        assert "plainText" in probe["not_run"], probe
        backends = tls["gateway"]["backends"]
        assert backends and all(how.startswith("plain HTTP") for how in backends.values()), backends
        return
    failed = {name: e["failed"] for name, e in probe["endpoints"].items() if not e["ok"]}
    assert probe["encrypted_ok"] and tls["encrypted_ok"], (failed, probe.get("error"))
    endpoints = probe["endpoints"]
    wanted = {"rabbitmq:5671", f"{oslo.database_service(settings)}:3306", "keystone-api:5000", "memcached-0:11211"}
    assert wanted <= set(endpoints), endpoints
    for name, endpoint in endpoints.items():
        assert endpoint["version"] in ("TLSv1.2", "TLSv1.3"), (name, endpoint)
        assert endpoint["host"] in endpoint["dns_names"], (name, endpoint)  # the name its clients use
    # The gateway verifies every API it routes to, and no policy is refused.
    assert set(tls["gateway"]["backend_tls"].values()) == {"Accepted"}, tls["gateway"]["backend_tls"]
    backends = tls["gateway"]["backends"]
    assert backends["openstack/keystone-api:5000"].startswith("TLS, verifying keystone-api.openstack.svc"), backends
    # Horizon too (users' passwords and session cookies), and the console proxy (console tokens, keystrokes).
    assert backends["openstack/horizon:8080"].startswith("TLS, verifying horizon.openstack.svc"), backends
    assert backends["openstack/nova-novncproxy:6080"].startswith("TLS, verifying nova-novncproxy.openstack.svc")
    assert not {"horizon", "nova-novncproxy"} & set(tls["not_encrypted"]), tls["not_encrypted"]
    assert endpoints["nova-novncproxy:6080"]["version"] in ("TLSv1.2", "TLSv1.3")  # probed from the gateway


def test_cinder_answers_and_says_why_no_volume(report: dict[str, Any]) -> None:
    assert report["volume_type"] is True  # the default volume type cinder.conf names exists
    volume = report["volume"]
    assert volume.get("status") == "available" or "device-mapper" in volume.get("not_run", "")


def test_images_volumes_and_disks_live_in_a_real_ceph_where_the_stack_names_one(report: dict[str, Any]) -> None:
    """prod's images, volumes, disks and backups (`-k prod` selects prod's run only: no test name says a stack)."""
    ceph = report["ceph"]
    if report["stack"] != "prod":  # staging keeps files and LVM
        assert "not_run" in ceph, ceph
        return
    assert ceph["errors"] == {}, ceph["errors"]
    assert ceph["image"]["protected_snapshot"], ceph["image"]  # Glance wrote it to the images pool
    assert ceph["clone"]["parent_is_image"], ceph["clone"]  # vm1's disk is a clone of it, not a copy
    assert ceph["boot_from_volume"]["booted"] and ceph["boot_from_volume"]["volume_parent"], ceph["boot_from_volume"]
    attach = ceph["attach"]
    assert attach["read_back_matches"] and attach["in_rbd"], attach  # the guest's write survived detach/attach
    assert ceph["snapshot"]["in_rbd"] and ceph["backup"]["in_rbd"], (ceph["snapshot"], ceph["backup"])
    moved = ceph["live_migration"]
    assert moved["to"] != moved["from"] and moved["counter_kept"] and moved["same_disk_image"] is True, moved
    # prod's volumes are in Ceph: a volume was made, so "a Cinder volume" is not listed as not run.
    assert report["volume"].get("status") == "available", report["volume"]
    assert "a Cinder volume" not in [item["what"] for item in report["not_run"]]


def test_vm_safety_of_the_topology(report: dict[str, Any]) -> None:
    restart = report["libvirt_restart"]
    assert restart["qemu_pid_before"] is not None, "no running QEMU to restart libvirt under"
    assert restart["new_pod_ready"] is True
    if restart.get("guest_panic_before"):
        # The guest's kernel had died before the restart (seen after TCG live migrations: an oops in its timer
        # wheel, tests/lab/cloud/vmsafety.py PANIC), so its console cannot show the restart's effect; QEMU can:
        # the same process afterwards where the topology keeps VMs, none where it kills them. The panic is
        # listed in not_run, not excused silently.
        assert any("panicked" in item["what"] for item in report["not_run"]), report["not_run"]
        kept = restart["qemu_pid_after"] == restart["qemu_pid_before"] is not None
        assert kept is SURVIVES[report["topology"]], restart
        return
    assert restart["vm_survived"] is SURVIVES[report["topology"]], restart
    if not restart["vm_survived"]:
        assert restart["qemu_pid_after"] is None, "the old QEMU runs on, but the guest stopped talking"


def test_a_changed_stack_applied_as_pulumi_up_does_what_against_predicted(report: dict[str, Any]) -> None:
    """tests/lab/cloud/apply_scenario.py (staging): the first node group's reservedHostMemoryMb lowered in the stack
    file (nova.conf's [DEFAULT] reserved_host_memory_mb on the compute nodes) and the new plan applied as
    `pulumi up` would while two clients call the APIs and the VM runs: what rolled, ran and was replaced is
    what diff.json predicted, no call failed outside the rollout, and the VM lives on (only nova-compute
    restarts; libvirt's pod holds the VM under staging's topology)."""
    found = report["apply"]
    if report["stack"] != "staging":
        assert "not_run" in found, found
        return
    assert found["error"] == "", found["error"]
    assert found["change"]["after"] == found["change"]["before"] - 512
    check = found["predicted_vs_actual"]
    for what in ("pods_rolled", "jobs_run", "objects_replaced"):
        assert check[what]["missing"] == [] and check[what]["unexpected"] == [], (what, check[what])
    # The change reaches a pod at all: the compute nodes' nova-compute rolled, and libvirt did not.
    assert [r for r in check["pods_rolled"]["actual"] if r.startswith("DaemonSet/nova-compute")], check
    assert not [r for r in check["pods_rolled"]["actual"] if "libvirt" in r], check
    # In the engine's order: the DaemonSet's update began once the Secret it mounts was replaced.
    steps = {s["object"]: s for s in found["steps"]}
    assert steps["DaemonSet/nova-compute"]["start_s"] >= steps["Secret/compute-node-etc"]["end_s"], steps
    assert found["calls_before_apply"] > 0 and found["failed_before_apply"] == 0, found["by_client"]
    assert found["failed_outside_restarts"] == 0, found["failures"]
    assert found["vm_expected_to_survive"] is True and found["vm_survived"] is True, found["vm"]
    # The change itself, as Nova reports it to Placement: each compute node's MEMORY_MB reserved is the new value.
    effect = found["took_effect"]
    assert effect["hosts"] and effect["matches"], effect
    assert effect["expected_mb"] == found["change"]["after"], effect
    assert found["ok"]


def _upgrade_steps(found: dict[str, Any]) -> dict[str, dict[str, Any]]:
    steps = found["steps"]
    unfinished = [s["name"] for s in steps if s["start_s"] is None or s["end_s"] is None]
    assert not unfinished, unfinished  # every step of --against's view happened
    return {s["name"]: s for s in steps}


def test_a_release_upgrade_runs_its_checks_and_backup_before_any_change_and_its_steps_in_order(
    report: dict[str, Any],
) -> None:
    """tests/lab/cloud/upgrade_scenario.py (prod, deployed at 2025.2): the `pulumi up` of the stack's own plan with
    upgrade.from, step by step as --against's upgrade view lists them (README, "Upgrading to a new release")."""
    found = report["upgrade"]
    if report["stack"] != "prod":
        assert "not_run" in found, found
        return
    assert found["error"] == "", found["error"]
    assert (found["from"], found["to"]) == ("2025.2", "2026.1")
    steps = _upgrade_steps(found)
    listed = list(steps.values())
    # Every preflight check ran and passed before anything else changed, but the config objects they mount.
    preflight = [s for s in listed if s["phase"] == "preflight"]
    assert len(preflight) == 9 and {s["outcome"] for s in preflight} == {"Complete"}, preflight
    passed = max(s["end_s"] for s in preflight)
    assert all(s["start_s"] >= passed for s in listed if s["phase"] != "preflight")
    early = found["preflight"]["changed_before"]
    assert [c for c in early if not c["mounted_by_a_check"]] == [], early
    # The backup completed (its dump in the claim) before the first migration began.
    [backup] = [s for s in listed if s["phase"] == "backup"]
    assert backup["outcome"] == "Complete True, reason JobComplete", backup
    assert found["backup"]["name"] == backup["name"] and found["backup"]["dump"]["bytes"] > 0, found["backup"]
    migrations = [s for s in listed if s["phase"] in ("expand", "migrate", "contract", "online migrations")]
    assert backup["end_s"] <= min(s["start_s"] for s in migrations)
    # Service by service in the documented order, each after the one before has rolled.
    plan = plan_of("prod", upgrade={"from": "2025.2"})
    specs = {spec.name: spec for spec in plan.graph.specs}
    rolls = {name: [steps[w] for w in upgrade.control_plane(specs[name])] for name in CONTROL_PLANE_ORDER}
    for before, after in itertools.pairwise(CONTROL_PLANE_ORDER):
        assert steps[f"{after}-db-sync"]["start_s"] >= max(r["end_s"] for r in rolls[before]), (before, after)
    for name in CONTROL_PLANE_ORDER:
        sync = steps[f"{name}-db-sync"]
        migrate = steps.get(f"{name}-db-migrate-2026-1")
        first_roll = min(r["start_s"] for r in rolls[name])
        assert first_roll >= (migrate or sync)["end_s"], name  # expand (and migrate) before the service rolls
        if migrate:
            assert migrate["start_s"] >= sync["end_s"], name
        contract = steps.get(f"{name}-db-contract-2026-1")
        if contract:  # once every pod of the service runs the new release
            assert contract["start_s"] >= max(r["end_s"] for r in rolls[name]), name
    assert steps["nova-api"]["start_s"] >= max(steps[n]["end_s"] for n in ("nova-conductor", "nova-scheduler"))
    # The compute nodes last; Nova's online migrations after the compute nodes' pods.
    computes = [s for s in listed if s["phase"] == "compute nodes"]
    last_control = max(r["end_s"] for name in CONTROL_PLANE_ORDER for r in rolls[name])
    assert computes and min(s["start_s"] for s in computes) >= last_control
    node_pods = compute_daemonsets(plan.settings)
    assert steps["nova-online-migrations-2026-1"]["start_s"] >= max(steps[n]["end_s"] for n in node_pods)
    assert {s["outcome"] for s in listed if s["kind"] == "Job"} == {"Complete"}, listed


def test_a_release_upgrade_does_what_against_predicted_with_the_vms_running_and_calls_failing_only_in_rollouts(
    report: dict[str, Any],
) -> None:
    """The same upgrade: what --against predicted for it and for the `pulumi up` that removes upgrade.from is
    what happened; vm1 and vm2 ran on through both (the same QEMU, the console counter never going back);
    the clients' failed calls fell within rollouts; and its rollback, the dump restored into a scratch
    MariaDB, holds 2025.2's schemas."""
    found = report["upgrade"]
    if report["stack"] != "prod":
        return
    check = found["predicted_vs_actual"]
    for part in ("upgrade", "after_upgrade"):
        for what in ("pods_rolled", "jobs_run", "objects_replaced"):
            assert check[part][what]["missing"] == [] and check[part][what]["unexpected"] == [], (part, what)
    assert check["matches"]
    # The pulumi up that removes upgrade.from rolled what caches the old RPC versions, nova-compute among them.
    assert set(found["then_rolls"]) <= {r.split("/")[1] for r in check["after_upgrade"]["pods_rolled"]["actual"]}
    vms = found["vms"]
    assert len(vms) == 2 and {vm["host"] for vm in vms.values()} == {"node-c1", "node-c2"}, vms
    assert all(vm["counter_unbroken"] and vm["qemu_pid_before"] == vm["qemu_pid_after"] for vm in vms.values()), vms
    assert found["vm_survived"]
    assert found["calls_before_upgrade"] > 0 and found["failed_before_upgrade"] == 0, found["by_client"]
    assert found["failed_outside_restarts"] == 0, found["failures_outside_restarts"]
    assert set(found["api_outages"]) == {"laptop", "user-pod"}
    assert found["api_longest_outage_s"] == max(c["longest_outage_s"] for c in found["api_outages"].values())
    rollback = found["rollback"]
    assert rollback["restored"] and rollback["error"] == "", rollback
    assert all(rollback["restored_is_2025.2"].values()), rollback["restored_versions"]
    # Where 2026.1 changes a schema (keystone's and neutron's expand branches), the restored one is 2025.2's and the
    # live one 2026.1's; neutron's new constraint is in the live database and not in the restored one.
    assert {"keystone", "neutron"} <= set(rollback["heads_differ"]), rollback["heads"]
    for name in rollback["heads_differ"]:
        assert rollback["restored_versions"][name] == rollback["heads"]["2025.2"][name], name
        assert rollback["live_versions"][name] == rollback["heads"]["2026.1"][name], name
    assert rollback["schema_marker"]["restored"] == 0 and rollback["schema_marker"]["live"] == 1, rollback
    assert rollback["ok"]


def test_libvirt_takes_migrations_only_with_credentials(report: dict[str, Any]) -> None:
    listener = report["libvirt_listener"]
    if plan_of(report["stack"]).settings.tls.libvirt is None:
        assert listener["uri"].startswith("qemu+tcp://192.168.")  # the node's address, not the loopback
        assert listener["authenticated"], listener
        assert listener["anonymous_refused"], listener
        return
    # tls.libvirt (prod): TLS alone, a client certificate of libvirt's CA and then SASL.
    assert listener["uri"].startswith("qemu+tls://192.168."), listener
    assert listener["authenticated"], listener
    assert listener["anonymous_refused"] and listener["foreign_ca_refused"], listener
    assert listener["wrong_password_refused"] and listener["tcp_closed"], listener


def test_libvirts_hops_are_tls_on_the_wire_under_tls_libvirt(report: dict[str, Any]) -> None:
    """Migrations (libvirtd's 16514 and QEMU's streams) and the console proxy's VNC sessions, as the
    capture saw them while the users worked: TLS, the VNC ones after their VeNCrypt negotiation."""
    if plan_of(report["stack"]).settings.tls.libvirt is None:
        assert "libvirt_encrypted" not in report["tls"] or not report["tls"]["libvirt_encrypted"]
        return
    tls = report["tls"]
    wire = tls["wire"]
    assert tls["libvirt_encrypted"], {name: wire.get(name) for name in ("libvirtd", "vnc", "qemu-migration")}


def test_data_stores_take_clients_on_their_client_ports_only(report: dict[str, Any]) -> None:
    """components/infrastructure/isolation.py: MariaDB's and RabbitMQ's client ports are open to every source (their
    host-network clients reach them on every network plugin), memcached's to the cloud's pods only,
    RabbitMQ's management API to no client."""
    reached = report["network_policies"]
    settings = plan_of(report["stack"]).settings
    amqp, management = f"rabbitmq:{oslo.rabbitmq_port(settings)}", f"rabbitmq:{oslo.rabbitmq_management_port(settings)}"
    assert reached["from_openstack_pod"] == {
        "mariadb:3306": True, amqp: True, "memcached:11211": True, management: False,
    }, reached  # fmt: skip
    assert reached["from_other_pod"] == {
        "mariadb:3306": True, amqp: True, "memcached:11211": False, management: False,
    }, reached  # fmt: skip
    if "from_other_node_host" in reached:  # another node's host network: what nova-compute is
        assert reached["from_other_node_host"] == reached["from_other_pod"], reached
    # RabbitMQ's management API is for the rabbit-init Jobs alone (which succeeded, so they reach it).
    assert {job for job in report["jobs"]["succeeded_names"] if job.endswith("-rabbit-init")}, report["jobs"]


def test_the_controller_moves_vms_off_a_node_in_maintenance(report: dict[str, Any]) -> None:
    """nova-compute-maintenance in its own pod, against the lab's API server: a node annotated for
    maintenance is emptied by live migration, its OnDelete pods restarted, and put back in service."""
    found = report["maintenance"]
    if NODES[report["stack"]] < 4:
        assert "not_run" in found
        return
    assert report["user_errors"].get("maintenance") is None, report["user_errors"].get("maintenance")
    moved = found["live_migration"]
    assert moved["phase"] == "done", moved
    assert (moved["from"], moved["to"]) == ("node-c1", "node-c2"), moved
    assert moved["vm_survived"], moved  # ACTIVE on the other node, its console counter unbroken
    assert moved["pods_restarted"] and moved["pods_ready"], moved
    assert moved["service_status"] == "enabled", moved


def test_the_readmes_drain_procedure_works_step_by_step(report: dict[str, Any]) -> None:
    found = report["maintenance"]
    if NODES[report["stack"]] < 4:
        return
    hand = found["by_hand"]
    assert hand["disabled_reason"] == "cordoned", hand  # the controller carried the cordon into Nova
    assert hand["migrated"] and all(m["to"] == "node-c1" and m["counter_kept"] for m in hand["migrated"]), hand
    assert hand["drain_would_evict"] == [], hand  # every pod of a compute node is a DaemonSet's
    assert hand["service_status"] == "enabled", hand


def test_what_was_not_run_says_why(report: dict[str, Any]) -> None:
    assert all(item["why"] for item in report["not_run"])
    assert Path(REPO / "build" / "cloud" / report["stack"] / "report.json").exists()


def test_tempests_smoke_set_passes(report: dict[str, Any]) -> None:
    """Tempest's smoke-tagged API tests of every deployed service (tests/lab/cloud/tempest_run.py): no failure
    of the cloud; one of this machine's limits only where tests/lab/cloud/tempest_limits.py names it."""
    if report["stack"] not in TEMPEST:  # within make test's time, one stack's cloud runs it
        assert report["tempest"] == {"not_run": "not asked for (--tempest smoke|full)"}
        return
    assert "error" not in report["tempest"], report["tempest"]
    found = json.loads((REPO / "build" / "cloud" / report["stack"] / "tempest.json").read_text())
    assert found["selection"] == "smoke"
    assert found["passed"] > 40, found
    assert [f for f in found["failures"] if f["class"] == "cloud"] == []
