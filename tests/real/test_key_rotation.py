"""keystone-fernet-rotate and keystone-credential-rotate, run for real.

Each rotation CronJob of the prod plan runs here as its pod would: its container's command
(components/scripts/keystone_key_rotate.py) with the plan's keystone.conf, scripts and
environment (tests.lab.realenv.jobs), as Kolla's keystone user (uid 42425, the pod's runAsUser),
with the 2026.1 `keystone-manage` of the OpenStack venv, a real MariaDB holding Keystone's
schema (made by the plan's own keystone-db-init and keystone-db-sync Jobs) and a memcached.

No Kubernetes API server can run here, so the Secrets live in a stand-in
(tests/lab/realenv/kubeapi.py): the Secret endpoint over HTTPS with the ServiceAccount's token
and CA, serving only what the plan's Role allows, with resourceVersion conflicts as the API
server has them. What the tests prove is keystone's side (keystone-manage rotates, prunes to
max_active_keys and migrates credentials as the script expects, and keys from before and after
a rotation read each other's tokens, loaded as keystone loads them) and the script's
(what it reads and writes back, how it fails); not the API server's own behaviour.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

import pytest

from components.mechanism import oslo
from components.mechanism.images import profile
from components.mechanism.inifile import parse_ini
from components.services.keystone import CREDENTIAL_SECRET, FERNET_SECRET
from tests.lab.realenv.jobs import BootstrapChain, Pod, adopt_root_password
from tests.lab.realenv.kubeapi import FakeSecretApi, ServiceAccount, new_token, serve
from tests.lab.realenv.mapping import LocalMapping
from tests.lab.realenv.openstack_venv import OpenStackVenv
from tests.lab.realenv.servers import free_port, run_mariadb, run_memcached
from tools.plan import Plan, build_plan
from tools.runtime import Registration

STACK = "prod"
KEYSTONE_UID = profile("keystone").uid
ROTATIONS = {"keystone-fernet-rotate": FERNET_SECRET, "keystone-credential-rotate": CREDENTIAL_SECRET}

# Runs in the OpenStack venv: keys from two repositories, loaded as keystone's token provider
# loads them (fernet_utils.load_keys, primary first, in a MultiFernet), read each other's tokens.
TOKENS_CROSS_READ = r"""
import sys
from cryptography.fernet import Fernet, MultiFernet
import keystone.conf
from keystone.common import fernet_utils

keystone.conf.configure()
keystone.conf.CONF(args=[], project="keystone", default_config_files=[])

def crypto(path):
    return MultiFernet([Fernet(k) for k in fernet_utils.FernetUtils(path, 99, "fernet_tokens").load_keys()])

before, after = crypto(sys.argv[1]), crypto(sys.argv[2])
assert before.decrypt(after.encrypt(b"issued after")) == b"issued after"
assert after.decrypt(before.encrypt(b"issued before")) == b"issued before"
"""

# Runs in the OpenStack venv with a keystone.conf: creates a credential, or shows every
# credential as keystone decrypts it, and whether the primary key of the repository encrypted it.
CREDENTIALS = r"""
import json, sys, uuid
import keystone.conf
from keystone.common import driver_hints, sql
from keystone.credential.providers import fernet as credential_fernet
from keystone.server import backends

conf = keystone.conf.CONF
keystone.conf.configure()
sql.initialize()
conf(args=["--config-file", sys.argv[1]], project="keystone")
api = backends.load_backends()["credential_api"]
if sys.argv[2] == "create":
    credential_id = uuid.uuid4().hex
    api.create_credential(credential_id, {"id": credential_id, "user_id": uuid.uuid4().hex, "type": "totp",
                                          "blob": sys.argv[3]})
    print(json.dumps(credential_id))
else:
    _, keys = credential_fernet.get_multi_fernet_keys()
    primary = credential_fernet.primary_key_hash(keys)
    rows = api.driver.list_credentials(driver_hints.Hints())
    print(json.dumps({row["id"]: [api.get_credential(row["id"])["blob"], row["key_hash"] == primary] for row in rows}))
"""


@dataclass
class Keystone:
    plan: Plan
    chain: BootstrapChain
    venv: OpenStackVenv
    work: Path  # readable by the keystone user, unlike pytest's temporary directories
    runs: int = 0

    def cron_job(self, name: str) -> Registration:
        return self.plan.by_name(name, "CronJob")

    def initial_keys(self, secret: str) -> dict[str, str]:
        return dict(self.plan.by_name(secret, "Secret").revealed["stringData"])

    def api(self, cron_job: str) -> FakeSecretApi:
        """The stand-in API with the plan's two key Secrets, serving what cron_job's Role allows."""
        rules = self.plan.by_name(cron_job, "Role").inputs["rules"]
        api = FakeSecretApi(self.plan.settings.namespace, new_token(), rules)
        for secret in (FERNET_SECRET, CREDENTIAL_SECRET):
            labels = self.plan.by_name(secret, "Secret").inputs["metadata"]["labels"]
            api.add(secret, self.initial_keys(secret), labels)
        return api

    def pod(self, cron_job: str) -> Pod:
        """A new pod of the CronJob (a new root, as each Job run starts from its image)."""
        self.runs += 1
        return self.chain.pod(self.cron_job(cron_job), f"run-{self.runs}")

    def run(
        self, pod: Pod, account: ServiceAccount, env: dict[str, str] | None = None
    ) -> subprocess.CompletedProcess[str]:
        # What the kubelet adds: the API's address, the token where the plan says it is
        # mounted, and the pod's fsGroup on its volumes.
        full = {**pod.env, **account.environment, "SERVICE_ACCOUNT_DIR": str(account.files), **(env or {})}
        return self.as_keystone(pod.command, full, pod.root, account.files)

    def repository(self, keys: dict[str, str], name: str) -> Path:
        """A key repository with these keys, as a keystone-api pod sees its Secret volume."""
        path = self.work / "repositories" / f"{name}-{self.runs}"
        path.mkdir(parents=True)
        path.chmod(0o700)
        for key, value in keys.items():
            (path / key).write_text(value)
        return path

    def as_keystone(self, command: list[str], env: dict[str, str], *owned: Path) -> subprocess.CompletedProcess[str]:
        """A command as the pod's user (uid 42425), on files it owns as the pod's fsGroup would."""
        for path in owned:
            subprocess.run(["chown", "-R", f"{KEYSTONE_UID}:{KEYSTONE_UID}", path], check=True)
        command = ["setpriv", f"--reuid={KEYSTONE_UID}", f"--regid={KEYSTONE_UID}", "--clear-groups", *command]
        return subprocess.run([*self.reach_python(), *command], env=env, capture_output=True, text=True, timeout=300)

    def reach_python(self) -> list[str]:
        """A prefix that lets the pod's user run the venv's Python, whatever its location.

        The venv's interpreter may be this machine's Python under /root (mode 0700), where
        the image's user cannot reach it (in the image it is /usr/bin/python3): in a mount
        namespace of its own the command sees /root as a traversable directory holding only
        that Python, as tests/lab/cloud's image layer shows it.
        """
        real = Path(os.path.realpath(self.venv.python))
        if not real.is_relative_to("/root"):
            return []
        top = Path("/root") / real.relative_to("/root").parts[0]
        stash = tempfile.mkdtemp(dir=self.work)
        script = (
            f"set -e; mount --bind {top} {stash}; mount -t tmpfs -o mode=0755 tmpfs /root; "
            f'mkdir -p {top}; mount --bind {stash} {top}; exec "$@"'
        )
        return ["unshare", "--mount", "--propagation", "private", "sh", "-c", script, "sh"]

    def python(self, code: str, *args: str | Path, env: dict[str, str] | None = None) -> str:
        done = subprocess.run(
            [self.venv.python, "-c", code, *map(str, args)],
            env=self.venv.env() | (env or {}),
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert done.returncode == 0, done.stderr[-3000:]
        return done.stdout


@pytest.fixture(scope="module")
def keystone(openstack_venv: OpenStackVenv, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Keystone]:
    plan = build_plan(STACK)
    work = Path(tempfile.mkdtemp(prefix="key-rotation-"))
    work.chmod(0o755)
    with ExitStack() as stack:
        stack.callback(shutil.rmtree, work, True)
        mariadb = stack.enter_context(run_mariadb(tmp_path_factory.mktemp("mariadb")))
        memcached = stack.enter_context(run_memcached(tmp_path_factory.mktemp("memcached")))
        root_password = plan.by_name("mariadb-root", "Secret").revealed["stringData"]["password"]
        mariadb = adopt_root_password(openstack_venv, mariadb, root_password)
        ports = {
            ("mariadb", oslo.MARIADB_PORT): mariadb.port,
            ("memcached", oslo.MEMCACHED_PORT): memcached.port,
            # Not used by Keystone's Jobs and CronJobs: nothing listens there.
            ("rabbitmq", oslo.RABBITMQ_PORT): free_port(),
            ("rabbitmq", oslo.RABBITMQ_MANAGEMENT_PORT): free_port(),
            ("keystone-api", oslo.KEYSTONE_PORT): free_port(),
        }
        mapping = LocalMapping.for_stack(plan.settings, ports, work / "pods", ("unused", "unused"))
        chain = BootstrapChain(plan, openstack_venv, mapping)
        # Keystone's schema, by the plan's own Jobs; the credential CronJob reads and rewrites it.
        for job in ("keystone-db-init", "keystone-credential-setup", "keystone-db-sync"):
            run = chain.run_job(plan.by_name(job, "Job"), 1)
            assert run.ok, run.describe()
        yield Keystone(plan, chain, openstack_venv, work)


def _max_active_keys(keystone: Keystone) -> int:
    conf = parse_ini(keystone.plan.by_name("keystone-etc", "Secret").revealed["stringData"]["keystone.conf"])
    return int(conf["fernet_tokens"]["max_active_keys"])


def _account(keystone: Keystone, api: FakeSecretApi, stack: ExitStack) -> ServiceAccount:
    directory = Path(tempfile.mkdtemp(prefix="api-", dir=keystone.work))
    directory.chmod(0o755)
    return stack.enter_context(serve(api, directory))


def test_fernet_rotation_promotes_the_staged_key_and_writes_the_secret_back(keystone: Keystone) -> None:
    api = keystone.api("keystone-fernet-rotate")
    before = api.data(FERNET_SECRET)
    with ExitStack() as stack:
        account = _account(keystone, api, stack)
        done = keystone.run(keystone.pod("keystone-fernet-rotate"), account)
    assert done.returncode == 0, done.stdout + done.stderr
    after = api.data(FERNET_SECRET)
    # keystone-manage fernet_rotate: the staged key 0 became the primary 2, key 1 stayed, a new 0.
    assert sorted(after) == ["0", "1", "2"]
    assert after["2"] == before["0"] and after["1"] == before["1"]
    assert after["0"] not in before.values()
    # Read, then replaced with the resourceVersion it read; nothing else was asked.
    assert [(c.method, c.name, c.status) for c in api.calls] == [
        ("GET", FERNET_SECRET, 200),
        ("PUT", FERNET_SECRET, 200),
    ]
    assert api.calls[1].resource_version == "1"
    metadata = api.secrets[FERNET_SECRET]["metadata"]
    assert metadata["labels"]["app.kubernetes.io/managed-by"] == "pulumi"  # kept
    assert "openstack.org/keys-rotated-at" in metadata["annotations"]
    assert api.data(CREDENTIAL_SECRET) == keystone.initial_keys(CREDENTIAL_SECRET)
    # Pods that still have the old keys and pods that have the new ones read each other's tokens.
    old, new = keystone.repository(before, "before"), keystone.repository(after, "after")
    keystone.python(TOKENS_CROSS_READ, old, new)
    # And the Secret passes keystone-fernet-setup's check.
    check = keystone.chain.pod(keystone.plan.by_name("keystone-fernet-setup", "Job"), f"check-{keystone.runs}")
    done = subprocess.run(check.command, env={**check.env, "KEY_REPOSITORY": str(new)}, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def test_a_second_run_soon_after_does_not_rotate_again(keystone: Keystone) -> None:
    api = keystone.api("keystone-fernet-rotate")
    with ExitStack() as stack:
        account = _account(keystone, api, stack)
        first = keystone.run(keystone.pod("keystone-fernet-rotate"), account)
        rotated = api.data(FERNET_SECRET)
        second = keystone.run(keystone.pod("keystone-fernet-rotate"), account)
    assert first.returncode == 0 and second.returncode == 0, second.stderr
    assert "last rotated at" in second.stdout
    assert api.data(FERNET_SECRET) == rotated
    assert [c.method for c in api.calls] == ["GET", "PUT", "GET"]


def test_rotations_keep_max_active_keys_of_the_plan(keystone: Keystone) -> None:
    limit = _max_active_keys(keystone)
    assert limit == 7  # every 12 hours, for a 1-hour token and a 48-hour allow_expired_window
    api = keystone.api("keystone-fernet-rotate")
    seen = []
    with ExitStack() as stack:
        account = _account(keystone, api, stack)
        for _ in range(limit + 2):
            done = keystone.run(keystone.pod("keystone-fernet-rotate"), account, {"MIN_SECONDS_BETWEEN_ROTATIONS": "0"})
            assert done.returncode == 0, done.stderr
            seen.append(len(api.data(FERNET_SECRET)))
    assert seen == [3, 4, 5, 6, 7, 7, 7, 7, 7]


def test_a_concurrent_change_fails_the_run_and_is_kept(keystone: Keystone) -> None:
    api = keystone.api("keystone-fernet-rotate")
    api.concurrent_writer = True  # someone updates the Secret between the run's read and its write
    with ExitStack() as stack:
        account = _account(keystone, api, stack)
        done = keystone.run(keystone.pod("keystone-fernet-rotate"), account)
    assert done.returncode != 0
    assert "409" in done.stderr and "Conflict" in done.stderr
    assert api.data(FERNET_SECRET) == keystone.initial_keys(FERNET_SECRET)


def test_the_fernet_job_may_not_touch_the_credential_keys(keystone: Keystone) -> None:
    api = keystone.api("keystone-fernet-rotate")  # serves by the fernet CronJob's Role
    pod = keystone.pod("keystone-fernet-rotate")
    pod.command[-1] = CREDENTIAL_SECRET
    with ExitStack() as stack:
        done = keystone.run(pod, _account(keystone, api, stack))
    assert done.returncode != 0 and "403" in done.stderr
    assert [(c.method, c.status) for c in api.calls] == [("GET", 403)]


def test_credential_rotation_migrates_before_and_after(keystone: Keystone) -> None:
    """credential_rotate refuses while a credential is not under the primary key; the job migrates
    first, so credentials written with older keys (a stale pod, an interrupted run) do not stop it."""
    name = "keystone-credential-rotate"
    conf = keystone.pod(name).root / "etc/keystone/keystone.conf"  # the plan's, mapped to the servers here
    api = keystone.api(name)
    initial = keystone.repository(api.data(CREDENTIAL_SECRET), "credential-initial")

    # Keystone's backends load the token provider, which needs its keys too (as in the pods).
    tokens = str(keystone.repository(keystone.initial_keys(FERNET_SECRET), "fernet"))

    def api_pod(keys: Path) -> dict[str, str]:
        return {
            "OS_CREDENTIAL__KEY_REPOSITORY": str(keys),
            "OS_FERNET_TOKENS__KEY_REPOSITORY": tokens,
            "OS_FERNET_RECEIPTS__KEY_REPOSITORY": tokens,
        }

    def as_api_sees(keys: Path) -> dict[str, list]:
        return json.loads(keystone.python(CREDENTIALS, conf, "show", env=api_pod(keys)))

    def create(keys: Path, blob: str) -> str:
        return json.loads(keystone.python(CREDENTIALS, conf, "create", blob, env=api_pod(keys)))

    first = create(initial, "first")
    with ExitStack() as stack:
        account = _account(keystone, api, stack)
        done = keystone.run(keystone.pod(name), account)
        assert done.returncode == 0, done.stdout + done.stderr
        rotated = keystone.repository(api.data(CREDENTIAL_SECRET), "credential-rotated")
        assert sorted(api.data(CREDENTIAL_SECRET)) == ["0", "1", "2"]
        assert as_api_sees(rotated) == {first: ["first", True]}  # migrated to the new primary
        # A keystone-api pod that has not seen the rotation yet writes with the old primary ...
        stale = create(initial, "stale")
        assert as_api_sees(rotated)[stale] == ["stale", False]
        # ... which keystone-manage credential_rotate alone refuses to rotate over,
        copy = shutil.copytree(rotated, rotated.with_name("copy"))
        refused = keystone.as_keystone(
            ["keystone-manage", "--config-file", str(conf), "credential_rotate"],
            keystone.venv.env() | {"HOME": str(copy), "OS_CREDENTIAL__KEY_REPOSITORY": str(copy)},
            conf.parents[2],
            copy,
        )
        assert refused.returncode != 0 and "not all credentials are encrypted with the primary key" in refused.stderr
        # ... but the job migrates first, then rotates.
        done = keystone.run(keystone.pod(name), account, {"MIN_SECONDS_BETWEEN_ROTATIONS": "0"})
        assert done.returncode == 0, done.stdout + done.stderr
    final = keystone.repository(api.data(CREDENTIAL_SECRET), "credential-final")
    assert len(api.data(CREDENTIAL_SECRET)) == 3  # credential_fernet.MAX_ACTIVE_KEYS
    assert as_api_sees(final) == {first: ["first", True], stale: ["stale", True]}
    assert api.data(FERNET_SECRET) == keystone.initial_keys(FERNET_SECRET)
    assert {c.name for c in api.calls} == {CREDENTIAL_SECRET}
