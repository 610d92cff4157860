"""Rotate a Keystone key repository kept in a Kubernetes Secret.

    python3 keystone_key_rotate.py fernet_rotate keystone-fernet-keys
    python3 keystone_key_rotate.py credential_rotate keystone-credential-keys

What openstack-helm's keystone chart does from its keystone-fernet-rotate and
keystone-credential-rotate CronJobs (templates/bin/_fernet-manage.py.tpl): read the Secret
through the Kubernetes API with the pod's ServiceAccount token, write its keys into the key
repository keystone.conf names (here an emptyDir), run `keystone-manage fernet_rotate` or
`credential_rotate`, and replace the Secret's keys with the repository's. keystone-api pods
mount the Secret as a directory, which the kubelet updates in place: they read the new keys
without a restart (keystone loads the repository whenever it creates or validates a token).
The staged key 0 that every pod already had becomes the new primary, so tokens and
credentials made with it are readable by pods that have not seen the new Secret yet.

Where this differs from openstack-helm, and why:
- Python's standard library speaks to the API (the scripts' client, kube_api.py), as the Kolla
  image has no kubectl: nothing beyond what keystone-manage itself needs.
- The update sends back the resourceVersion it read, so a concurrent change of the Secret
  fails this run (409 Conflict) instead of being overwritten.
- A rotated repository is written back only if it passes keystone-fernet-setup's check
  (key_repository_check.py): every key loads, key 0 and a primary are there.
- A run less than MIN_SECONDS_BETWEEN_ROTATIONS after the last rotation (the Secret's
  annotation ROTATED_AT) does not rotate: a retried or hand-started Job must not rotate a
  second time before every keystone-api pod has the first rotation's keys.
- Credentials are migrated to the primary key before rotating, too: `credential_rotate`
  refuses while any credential is encrypted with another key (keystone/cmd/cli.py,
  CredentialRotate.validate_primary_key), which a run that stopped between its rotation and
  its migration, or a keystone-api pod that wrote a credential with the keys it had before
  the last rotation reached it, leaves behind. After the rotation the migration runs at once
  (openstack-helm first waits KEYSTONE_CREDENTIAL_MIGRATE_WAIT): the new primary is every
  pod's staged key, so they all decrypt what it encrypts.
"""

from __future__ import annotations

import base64
import datetime
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

from key_repository_check import BadRepositoryError, check
from kube_api import KubeApi, KubeError

ROTATED_AT = "openstack.org/keys-rotated-at"
COMMANDS = ("fernet_rotate", "credential_rotate")


def secret(api: KubeApi, name: str, method: str = "GET", body: dict[str, Any] | None = None) -> dict[str, Any]:
    """GET, or PUT back, the Secret `name` of the pod's namespace; a refusal ends the run."""
    try:
        return dict(api.call(method, api.secret_path(name), body=body))
    except KubeError as error:
        # The API's Status message (no Secret data): Forbidden, NotFound, Conflict...
        sys.exit(f"{method} Secret {api.namespace}/{name}: {error}")


def keystone_manage(command: str) -> None:
    done = subprocess.run(["keystone-manage", "--config-file", os.environ["KEYSTONE_CONFIG"], command])
    if done.returncode != 0:
        sys.exit(f"keystone-manage {command} failed ({done.returncode}); the Secret is unchanged")


def write_repository(repository: Path, data: dict[str, str]) -> None:
    shutil.rmtree(repository, ignore_errors=True)
    repository.mkdir(mode=0o700)  # keystone-manage warns about a repository others may read
    for name, value in data.items():
        path = repository / name
        path.write_bytes(base64.b64decode(value))
        path.chmod(0o600)


def read_repository(repository: Path) -> dict[str, str]:
    return {p.name: base64.b64encode(p.read_bytes()).decode() for p in repository.iterdir() if p.name.isdigit()}


def rotated_recently(secret: dict[str, Any]) -> str | None:
    """When the Secret's keys were last rotated, if that is too recent to rotate again."""
    stamp = (secret["metadata"].get("annotations") or {}).get(ROTATED_AT)
    if not stamp:
        return None
    age = datetime.datetime.now(datetime.UTC) - datetime.datetime.fromisoformat(stamp)
    return stamp if age.total_seconds() < int(os.environ["MIN_SECONDS_BETWEEN_ROTATIONS"]) else None


def main() -> None:
    if len(sys.argv) != 3 or sys.argv[1] not in COMMANDS:
        sys.exit(f"usage: {sys.argv[0]} {{{','.join(COMMANDS)}}} <secret name>")
    command, name = sys.argv[1], sys.argv[2]
    migrate = command == "credential_rotate"  # credentials are re-encrypted with the primary key
    api = KubeApi.in_cluster(Path(os.environ["SERVICE_ACCOUNT_DIR"]))
    repository = Path(os.environ["KEY_REPOSITORY"])
    current = secret(api, name)
    write_repository(repository, current.get("data") or {})
    if migrate:
        keystone_manage("credential_migrate")
    last = rotated_recently(current)
    if last:
        print(f"Secret {name}: last rotated at {last}, less than {os.environ['MIN_SECONDS_BETWEEN_ROTATIONS']}s ago")
        return
    before = sorted(read_repository(repository), key=int)
    keystone_manage(command)
    try:
        print(check(repository))
    except BadRepositoryError as error:
        sys.exit(f"the rotated repository is broken, the Secret is unchanged: {error}")
    keys = read_repository(repository)
    metadata = {k: v for k, v in current["metadata"].items() if k != "managedFields"}
    metadata["annotations"] = {
        **(metadata.get("annotations") or {}),
        ROTATED_AT: datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
    }
    # resourceVersion stays in metadata: the API refuses the update if the Secret changed since.
    secret(api, name, "PUT", {**current, "metadata": metadata, "data": keys})
    print(f"Secret {name}: keys {before} rotated to {sorted(keys, key=int)}")
    if migrate:
        keystone_manage("credential_migrate")


if __name__ == "__main__":
    main()
