"""Keystone's keys rotate in their Secrets, and nothing the program does puts the old ones back.

The CronJobs keystone-fernet-rotate and keystone-credential-rotate (openstack-helm's names)
rewrite the Secrets keystone-fernet-keys and keystone-credential-keys; tests/real/test_key_rotation.py
runs them against the real keystone-manage. Here, the plan: who may touch which Secret, that a
later `pulumi up` leaves the rotated keys alone, and that keystone-api reads them without a restart.
"""

from __future__ import annotations

import base64
import configparser
import hashlib

import pulumi
import pytest

from components.infrastructure import ca_rotation
from components.mechanism.inifile import parse_ini
from components.nodes import libvirt_tls, maintenance
from components.services.keystone import CREDENTIAL_DIR, CREDENTIAL_SECRET, FERNET_DIR, FERNET_SECRET
from tests.conftest import plan_of
from tests.helpers import bundle_job, containers, objects, pod_template
from tools.plan import Plan
from tools.runtime import FakeCloudMocks, RecordingMonitor, Registration, run_program, stack_config, stack_with

ROTATIONS = {"keystone-fernet-rotate": FERNET_SECRET, "keystone-credential-rotate": CREDENTIAL_SECRET}
REPOSITORIES = {FERNET_SECRET: ("fernet_tokens", FERNET_DIR), CREDENTIAL_SECRET: ("credential", CREDENTIAL_DIR)}
POD_KINDS = {"Deployment", "StatefulSet", "DaemonSet", "Job", "CronJob"}


def rotation_objects(plan: Plan, kind: str) -> dict[str, Registration]:
    """The stack's objects of `kind` but the other API clients': the maintenance controller's (tests/maintenance
    pins those), the libvirt certificate keeper's (tests/test_libvirt_tls.py) and the CA bundle Job's
    (tests/test_ca_rotation.py)."""
    others = (maintenance.NAME, libvirt_tls.NAME, ca_rotation.BUNDLE_JOB)
    return {n: r for n, r in objects(plan, kind).items() if not any(other in n for other in others)}


def _keystone_conf(plan: Plan) -> configparser.ConfigParser:
    return parse_ini(plan.by_name("keystone-etc", "Secret").revealed["stringData"]["keystone.conf"])


def _depends_on(plan: Plan, r: Registration) -> set[tuple[str | None, str | None]]:
    by_urn = {x.urn: x for x in plan.custom}
    return {(by_urn[u].kind, by_urn[u].k8s_name) for u in plan.dependencies[r.urn] if u in by_urn}


def test_each_rotation_is_a_cron_job_on_the_schedule_of_the_settings(stack_plan: Plan) -> None:
    rotation = stack_plan.settings.key_rotation
    schedules = {
        "keystone-fernet-rotate": rotation.fernet_schedule,
        "keystone-credential-rotate": rotation.credential_schedule,
    }
    cron_jobs = objects(stack_plan, "CronJob")
    for name, secret in ROTATIONS.items():
        spec = cron_jobs[name].inputs["spec"]
        assert spec["schedule"] == schedules[name]
        assert spec["concurrencyPolicy"] == "Forbid"  # never two rotations of one Secret at once
        assert spec["timeZone"] == "Etc/UTC"
        [container] = containers(cron_jobs[name])
        assert container["args"][-2:] == [f"{name.split('-')[1]}_rotate", secret]
        assert cron_jobs[name].inputs["metadata"]["labels"]["app.kubernetes.io/name"] == "keystone"


def test_only_the_rotation_pods_get_an_api_token(stack_plan: Plan) -> None:
    for r in stack_plan.custom:
        if r.kind not in POD_KINDS:
            continue
        spec = pod_template(r)["spec"]
        if r.kind == "CronJob" and r.k8s_name in ROTATIONS:
            assert spec["serviceAccountName"] == r.k8s_name
            assert spec["automountServiceAccountToken"] is True
        elif r.kind == "Deployment" and r.k8s_name == maintenance.NAME:
            assert spec["serviceAccountName"] == maintenance.NAME  # the other API clients of the cloud
        elif r.kind == "DaemonSet" and str(r.k8s_name).startswith(f"{libvirt_tls.NAME}-"):
            assert spec["serviceAccountName"] == libvirt_tls.NAME  # asks for its node's certificate
        elif r.kind == "Job" and r.k8s_name in bundle_job(stack_plan):
            assert spec["serviceAccountName"] == r.k8s_name  # writes the CA bundle (tests/test_ca_rotation.py)
        else:
            assert spec["automountServiceAccountToken"] is False, r.k8s_name
            assert "serviceAccountName" not in spec, r.k8s_name


def test_each_rotation_may_get_and_replace_its_own_secret_and_nothing_else(stack_plan: Plan) -> None:
    namespace = stack_plan.settings.namespace
    roles, bindings = rotation_objects(stack_plan, "Role"), rotation_objects(stack_plan, "RoleBinding")
    accounts = rotation_objects(stack_plan, "ServiceAccount")
    assert set(roles) == set(bindings) == set(accounts) == set(ROTATIONS)
    for name, secret in ROTATIONS.items():
        assert roles[name].inputs["rules"] == [
            {"apiGroups": [""], "resources": ["secrets"], "resourceNames": [secret], "verbs": ["get", "update"]}
        ]
        role_ref = {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name}
        assert bindings[name].inputs["roleRef"] == role_ref
        assert bindings[name].inputs["subjects"] == [{"kind": "ServiceAccount", "name": name, "namespace": namespace}]
        assert accounts[name].inputs["automountServiceAccountToken"] is False  # only pods that ask get a token
        assert {("ServiceAccount", name), ("Role", name), ("RoleBinding", name)} <= _depends_on(
            stack_plan, objects(stack_plan, "CronJob")[name]
        )
    granted = {n for role in roles.values() for rule in role.inputs["rules"] for n in rule["resourceNames"]}
    assert granted == {FERNET_SECRET, CREDENTIAL_SECRET}
    assert not rotation_objects(stack_plan, "ClusterRole") and not rotation_objects(stack_plan, "ClusterRoleBinding")


def test_rotations_start_once_their_keys_and_the_schema_are_there(stack_plan: Plan) -> None:
    cron_jobs = objects(stack_plan, "CronJob")
    assert ("Job", "keystone-fernet-setup") in _depends_on(stack_plan, cron_jobs["keystone-fernet-rotate"])
    # credential_rotate and credential_migrate read and rewrite the credential table.
    assert ("Job", "keystone-db-sync") in _depends_on(stack_plan, cron_jobs["keystone-credential-rotate"])


def test_a_rotation_writes_the_repository_keystone_conf_names(stack_plan: Plan) -> None:
    conf = _keystone_conf(stack_plan)
    for name, secret in ROTATIONS.items():
        group, directory = REPOSITORIES[secret]
        cron = objects(stack_plan, "CronJob")[name]
        [container] = containers(cron)
        env = {e["name"]: e.get("value") for e in container["env"]}
        assert env["KEY_REPOSITORY"] == conf[group]["key_repository"] == directory
        # An emptyDir the script fills from the Secret, with keystone.conf mounted in it.
        volumes = {v["name"]: v for v in pod_template(cron)["spec"]["volumes"]}
        mounts = {m["mountPath"]: m for m in container["volumeMounts"]}
        assert "emptyDir" in volumes[mounts["/etc/keystone"]["name"]]
        assert mounts["/etc/keystone"]["readOnly"] is False
        assert mounts["/etc/keystone/keystone.conf"]["subPath"] == "keystone.conf"
    # credential_migrate loads Keystone's backends, whose token provider needs the Fernet keys.
    [container] = containers(objects(stack_plan, "CronJob")["keystone-credential-rotate"])
    assert {m["mountPath"] for m in container["volumeMounts"]} >= {FERNET_DIR}


def test_a_later_pulumi_up_leaves_rotated_keys_alone(stack_plan: Plan) -> None:
    ignored = {name: r.ignore_changes for name, r in objects(stack_plan, "Secret").items() if r.ignore_changes}
    # The provider reads stringData as data (normalizeSecret), so both are ignored.
    assert ignored == {FERNET_SECRET: ["data", "stringData"], CREDENTIAL_SECRET: ["data", "stringData"]}


def test_the_key_secrets_are_left_alone_with_rotation_off_too() -> None:
    plan = plan_of("dev", keyRotation={"enabled": False})
    assert not set(ROTATIONS) & set(objects(plan, "CronJob"))
    assert not any(rotation_objects(plan, kind) for kind in ("Role", "ServiceAccount", "RoleBinding"))
    # Keys rotated while it was on (or by hand) must survive the next `pulumi up` as well.
    for secret in ROTATIONS.values():
        assert plan.by_name(secret, "Secret").ignore_changes == ["data", "stringData"]


def test_keystone_api_mounts_the_key_secrets_as_directories_the_kubelet_updates(stack_plan: Plan) -> None:
    api = stack_plan.by_name("keystone-api", "Deployment")
    volumes = {v["name"]: v for v in pod_template(api)["spec"]["volumes"]}
    [container] = containers(api)
    conf = _keystone_conf(stack_plan)
    for secret, (group, directory) in REPOSITORIES.items():
        [mount] = [m for m in container["volumeMounts"] if m["mountPath"] == directory]
        assert volumes[mount["name"]]["secret"]["secretName"] == secret
        # A subPath mount is never updated: the pod would keep the keys it started with.
        assert "subPath" not in mount
        assert conf[group]["key_repository"] == directory


class _OtherKeys(FakeCloudMocks):
    """The same program with other key values, as after a rotation."""

    def new_resource(self, args: pulumi.runtime.MockResourceArgs) -> tuple[str, dict]:
        resource_id, outputs = super().new_resource(args)
        if args.typ == "random:index/randomBytes:RandomBytes":
            outputs["base64"] = base64.b64encode(hashlib.sha256(f"rotated/{args.name}".encode()).digest()).decode()
        return resource_id, outputs


def _run(mocks: FakeCloudMocks) -> dict[tuple[str | None, str | None], Registration]:
    registrations = run_program(stack_with(stack_config("prod"), None), "prod", RecordingMonitor(mocks))
    return {(r.kind, r.k8s_name): r for r in registrations if r.custom}


def test_no_pod_template_depends_on_the_key_values() -> None:
    """The config checksum hashes keystone.conf, not the keys: other keys restart no pod (a
    rotation is not a config change, and keystone-api reads the new keys from its volume)."""
    before, after = _run(FakeCloudMocks()), _run(_OtherKeys())
    for secret in ROTATIONS.values():
        assert before[("Secret", secret)].revealed["stringData"] != after[("Secret", secret)].revealed["stringData"]
    templates = [key for key in before if key[0] in POD_KINDS]
    assert ("Deployment", "keystone-api") in templates
    for key in templates:
        assert pod_template(before[key]) == pod_template(after[key]), key


@pytest.mark.parametrize(
    ("schedule", "keys"),
    [
        ("0 */12 * * *", 7),  # openstack-helm's schedule; (1h + 48h) / 12h rounded up, + 2
        ("0 */6 * * *", 11),
        ("0 0 * * *", 5),
        ("0 3 * * 1", 3),  # weekly: one rotation within any 49 hours
        ("0 0,1 * * *", 8),  # two an hour apart each day: 0, 1, 24, 25, 48, 49 within 49 hours
    ],
)
def test_max_active_keys_covers_a_token_for_its_lifetime_and_allow_expired_window(schedule: str, keys: int) -> None:
    plan = plan_of("dev", keyRotation={"fernetSchedule": schedule})
    conf = _keystone_conf(plan)
    assert (int(conf["token"]["expiration"]), int(conf["token"]["allow_expired_window"])) == (3600, 48 * 3600)
    assert int(conf["fernet_tokens"]["max_active_keys"]) == keys
    assert objects(plan, "CronJob")["keystone-fernet-rotate"].inputs["spec"]["schedule"] == schedule


def test_the_cloud_test_runs_every_cronjob_the_rotations_among_them() -> None:
    """tests/lab/cloud runs every CronJob once; the rotations call its API server, so they run too."""
    from tests.lab.cloud.run import cannot_run

    not_run = cannot_run(plan_of("prod"))
    assert not (set(ROTATIONS) | {"nova-cell-setup", "nova-archive-deleted-rows", "glance-db-purge"}) & set(not_run)
