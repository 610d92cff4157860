"""The stack's outputs: where the cloud answers and how to log in, the secret ones kept secret.

The expectations come from the stack files and from what Keystone's bootstrap Job is given (the
admin password it sets), not from components/cloud/outputs.py.
"""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from tools.runtime import FakeCloudMocks, RecordingMonitor, run_program, stack_config, stack_file


def outputs_of(stack: str) -> tuple[RecordingMonitor, dict[str, Any]]:
    monitor = RecordingMonitor(FakeCloudMocks())
    run_program(stack_config(stack), stack, monitor)
    return monitor, monitor.outputs


def bootstrap_password(monitor: RecordingMonitor) -> str:
    """The password keystone-manage bootstrap gives the admin user: the Secret its Job reads."""
    [job] = [r for r in monitor.registrations if r.kind == "Job" and r.k8s_name == "keystone-bootstrap"]
    containers = job.revealed["spec"]["template"]["spec"]["containers"]
    variables = [e for c in containers for e in c.get("env", [])]
    [ref] = [e["valueFrom"]["secretKeyRef"] for e in variables if e["name"] == "OS_BOOTSTRAP_PASSWORD"]
    [secret] = [r for r in monitor.registrations if r.kind == "Secret" and r.k8s_name == ref["name"]]
    return str(secret.revealed["stringData"][ref["key"]])


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_clouds_yaml_logs_in_as_the_admin_that_bootstrap_creates(stack: str) -> None:
    monitor, outputs = outputs_of(stack)
    settings = yaml.safe_load(stack_file(stack).read_text())["config"]
    domain = settings["openstack:endpoints"]["domain"]
    # `pulumi stack output` shows secrets masked; --show-secrets reveals them.
    assert outputs["cloudsYaml"] == outputs["adminCredentials"] == "[secret]"
    clouds = yaml.safe_load(monitor.revealed_outputs["cloudsYaml"])
    cloud = clouds["clouds"][stack]
    assert cloud["auth"]["auth_url"] == outputs["authUrl"] == f"https://keystone.{domain}"
    assert cloud["region_name"] == outputs["region"] == settings.get("openstack:region", "RegionOne")
    assert outputs["release"] == settings["openstack:release"]  # what the next release change upgrades from
    assert cloud["auth"]["username"] == cloud["auth"]["project_name"] == "admin"
    assert cloud["auth"]["user_domain_name"] == cloud["auth"]["project_domain_name"] == "Default"
    password = bootstrap_password(monitor)
    assert cloud["auth"]["password"] == password == monitor.revealed_outputs["adminCredentials"]["password"]
    # No plain output holds the password.
    plain = [key for key, value in outputs.items() if value != "[secret]"]
    assert all(password not in str(outputs[key]) for key in plain)


def test_the_public_ca_is_named_where_the_program_makes_it() -> None:
    _, dev = outputs_of("dev")  # tls.public.selfSigned: the program's public-ca
    assert dev["caSecret"] == "openstack/public-ca"
    _, prod = outputs_of("prod")
    prod_tls = yaml.safe_load(stack_file("prod").read_text())["config"]["openstack:tls"]["public"]
    assert ("selfSigned" in prod_tls) is (prod.get("caSecret") is not None)
