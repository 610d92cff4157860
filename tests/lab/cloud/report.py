"""The cloud test's report: build/cloud/<stack>/report.json and a one-screen summary."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from tests.lab.cloud.critical_path import critical_path
from tests.lab.cloud.deploy import Cloud

NOT_REPRODUCED = (
    ("operators (mariadb-operator, RabbitMQ Cluster Operator)", "stand-ins play their MariaDB and RabbitmqCluster "
     "(Debian's MariaDB 10.11 and RabbitMQ 3.10, one server each, behind the operators' Services; counted apart as "
     "stand_ins); mariadb-operator's scheduled Backup (mariadb-backup) takes no dump; a one-time Backup (an upgrade's) "
     "is played as its Backup controller plays it (tests/lab/cloud/backup_standin.py)"),
    ("the Kubernetes API server", "a stand-in serves the nodes, pods, Secrets and Events the plan's pods and the "
     "scenario use, with the plan's RBAC (tests/lab/cloud/apiserver.py)"),
    ("seccomp profiles (RuntimeDefault)", "the harness applies users, groups, capabilities, no_new_privs and "
     "namespaces, not seccomp filters"),
    ("cold migration and resize", "they need SSH between compute nodes as the nova user, which the program does "
     "not deploy (README)"),
)  # fmt: skip
# What the lab changes of the stack's settings for this machine (tests/lab/cloud/run.py machine_overrides).
MACHINE_OVERRIDES = (
    ("Open vSwitch's kernel datapath", "no openvswitch kernel module here: neutron.datapathType netdev (userspace), "
     "with the node address on an OVS bridge so that VXLAN leaves through it (tests/lab/cloud/cluster.py)"),
    ("reserved host CPUs", "a node group reserves at most one CPU less than this machine has, so guests get one"),
    ("QEMU's process and file limits", "qemuMaxProcesses and qemuMaxFiles at most the hard RLIMIT_NPROC and "
     "RLIMIT_NOFILE the lab runs with, which its containers inherit and cannot raise (no CAP_SYS_RESOURCE here); "
     "containerd's containers have no process limit and the kernel's nr_open for files"),
)  # fmt: skip


@dataclass
class Report:
    stack: str
    topology: str
    seconds: dict[str, float] = field(default_factory=dict)
    user: dict[str, Any] = field(default_factory=dict)
    libvirt_restart: dict[str, Any] | None = None
    libvirt_listener: dict[str, Any] = field(default_factory=dict)
    network_policies: dict[str, Any] = field(default_factory=dict)
    provider: dict[str, int] = field(default_factory=dict)
    api: dict[str, Any] = field(default_factory=dict)
    # Stand-ins that are not pods of the plan (tests/lab/cloud/ceph.py's cluster), by name: kind, pods, ready, ...
    external_stand_ins: dict[str, dict[str, Any]] = field(default_factory=dict)
    tempest: dict[str, Any] | None = None  # counts of tests/lab/cloud/tempest_run.py's tempest.json, when asked for
    tls: dict[str, Any] | None = None  # the proof from outside (tests/lab/cloud/public_access.py)
    gateway_proxy: dict[str, Any] | None = None  # the stand-in for the Gateway's proxy pod: pods, ready
    apply: dict[str, Any] | None = None  # a changed stack applied (tests/lab/cloud/apply_scenario.py)
    upgrade: dict[str, Any] | None = None  # a release upgrade of the running cloud (upgrade_scenario.py)
    deploy_error: str = ""
    not_run: list[dict[str, str]] = field(default_factory=list)
    data: dict[str, Any] = field(default_factory=dict)

    def build(self, cloud: Cloud, cannot_run: dict[str, str]) -> dict[str, Any]:
        plan_workloads = [w for w in cloud.workloads.values() if not w.stand_in and w.kind != "Job"]
        stand_ins = [w for w in cloud.workloads.values() if w.stand_in and not w.runs_job]  # servers, not Jobs
        long_running = [p for w in plan_workloads for p in w.active_pods]  # a Deployment's stopping pod is gone
        # Every pod the plan asks of the lab's nodes: a DaemonSet's pod per admitted node, every
        # StatefulSet replica, a Deployment's pods as the lab runs them (not_run says how many).
        wanted = sum(w.replicas for w in plan_workloads)
        probes = [record for pod in long_running for record in pod.probe_records]
        # The plan's Jobs and CronJobs' runs (a stand-in's Job, the one-time Backup's, is its operator's).
        jobs = [w.job for w in [*cloud.workloads.values(), *cloud.cron_jobs] if w.job is not None and not w.stand_in]
        planned_jobs = [w for w in cloud.workloads.values() if w.kind == "Job"] + [
            w for w in cloud.cron_jobs if not w.why_not_scheduled
        ]
        self.data = {
            "stack": self.stack,
            "topology": self.topology,
            "nodes": {
                node.name: {
                    "ip": node.ip,
                    "labels": node.labels,
                    "pods": sorted(
                        p.plan.name for w in cloud.workloads.values() for p in w.active_pods if p.node is node
                    ),
                }
                for node in cloud.cluster.nodes
            },
            "pods": {"total": wanted, "started": len(long_running), "ready": sum(p.ready for p in long_running)},
            "stand_ins": {
                **{
                    w.name: {"kind": w.kind, "pods": len(w.pods), "ready": sum(p.ready for p in w.pods)}
                    for w in stand_ins
                },
                **({"gateway-proxy": self.gateway_proxy} if self.gateway_proxy else {}),
                **self.external_stand_ins,
            },
            "probes": {"total": len(probes), "passed": sum(r.passed for r in probes)},
            "jobs": {
                "total": len(planned_jobs),
                "succeeded": sum(j.phase == "Complete" for j in jobs),
                "succeeded_names": sorted({j.name for j in jobs if j.phase == "Complete"}),
            },
            "deploy": self._deploy(cloud),
            "server": self._server(),
            "peer_server": self.user.get("peer_server", {}),
            # Through the gateway, from outside: its NetworkPolicy admits nothing else.
            "horizon_login": bool(self._horizon().get("logged_in")),
            "horizon": self._horizon(),
            "volume_type": self.user.get("volume_type"),
            "volume": self.user.get("volume") or {"not_run": "the scenario did not reach the volume step"},
            # The proof with a real Ceph (tests/lab/cloud/ceph_check.py), for a stack that keeps data there.
            "ceph": self.user.get("ceph") or {"not_run": "the scenario did not reach the Ceph step"},
            "libvirt_restart": self.libvirt_restart or {"not_run": "no running server to test it with"},
            "libvirt_listener": self.libvirt_listener,
            "apply": self.apply
            or {"not_run": "one stack's scenario (tests/lab/cloud/run.py APPLY_STACKS), once deployed"},
            "upgrade": self.upgrade or {"not_run": "one stack's scenario (upgrade_scenario.py UPGRADE_FROM)"},
            "maintenance": self._maintenance(),
            "network_policies": self.network_policies,
            "provider_network": self.provider,
            "api": self.api,
            "tempest": self.tempest or {"not_run": "not asked for (--tempest smoke|full)"},
            "tls": self.tls or {"public_endpoints_ok": False, "checks": {}, "not_run": "the cloud did not deploy"},
            "seconds": {k: round(v, 1) for k, v in self.seconds.items()},
            "not_run": self._not_run(cloud, cannot_run, plan_workloads),
            "deploy_error": self.deploy_error,
            "user_errors": self.user.get("errors", {}),
            "unready": [
                {"pod": p.plan.name, "phase": p.phase, "probes": {r.kind: r.last for r in p.probe_records}}
                for p in long_running
                if not p.ready
            ],
            "failed_probes": [f"{r.pod}/{r.container} {r.kind}: {r.last}" for r in probes if not r.passed],
            "failed_jobs": [f"{j.name}: {j.phase} {j.failure}" for j in jobs if j.phase != "Complete"],
            "restarts": {
                f"{p.plan.name}/{name}": count for p in long_running for name, count in p.restarts.items() if count
            },
            # A Job's pods beyond its first: each a failed attempt the Job controller retried.
            "job_retries": {j.name: len(j.pods) - 1 for j in jobs if len(j.pods) > 1},
        }
        return self.data

    def _horizon(self) -> dict[str, Any]:
        return dict(((self.tls or {}).get("checks") or {}).get("horizon_login") or {})

    def _server(self) -> dict[str, Any]:
        server, peer = self.user.get("server", {}), self.user.get("peer_server", {})
        provider = (server.get("pings") or {}).get("172.24.4.1")
        snat = self.provider.get("pings_from_provider_addresses", 0) > 0 and not self.provider.get(
            "pings_from_elsewhere", 0
        )
        return {
            "status": server.get("status"),
            "port_status": server.get("port_status"),
            "dhcp_lease": bool(server.get("dhcp_lease")),
            "metadata": bool(server.get("metadata")),
            "ip": server.get("ip"),
            "gateway_reachable": bool(server.get("gateway_reachable")),
            "host": server.get("host"),
            # The provider network's gateway answered, and what reached it came from a provider address.
            "provider_reachable": bool(provider) and snat,
            # The second VM, on the other compute node, reached the first across the tunnel.
            "peer_reachable": bool((peer.get("pings") or {}).get(server.get("ip") or "")),
        }

    def _maintenance(self) -> dict[str, Any]:
        found = self.user.get("maintenance") or {"not_run": "the scenario did not reach its step"}
        moved = found.get("live_migration")
        if moved:
            found["live_migration"] = {
                **moved,
                "from": moved.get("from"),
                "to": moved.get("to"),
                "seconds": moved.get("seconds"),
                "vm_survived": bool(moved.get("vm_survived")),
            }
        return found

    @staticmethod
    def _deploy(cloud: Cloud) -> dict[str, Any]:
        timings = {u: t for u, t in cloud.timings.items() if t.done is not None}
        if not timings:
            return {}
        makespan = max(t.done for t in timings.values() if t.done is not None)
        durations = {u: (t.done or 0) - t.created for u, t in timings.items()}
        names = {u: f"{t.kind} {t.name}" for u, t in timings.items()}
        path = critical_path(durations, (cloud.deployed or cloud.plan).dependencies, names)
        # How much of its timeout each wait used: a wait near its limit fails on a slower cluster.
        used = sorted(
            ((round(durations[u] / t.timeout, 2), names[u]) for u, t in timings.items() if t.timeout), reverse=True
        )
        return {
            "makespan_s": round(makespan, 1),
            "critical_path_s": path.seconds,
            "ratio": round(makespan / path.seconds, 2) if path.seconds else None,
            "critical_path": list(path.chain),
            "closest_to_timeout": [f"{name}: {share:.0%} of its timeout" for share, name in used[:5]],
        }

    def _not_run(self, cloud: Cloud, cannot_run: dict[str, str], plan_workloads: list[Any]) -> list[dict[str, str]]:
        not_run = [{"what": f"pod of {name}", "why": why} for name, why in cannot_run.items()]
        not_run += [
            {"what": f"DaemonSet {w.name}", "why": w.why_not_scheduled}
            for w in cloud.workloads.values()
            if w.kind == "DaemonSet" and w.why_not_scheduled and w.name not in cannot_run
        ]
        reduced = [w for w in plan_workloads if w.kind == "Deployment" and w.replicas < w.planned_replicas]
        if reduced:
            not_run.append({
                "what": "replicas beyond the first of " + ", ".join(sorted(w.name for w in reduced)),
                "why": "two CPUs do not start three of every API within their probes' patience; the lab runs one "
                "pod of each Deployment (StatefulSets and DaemonSets run all theirs)",
            })  # fmt: skip
        not_run += [{"what": what, "why": why} for what, why in (*NOT_REPRODUCED, *MACHINE_OVERRIDES)]
        not_run += self.not_run
        volume = self.user.get("volume") or {}
        if "not_run" in volume:
            not_run.append({"what": "a Cinder volume", "why": volume["not_run"]})
        return not_run

    def summary(self) -> str:
        d = self.data
        server, restart, maintenance, deploy = d["server"], d["libvirt_restart"], d["maintenance"], d["deploy"]
        lines = [
            f"cloud test {d['stack']} ({d['topology']})",
            "  nodes: " + "; ".join(f"{n} {len(v['pods'])} pods" for n, v in d["nodes"].items()),
            f"  pods ready {d['pods']['ready']}/{d['pods']['total']} (stand-ins: "
            + ", ".join(f"{n} {v['ready']}/{v['pods']}" for n, v in d["stand_ins"].items())
            + f"), probes passed {d['probes']['passed']}/{d['probes']['total']}, jobs succeeded "
            f"{d['jobs']['succeeded']}/{d['jobs']['total']}",
            f"  deploy: makespan {deploy.get('makespan_s')}s, critical path {deploy.get('critical_path_s')}s, "
            f"ratio {deploy.get('ratio')}",
            f"  server {server['status']} on {server['host']}, port {server['port_status']}, ip {server['ip']}, DHCP "
            f"lease {server['dhcp_lease']}, metadata {server['metadata']}, provider network through SNAT "
            f"{server['provider_reachable']}, peer VM across the tunnel {server['peer_reachable']}",
            f"  horizon login {d['horizon_login']}; volume {d['volume']}",
            f"  public endpoints from outside through the gateway: {_tls_line(d['tls'])}",
            f"  TLS inside the cluster: {_encrypted_line(d['tls'])}",
            f"  certificates renewed under load: {_rotation_line(d['tls'].get('rotation') or {})}",
            f"  internal CA rotated under load: {_ca_rotation_line(d['tls'].get('ca_rotation') or {})}",
            f"  ceph: {_ceph_line(d['ceph'])}",
            f"  a changed stack applied: {_apply_line(d['apply'])}",
            f"  release upgrade: {_upgrade_line(d['upgrade'])}",
            f"  libvirt pod restart: {restart}",
            f"  libvirt for migrations: {d['libvirt_listener']}",
            f"  maintenance: {_maintenance_line(maintenance)}",
            f"  data stores reached: {d['network_policies']}",
            f"  API: {d['api'].get('requests')} requests, denied {d['api'].get('denied')}",
            f"  tempest: {d['tempest']}",
            "  seconds: " + ", ".join(f"{k} {v}" for k, v in d["seconds"].items()),
        ]
        if d["deploy_error"]:
            lines.append(f"  deploy error: {d['deploy_error'][:400]}")
        for name, error in d["user_errors"].items():
            lines.append(f"  {name} failed: {error.splitlines()[0][:200]}")
        for item in d["unready"][:8]:
            lines.append(f"  not ready: {item['pod']} {item['probes']}")
        for item in d["failed_jobs"][:8]:
            lines.append(f"  job: {item[:200]}")
        lines.append(f"  not run ({len(d['not_run'])}): " + "; ".join(n["what"] for n in d["not_run"]))
        return "\n".join(lines)


def _apply_line(found: dict[str, Any]) -> str:
    if "not_run" in found or "predicted_vs_actual" not in found:
        return str(found.get("not_run") or found.get("error"))
    check, change = found["predicted_vs_actual"], found["change"]
    return (
        f"ok {found['ok']}: {change['setting']} {change['before']} -> {change['after']}; rolled "
        f"{check['pods_rolled']['actual']}, jobs {check['jobs_run']['actual']}, prediction matches {check['matches']}; "
        f"calls {found['calls']}, failed {found['failed_calls']} ({found['failed_outside_restarts']} outside the "
        f"rollouts); VM survived {found['vm_survived']} (expected {found['vm_expected_to_survive']}); "
        f"{found['seconds']}s {found['error']}"
    )


def _upgrade_line(found: dict[str, Any]) -> str:
    if "steps" not in found:
        return str(found.get("not_run") or found.get("error"))
    check = found["predicted_vs_actual"]
    done = sum(1 for s in found["steps"] if s["end_s"] is not None)
    return (
        f"{found['from']} -> {found['to']}: {done}/{len(found['steps'])} steps done, prediction matches "
        f"{check['matches']}; calls {found['calls']}, failed {found['api_failed_calls']} "
        f"({found['failed_outside_restarts']} outside the rollouts), longest outage {found['api_longest_outage_s']}s "
        f"({found['api_longest_outage'].get('client')}: {found['api_longest_outage'].get('call')}); VMs survived "
        f"{found['vm_survived']}; rollback {found['rollback'].get('ok')}; {found['seconds']}s {found['error']}"
    )


def _tls_line(tls: dict[str, Any]) -> str:
    checks = tls.get("checks") or {}
    failed = sorted(name for name, check in checks.items() if not check.get("ok"))
    why = tls.get("not_run") or tls.get("error") or ""
    return (
        f"ok {tls.get('public_endpoints_ok')}, {len(checks) - len(failed)}/{len(checks)} checks, failed {failed} {why}"
    )


def _encrypted_line(tls: dict[str, Any]) -> str:
    probe = tls.get("endpoints") or {}
    seen = {name: ok for name, ok in (tls.get("encrypted") or {}).items() if ok is not None}
    captured = f"captured: {sum(seen.values())}/{len(seen)} seen encrypted {tls.get('capture_error', '')}"
    plain = sorted(tls.get("not_encrypted") or {})
    if "not_run" in probe:
        return f"{captured}; endpoints not probed ({probe['not_run']}); plain text: {plain}"
    endpoints = probe.get("endpoints") or {}
    failed = sorted(name for name, e in endpoints.items() if not e.get("ok"))
    return (
        f"ok {tls.get('encrypted_ok')}, {captured}; {len(endpoints) - len(failed)}/{len(endpoints)} endpoints, "
        f"failed {failed} {probe.get('error', '')}; plain text: {plain}"
    )


def _rotation_line(found: dict[str, Any]) -> str:
    if "not_run" in found or "error" in found:
        return f"not run ({found.get('not_run') or found.get('error')})"
    renewed = found.get("renewed") or {}
    not_served = sorted(name for name, served in renewed.items() if served is False)
    return (
        f"ok {found.get('ok')}, {len(renewed)} renewed, not served {not_served}, calls {found.get('calls')}, "
        f"failed {found.get('failed_calls')} ({found.get('failed_outside_restarts')} outside the restarts "
        f"{sorted({r['pod'] for r in found.get('restarted') or []})}), slowest call "
        f"{ {who: c.get('slowest_seconds') for who, c in (found.get('by_client') or {}).items()} } s, "
        f"VM survived {found.get('vm_survived')}"
    )


def _ca_rotation_line(found: dict[str, Any]) -> str:
    if "not_run" in found or "error" in found:
        return f"not run ({found.get('not_run') or found.get('error')})"
    phases = {
        name: f"{p.get('seconds')}s, bundle {len(p.get('bundle') or [])} CA(s), rolled {len(p.get('rolled') or {})}, "
        f"restarted {[r['pod'] for r in p.get('restarted') or []]}, unverified {p.get('unverified')}"
        for name, p in (found.get("phases") or {}).items()
    }
    return (
        f"ok {found.get('ok')}, generation {found.get('from')} → {found.get('to')}, {phases}, failed calls "
        f"{found.get('failed_calls')} ({found.get('failed_outside_restarts')} outside restarts), VM survived "
        f"{found.get('vm_survived')}"
    )


def _ceph_line(found: dict[str, Any]) -> str:
    if "not_run" in found:
        return f"not run ({found['not_run']})"
    checks = {
        "image in RBD": (found.get("image") or {}).get("protected_snapshot"),
        "disk a clone": (found.get("clone") or {}).get("parent_is_image"),
        "boot from volume": (found.get("boot_from_volume") or {}).get("booted"),
        "guest read back": (found.get("attach") or {}).get("read_back_matches"),
        "snapshot": (found.get("snapshot") or {}).get("in_rbd"),
        "backup": (found.get("backup") or {}).get("in_rbd"),
        "live migration": (found.get("live_migration") or {}).get("counter_kept"),
    }
    return ", ".join(f"{k} {v}" for k, v in checks.items()) + f"; errors {sorted(found.get('errors') or {})}"


def _maintenance_line(found: dict[str, Any]) -> str:
    if "not_run" in found:
        return f"not run ({found['not_run']})"
    moved = found.get("live_migration") or {}
    hand = found.get("by_hand") or {}
    return (
        f"controller: {moved.get('phase')} in {moved.get('seconds')}s, VM {moved.get('from')} -> {moved.get('to')}, "
        f"survived {moved.get('vm_survived')}, pods restarted {moved.get('pods_restarted')}; by hand: "
        f"{[(m.get('to'), m.get('counter_kept')) for m in hand.get('migrated', [])]}, "
        f"service {hand.get('service_status')}"
    )
