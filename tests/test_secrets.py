"""Generated secrets reach the cluster only inside Secrets and never show in the plan."""

from __future__ import annotations

import json
import re
from typing import Any

from tests.helpers import containers, objects
from tools.plan import Plan, resource_record
from tools.runtime import SECRET_MARK

WORKLOAD_KINDS = {"Deployment", "DaemonSet", "StatefulSet", "Job", "CronJob", "Pod"}


def _secret_values(plan: Plan) -> set[str]:
    return {v for r in plan.registrations for v in r.generated_secrets}


def test_the_plan_has_generated_secrets_to_look_for(stack_plan: Plan) -> None:
    values = _secret_values(stack_plan)
    assert len(values) >= 7  # MariaDB root, admin, keystone db, two fernet and two credential keys
    # Each one reaches the cluster: otherwise the checks below would prove nothing.
    secrets = json.dumps([r.revealed for r in objects(stack_plan, "Secret").values()])
    assert [v for v in values if v not in secrets] == []


def test_no_secret_in_a_config_map(stack_plan: Plan) -> None:
    values = _secret_values(stack_plan)
    for config_map in objects(stack_plan, "ConfigMap").values():
        text = json.dumps(config_map.revealed)
        assert not [v for v in values if v in text], config_map.k8s_name


def test_no_secret_or_password_literal_in_environment(stack_plan: Plan) -> None:
    values = _secret_values(stack_plan)
    for r in stack_plan.custom:
        if r.kind not in WORKLOAD_KINDS:
            continue
        for container in containers(r):
            for variable in container.get("env", []):
                literal = str(variable.get("value", ""))
                assert literal not in values, f"{r.k8s_name}/{container['name']}: {variable['name']}"
                if re.search(r"(?i)password|secret|key$", variable["name"]):
                    assert "valueFrom" in variable, f"{r.k8s_name}/{container['name']}: {variable['name']}"
                assert not re.search(r"://[^/\s:]+:[^@/\s]+@", literal), "connection string with a password"


def test_masked_plan_output_shows_no_secret(stack_plan: Plan) -> None:
    masked = json.dumps([resource_record(r, stack_plan) for r in stack_plan.registrations])
    leaked = [v for v in _secret_values(stack_plan) if v in masked]
    assert leaked == []
    assert SECRET_MARK in masked
    revealed = json.dumps([resource_record(r, stack_plan, reveal=True) for r in stack_plan.registrations])
    assert all(v in revealed for v in _secret_values(stack_plan))


def test_configs_with_passwords_live_in_secrets(stack_plan: Plan) -> None:
    secret = stack_plan.by_name("keystone-etc", "Secret")
    assert secret.inputs["stringData"] == SECRET_MARK
    for config_map in objects(stack_plan, "ConfigMap").values():
        assert not [f for f in config_map.inputs["data"] if f.endswith((".conf", ".ini"))], config_map.k8s_name


# What a compute or network node may learn from the Secrets its pods reference: the kubelet of
# a node can read every such Secret whole, so a node that is broken into knows them all.
NODE_MAY_KNOW = {"nova-keystone", "nova-rabbitmq", "neutron-rabbitmq", "libvirt-sasl", "metadata-proxy-shared-secret"}


def _generated_by_name(plan: Plan) -> dict[str, str]:
    return {r.name: v for r in plan.registrations for v in r.generated_secrets}


def _secrets_referenced(r: Any) -> set[str]:
    spec = r.inputs["spec"]["template"]["spec"]
    names = {v["secret"]["secretName"] for v in spec.get("volumes", []) if "secret" in v}
    for container in containers(r):
        sources = [e.get("valueFrom", {}) for e in container.get("env", [])]
        names |= {source["secretKeyRef"]["name"] for source in sources if "secretKeyRef" in source}
    return names


def test_compute_and_network_nodes_learn_no_database_or_admin_password(stack_plan: Plan) -> None:
    generated = _generated_by_name(stack_plan)
    forbidden = {name: value for name, value in generated.items() if name not in NODE_MAY_KNOW}
    assert {"mariadb-root", "keystone-admin", "nova-db", "neutron-db", "neutron-keystone"} <= set(forbidden)
    secrets = {name: json.dumps(r.revealed) for name, r in objects(stack_plan, "Secret").items()}
    for r in objects(stack_plan, "DaemonSet").values():
        labels = r.inputs["spec"]["template"]["metadata"]["labels"]
        if labels["app.kubernetes.io/component"] in ("cinder-volume", "cinder-backup"):
            continue  # storage nodes: cinder-volume and cinder-backup write their records to the database themselves
        for secret in _secrets_referenced(r):
            # The user's Secrets (Ceph keyrings) are no object of the plan, and hold none of its passwords.
            leaked = sorted(name for name, value in forbidden.items() if value in secrets.get(secret, ""))
            assert leaked == [], f"DaemonSet {r.k8s_name} references Secret {secret}, which holds {leaked}"
