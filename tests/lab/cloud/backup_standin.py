"""mariadb-operator's Backup controller, played: a Backup without a schedule becomes the Job the operator makes.

From mariadb-operator v26.6.0 (what components/infrastructure/mariadb_backup.py targets):
- internal/controller/backup_controller.go: a Backup without `schedule` gets one Job (with a schedule,
  a CronJob: not played here, README "The running cloud"); its status condition `Complete` follows
  that Job (pkg/condition/complete.go SetCompleteWithJob): False/JobRunning while it runs,
  True/JobComplete when it completed, True/JobFailed when it failed. The plan's
  `pulumi.com/waitFor` reads that condition (tests/lab/cloud/awaits.py).
- pkg/builder/batch_builder.go BuildBackupJob: the storage volume at /backup; an init container
  `mariadb` runs the dump (pkg/command/backup.go MariadbDump: the target file's name written to
  /backup/0-backup-target.txt, then `mariadb-dump --user=${MARIADB_OPERATOR_USER}
  --password=${MARIADB_OPERATOR_PASSWORD} --host=<the MariaDB's host> --port=<its port>
  --single-transaction --events --routines --all-databases`, under Galera with `--skip-add-locks`
  and, by default there, `--ignore-table=mysql.global_priv`); the container `mariadb-operator` runs
  `mariadb-operator backup` (cmd/backup/main.go), which compresses that file in place under its name
  (pkg/compression: gzip for `compression: gzip`, the file named `backup.<UTC time>.sql.gz`) and
  pushes it to the storage (a claim: it is already there). User root with the MariaDB's root
  password Secret (batch_container_builder.go jobEnv); the Backup's nodeSelector, podMetadata,
  backoffLimit (default 5) and restartPolicy (default OnFailure).

What differs, and why: the dump is Debian's mariadb-dump (MariaDB 10.11, as the stand-in server),
not the operator's image; the operator's own binary is a shell doing its two steps for a claim
(compress, leave the file); it deletes no older dumps (`maxRetention`: the one-time Backup sets
none, the operator's default is 30 days); the pod runs as root, as the stand-in server does (the
operator's runs as mysql, 999); a Backup to S3, or of a MariaDB with TLS (the operator's client
certificate), is refused by name rather than played half.
"""

from __future__ import annotations

from dataclasses import dataclass

from tests.lab.cloud.standins import Manifest, operator_pod

BACKUP_DIR = "/backup"  # batch_builder.go batchStorageMountPath
TARGET_FILE = f"{BACKUP_DIR}/0-backup-target.txt"  # batchBackupTargetFilePath
USER_ENV, PASSWORD_ENV = "MARIADB_OPERATOR_USER", "MARIADB_OPERATOR_PASSWORD"
DUMP_IMAGE = "debian/mariadb-server:10.11"  # tests/lab/cloud/images.py: mariadb-server
OPERATOR_IMAGE = "debian/mariadb-operator-backup:26.6.0"  # tests/lab/cloud/images.py: mariadb-operator-backup
EXTENSIONS = {"gzip": ".gz", "bzip2": ".bz2", "none": ""}
DEFAULT_BACKOFF_LIMIT = 5  # api/v1alpha1/backup_types.go SetDefaults


class BackupNotPlayedError(ValueError):
    """A Backup the stand-in does not play (its message says what and why)."""


@dataclass(frozen=True)
class BackupJob:
    """The Job the operator makes for a one-time Backup: its pod template and Job spec."""

    name: str
    template: Manifest
    job_spec: Manifest
    storage_claim: str


def one_time(resource: Manifest) -> bool:
    return resource.get("kind", "Backup") == "Backup" and not (resource.get("spec") or {}).get("schedule")


def _host(mariadb: Manifest, domain: str) -> str:
    """mariadb_types.go GetHost: the primary Service under HA (Galera), else the MariaDB's own."""
    name, namespace = mariadb["metadata"]["name"], mariadb["metadata"]["namespace"]
    ha = bool((mariadb["spec"].get("galera") or {}).get("enabled"))
    return f"{name}{'-primary' if ha else ''}.{namespace}.svc.{domain}"


def _dump_script(spec: Manifest, mariadb: Manifest, domain: str) -> str:
    galera = bool((mariadb["spec"].get("galera") or {}).get("enabled"))
    compression = spec.get("compression", "none")
    if compression not in EXTENSIONS:
        raise BackupNotPlayedError(f"compression {compression!r}: the operator takes none, gzip or bzip2")
    args = ["--single-transaction", "--events", "--routines", "--all-databases"]
    if galera:
        args.append("--skip-add-locks")  # LOCK TABLES is not compatible with Galera
    if spec.get("ignoreGlobalPriv", galera):
        args.append("--ignore-table=mysql.global_priv")
    port = int(mariadb["spec"].get("port", 3306))
    connection = f"--user=${{{USER_ENV}}} --password=${{{PASSWORD_ENV}}} --host={_host(mariadb, domain)} --port={port}"
    return "\n".join([
        "set -euo pipefail",
        "echo 💾 Exporting env",
        f"export BACKUP_FILE={BACKUP_DIR}/backup.$(date -u +'%Y-%m-%dT%H:%M:%SZ').sql{EXTENSIONS[compression]}",
        f"echo 💾 Writing target file: {TARGET_FILE}",
        f'printf "${{BACKUP_FILE}}" > {TARGET_FILE}',
        f"echo 💾 Taking backup: $(cat '{TARGET_FILE}')",
        f"mariadb-dump {connection} {' '.join(args)} > $(cat '{TARGET_FILE}')",
    ])  # fmt: skip


def _operator_script(spec: Manifest) -> str:
    """`mariadb-operator backup` for a claim: compress the target file in place, under its name."""
    compress = {"gzip": "gzip -c", "bzip2": "bzip2 -c"}.get(spec.get("compression", "none"))
    lines = ["set -euo pipefail", f'file="$(cat {TARGET_FILE})"', 'echo "obtained target backup: $file"']
    if compress:
        lines += [f'{compress} "$file" > "$file.compressed"', 'mv "$file.compressed" "$file"']
    return "\n".join([*lines, 'ls -l "$file"'])


def backup_job(resource: Manifest, mariadb: Manifest, domain: str = "cluster.local") -> BackupJob:
    """The Job of a one-time Backup of `mariadb` (its MariaDB resource, as the plan declares it); `domain` is
    the cluster's, which the operator's Service names end in."""
    name, spec = resource["metadata"]["name"], resource["spec"]
    storage = spec.get("storage") or {}
    claim = ((storage.get("volume") or {}).get("persistentVolumeClaim") or {}).get("claimName")
    if claim is None:
        raise BackupNotPlayedError(f"Backup {name}: storage {sorted(storage)}; the stand-in plays a claim's only")
    if (mariadb["spec"].get("tls") or {}).get("enabled"):
        raise BackupNotPlayedError(f"Backup {name}: its MariaDB speaks TLS; the stand-in has no client certificate "
                                   "of the operator's to dump it with")  # fmt: skip
    password = mariadb["spec"]["rootPasswordSecretKeyRef"]
    env = [
        {"name": USER_ENV, "value": "root"},
        {"name": PASSWORD_ENV, "valueFrom": {"secretKeyRef": {"name": password["name"], "key": password["key"]}}},
    ]
    mounts = [{"name": "backup", "mountPath": BACKUP_DIR}]
    resources = spec.get("resources") or {}
    dump = {"name": "mariadb", "image": DUMP_IMAGE, "command": ["bash", "-c", _dump_script(spec, mariadb, domain)],
            "env": env, "volumeMounts": mounts, "resources": resources}  # fmt: skip
    operator = {"name": "mariadb-operator", "image": OPERATOR_IMAGE, "command": ["bash", "-c", _operator_script(spec)],
                "volumeMounts": mounts, "resources": resources}  # fmt: skip
    volumes = [{"name": "backup", "persistentVolumeClaim": {"claimName": claim}}]
    pod = operator_pod([operator], volumes, spec, initContainers=[dump],
                       restartPolicy=spec.get("restartPolicy", "OnFailure"))  # fmt: skip
    labels = dict((spec.get("podMetadata") or {}).get("labels") or {})
    job_spec = {"backoffLimit": int(spec.get("backoffLimit") or DEFAULT_BACKOFF_LIMIT)}
    return BackupJob(name, {"metadata": {"labels": labels}, "spec": pod}, job_spec, claim)


def status(job_phase: str | None) -> Manifest:
    """The Backup's status as the operator sets it from its Job (pkg/condition/complete.go SetCompleteWithJob)."""
    reason, state, message = {
        "Complete": ("JobComplete", "True", "Success"),
        "Failed": ("JobFailed", "True", "Failed"),
    }.get(job_phase or "", ("JobRunning", "False", "Running"))
    return {"conditions": [{"type": "Complete", "status": state, "reason": reason, "message": message}]}
