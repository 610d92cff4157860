"""Workload hygiene: resources, readiness probes, pinned images, no plaintext passwords;
and how objects of a third-party chart are treated."""

from __future__ import annotations

import base64

import pytest

from components.tables.roles import Topology
from policies.report import check_objects, load_config

from .builders import container, control_plane, image, k8s_object, pod_spec, run_policy, stack_config

STAGING = stack_config(Topology.POD_PER_SERVICE)
WHO = "Deployment openstack/keystone-api: container 'keystone-api'"


def test_requests_and_limits() -> None:
    deployment = control_plane()
    container(deployment)["resources"] = {"requests": {"memory": "256Mi"}}
    assert run_policy("resource-requests-limits", deployment, STAGING) == [
        f"{WHO}: spec.template.spec.containers[0].resources.requests.cpu is not set; required: a quantity "
        "(required requests: cpu, memory)",
        f"{WHO}: spec.template.spec.containers[0].resources.limits.memory is not set; required: a quantity "
        "(required limits: memory)",
    ]
    config = stack_config(Topology.POD_PER_SERVICE)
    config["resource-requests-limits"]["requiredLimits"] = ["cpu", "memory"]
    assert len(run_policy("resource-requests-limits", control_plane(), config)) == 0
    del container(deployment)["resources"]
    assert len(run_policy("resource-requests-limits", deployment, config)) == 4


def test_readiness_probes_on_long_running_containers_only() -> None:
    deployment = control_plane()
    del container(deployment)["readinessProbe"]
    assert run_policy("readiness-probes", deployment, STAGING) == [
        f"{WHO}: spec.template.spec.containers[0].readinessProbe is not set; required: a probe (it serves for the "
        "pod's whole life; Jobs and plain init containers need none)"
    ]
    job = control_plane("keystone-db-sync", component="db-sync")
    job.update(apiVersion="batch/v1", kind="Job")
    del container(job)["readinessProbe"]
    assert run_policy("readiness-probes", job, STAGING) == []
    pod_spec(deployment)["containers"][0]["readinessProbe"] = {"httpGet": {"path": "/v3", "port": 5000.0}}
    pod_spec(deployment)["initContainers"] = [
        {"name": "wait", "image": image("kolla-toolbox")},
        {"name": "proxy", "image": image("kolla-toolbox"), "restartPolicy": "Always"},  # a sidecar
    ]
    assert [m.split(": ")[1] for m in run_policy("readiness-probes", deployment, STAGING)] == ["init container 'proxy'"]


@pytest.mark.parametrize(
    ("reference", "pinned"),
    [
        ("quay.io/openstack.kolla/keystone:2026.1-ubuntu-noble", True),
        ("quay.io/openstack.kolla/keystone@sha256:" + "a" * 64, True),
        ("quay.io/openstack.kolla/keystone:latest", False),
        ("quay.io/openstack.kolla/keystone", False),
        ("registry.local:5000/keystone", False),  # the port is not a tag
        ("registry.local:5000/keystone:7", True),
    ],
)
def test_images_pinned_by_tag_or_digest(reference: str, pinned: bool) -> None:
    deployment = control_plane()
    container(deployment)["image"] = reference
    found = run_policy("image-pinned", deployment, STAGING)
    expected = (
        f'{WHO}: spec.template.spec.containers[0].image="{reference}" is not allowed; allowed: '
        "<image>:<tag other than latest> or <image>@<digest> (an untagged image means latest, which changes under "
        "a running cloud)"
    )
    assert found == ([] if pinned else [expected])


def config_map(data: dict, section: str = "data") -> dict:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "keystone-etc", "namespace": "openstack"},
        section: data,
    }


@pytest.mark.parametrize(
    ("text", "what"),
    [
        ("[database]\nconnection = mysql+pymysql://nova:hunter2@mariadb/nova\n", "line 2 holds a URL with a password"),
        ("[DEFAULT]\n\n[keystone_authtoken]\npassword = hunter2\n", "line 4 holds a literal value for 'password'"),
        ('{"admin_password": "hunter2"}', "line 1 holds a literal value for 'admin_password'"),
        ("memcache_secret_key: hunter2", "line 1 holds a literal value for 'memcache_secret_key'"),
        ("[DEFAULT]\ntransport_url = [secret]\n", "line 2 holds a Pulumi secret value"),
    ],
)  # fmt: skip
def test_passwords_in_config_maps(text: str, what: str) -> None:
    found = run_policy("no-plaintext-passwords", config_map({"keystone.conf": text}), STAGING)
    assert found == [
        f"ConfigMap openstack/keystone-etc: data['keystone.conf'] {what}; allowed: a Secret, mounted or referenced "
        "with env[].valueFrom.secretKeyRef"
    ]
    assert "hunter2" not in found[0]  # never repeat the password itself


@pytest.mark.parametrize(
    "text",
    [
        "[identity]\npassword_hash_algorithm = bcrypt\nunique_last_password_count = 3\n",  # about passwords, not one
        "[keystone_authtoken]\nauth_type = password\nusername = nova\npassword =\n",
        'password=os.environ["DB_ADMIN_PASSWORD"],\nuser, password = os.environ["U"], os.environ["P"]\n',
        'url = f"mysql+pymysql://{user}:{password}@{host}/{name}"\n',
        "volumes:\n  - secret:\n      secretName: keystone-etc\n",
    ],
)
def test_text_that_only_mentions_passwords_passes(text: str) -> None:
    assert run_policy("no-plaintext-passwords", config_map({"script.py": text}), STAGING) == []


def test_password_named_keys_and_binary_data() -> None:
    found = run_policy("no-plaintext-passwords", config_map({"admin-password": "hunter2"}), STAGING)
    assert found == [
        "ConfigMap openstack/keystone-etc: data['admin-password'] is named like a password and holds a value; "
        "allowed: a Secret, mounted or referenced with env[].valueFrom.secretKeyRef"
    ]
    encoded = base64.b64encode(b"[DEFAULT]\npassword = hunter2\n").decode()
    found = run_policy("no-plaintext-passwords", config_map({"nova.conf": encoded}, "binaryData"), STAGING)
    assert found == [
        "ConfigMap openstack/keystone-etc: binaryData['nova.conf'] line 2 holds a literal value for 'password'; "
        "allowed: a Secret, mounted or referenced with env[].valueFrom.secretKeyRef"
    ]


def test_passwords_in_literal_environment_values() -> None:
    deployment = control_plane()
    container(deployment)["env"] = [
        {"name": "OS_PASSWORD", "value": "hunter2"},
        {"name": "DB_PASSWORD", "valueFrom": {"secretKeyRef": {"name": "keystone-passwords", "key": "database"}}},
        {"name": "DB_PASSWORD_FILE", "value": "/etc/keystone/db-password"},
        {"name": "TRANSPORT_URL", "value": "rabbit://keystone:hunter2@rabbitmq:5672/"},
        {"name": "OS_AUTH_URL", "value": "http://keystone-api:5000/v3"},
    ]
    found = run_policy("no-plaintext-passwords", deployment, STAGING)
    allowed = "allowed: a Secret, mounted or referenced with env[].valueFrom.secretKeyRef"
    assert found == [
        f"{WHO}: spec.template.spec.containers[0].env[0].value (OS_PASSWORD) is a literal password; {allowed}",
        f"{WHO}: spec.template.spec.containers[0].env[3].value (TRANSPORT_URL) holds a password in a literal value; "
        f"{allowed}",
    ]
    assert not any("hunter2" in m for m in found)


CHART = "openstack:infra:MariaDB$kubernetes:helm.sh/v4:Chart"


def test_third_party_chart_objects_get_hygiene_as_advice_and_the_baseline_as_a_gate() -> None:
    operator = control_plane("mariadb-operator", "mariadb-operator", "operator")
    del container(operator)["readinessProbe"]
    container(operator)["image"] = "docker-registry.mariadb.com/mariadb-operator/mariadb-operator"
    prod = load_config("prod")  # hygiene is mandatory there, for the program's own objects
    violations = check_objects([k8s_object(operator, CHART)], prod)
    assert {(v.policy, v.enforcement) for v in violations} == {("third-party-chart-hygiene", "advisory")}
    assert [v.message.split(": ")[3].split(" ")[0] for v in violations] == [
        "spec.template.spec.containers[0].readinessProbe",
        'spec.template.spec.containers[0].image="docker-registry.mariadb.com/mariadb-operator/mariadb-operator"',
    ]
    assert all(v.message.startswith("third-party chart: Deployment openstack/mariadb-operator:") for v in violations)
    # The same object outside a chart is the program's own: those are its own rules' findings.
    own = check_objects([k8s_object(operator)], prod)
    assert {(v.policy, v.enforcement) for v in own} == {
        ("readiness-probes", "mandatory"),
        ("image-pinned", "mandatory"),
    }
    # Privileges stay gated for chart objects, and the chart gives them no node role.
    pod_spec(operator)["hostNetwork"] = True
    gated = check_objects([k8s_object(operator, CHART)], prod)
    assert [(v.policy, v.enforcement) for v in gated if v.policy == "host-namespaces"] == [
        ("host-namespaces", "mandatory")
    ]


MANIFEST = "openstack:infra:RabbitMQ$kubernetes:yaml/v2:ConfigFile"


def test_objects_of_an_operator_release_manifest_are_third_party_too() -> None:
    # The RabbitMQ Cluster Operator's own manifest (a ConfigFile) installs into rabbitmq-system.
    operator = control_plane("rabbitmq-cluster-operator", "rabbitmq", "operator")
    operator["metadata"]["namespace"] = "rabbitmq-system"
    del container(operator)["readinessProbe"]
    prod = load_config("prod")
    violations = check_objects([k8s_object(operator, MANIFEST)], prod)
    assert {(v.policy, v.enforcement) for v in violations} == {("third-party-chart-hygiene", "advisory")}
    own = check_objects([k8s_object(operator)], prod)
    assert {(v.policy, v.enforcement) for v in own} == {("readiness-probes", "mandatory")}
