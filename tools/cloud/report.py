"""The cloud test's report: build/cloud/<stack>/report.json and a one-screen summary."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from tools.cloud.deploy import Cloud

NOT_REPRODUCED = (
    ("operators (mariadb-operator, RabbitMQ Cluster Operator)", "no Kubernetes API server can run here: their "
     "MariaDB and RabbitmqCluster are played by Debian's MariaDB 10.11 and RabbitMQ 3.10, one server each; "
     "mariadb-operator's Backup (mariadb-backup) takes no dump"),
    ("seccomp profiles (RuntimeDefault)", "the harness applies users, groups, capabilities, no_new_privs and "
     "namespaces, not seccomp filters"),
    ("cold migration and resize", "they need SSH between compute nodes as the nova user, which the program does "
     "not deploy (README)"),
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
    deploy_error: str = ""
    not_run: list[dict[str, str]] = field(default_factory=list)
    data: dict[str, Any] = field(default_factory=dict)

    def build(self, cloud: Cloud, cannot_run: dict[str, str]) -> dict[str, Any]:
        plan_workloads = [w for w in cloud.workloads.values() if not w.stand_in and w.kind != "Job"]
        stand_ins = [w for w in cloud.workloads.values() if w.stand_in]
        long_running = [p for w in plan_workloads for p in w.pods]
        # Every pod the plan asks of the lab's nodes: all replicas, a DaemonSet's pod per admitted node.
        wanted = sum(w.replicas for w in plan_workloads)
        probes = [record for pod in long_running for record in pod.probe_records]
        jobs = [w.job for w in [*cloud.workloads.values(), *cloud.cron_jobs] if w.job is not None]
        planned_jobs = [w for w in cloud.workloads.values() if w.kind == "Job"] + [
            w for w in cloud.cron_jobs if not w.why_not_scheduled
        ]
        server = self.user.get("server", {})
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
        not_run += [{"what": what, "why": why} for what, why in NOT_REPRODUCED]
        not_run += self.not_run
        volume = self.user.get("volume") or {"not_run": "the scenario did not reach the volume step"}
        if "not_run" in volume:
            not_run.append({"what": "a Cinder volume", "why": volume["not_run"]})
        self.data = {
            "stack": self.stack,
            "topology": self.topology,
            "pods": {"total": wanted, "started": len(long_running), "ready": sum(p.ready for p in long_running)},
            "stand_ins": {
                w.name: {"kind": w.kind, "pods": len(w.pods), "ready": sum(p.ready for p in w.pods)} for w in stand_ins
            },
            "nodes": {
                node.name: {
                    "ip": node.ip,
                    "labels": node.labels,
                    "pods": sorted(p.plan.name for w in cloud.workloads.values() for p in w.pods if p.node is node),
                }
                for node in cloud.cluster.nodes
            },
            "probes": {"total": len(probes), "passed": sum(r.passed for r in probes)},
            "jobs": {
                "total": len(planned_jobs),
                "succeeded": sum(j.phase == "Complete" for j in jobs),
                "succeeded_names": sorted({j.name for j in jobs if j.phase == "Complete"}),
            },
            "server": {
                "status": server.get("status"),
                "port_status": server.get("port_status"),
                "dhcp_lease": bool(server.get("dhcp_lease")),
                "metadata": bool(server.get("metadata")),
                "ip": server.get("ip"),
                "gateway_reachable": bool(server.get("gateway_reachable")),
                "host": server.get("host"),
            },
            "horizon_login": bool(self.user.get("horizon", {}).get("logged_in")),
            "horizon": self.user.get("horizon", {}),
            "volume_type": self.user.get("volume_type"),
            "volume": volume,
            "libvirt_restart": self.libvirt_restart or {"not_run": "no running server to test it with"},
            "libvirt_listener": self.libvirt_listener,
            "maintenance": self.user.get("maintenance") or {"not_run": "the scenario did not reach its step"},
            "network_policies": self.network_policies,
            "seconds": {k: round(v, 1) for k, v in self.seconds.items()},
            "not_run": not_run,
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
        }
        return self.data

    def summary(self) -> str:
        d = self.data
        server, restart, maintenance = d["server"], d["libvirt_restart"], d["maintenance"]
        lines = [
            f"cloud test {d['stack']} ({d['topology']})",
            "  nodes: " + "; ".join(f"{n} {len(v['pods'])} pods" for n, v in d["nodes"].items()),
            f"  pods ready {d['pods']['ready']}/{d['pods']['total']}, probes passed {d['probes']['passed']}/"
            f"{d['probes']['total']}, jobs succeeded {d['jobs']['succeeded']}/{d['jobs']['total']}",
            f"  server {server['status']}, port {server['port_status']}, ip {server['ip']}, DHCP lease "
            f"{server['dhcp_lease']}, metadata {server['metadata']}, gateway {server['gateway_reachable']}",
            f"  horizon login {d['horizon_login']}; volume {d['volume']}",
            f"  libvirt pod restart: {restart}",
            f"  libvirt for migrations: {d['libvirt_listener']}",
            f"  maintenance: {_maintenance_line(maintenance)}",
            f"  data stores reached: {d['network_policies']}",
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


def _maintenance_line(found: dict[str, Any]) -> str:
    if "not_run" in found:
        return f"not run ({found['not_run']})"
    line = ", ".join(
        f"{step} {found[step].get('status')}/{found[step].get('reason')} in {found[step].get('seconds')}s"
        for step in ("cordon", "uncordon")
        if step in found
    )
    requested = found.get("requested", {})
    attempt = found.get("migration_attempt", {})
    line += f"; operator's disable kept {found.get('operator_disable', {}).get('kept')}"
    line += f"; requested -> {requested.get('phase')} ({str(requested.get('progress'))[:120]})"
    line += f"; live migration attempt -> {attempt.get('decision')} ({attempt.get('last_live_migration')})"
    return line + (f"; errors in {', '.join(found['errors'])}" if found.get("errors") else "")
