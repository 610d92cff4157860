"""Map settings whose keys name nothing of the stack or its policy pack, and node groups that can share a node."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from components.cloud.stack_config import parse_settings
from components.settings.model import Settings, SettingsError
from tests.conftest import plan_of

REPO = Path(__file__).resolve().parents[1]
NO_CINDER = {"services": {"cinder": False}}

# (settings, the key the error must name, a fragment the error must say)
UNKNOWN_NAMES: list[tuple[dict[str, Any], str, str]] = [
    ({"replicas": {"glance-apii": 2}}, "openstack:replicas.glance-apii", "did you mean 'glance-api'"),
    ({"replicas": {"keystone": 2}}, "openstack:replicas.keystone", "keystone-api"),
    ({"replicas": {"Nova-API": 2}}, "openstack:replicas.Nova-API", "unknown workload"),
    ({"replicas": {"nova-compute": 2}}, "openstack:replicas.nova-compute", "a DaemonSet runs one pod"),
    ({"replicas": {"neutron-ovs-agent": 2}}, "openstack:replicas.neutron-ovs-agent", "DaemonSet"),
    ({"replicas": {"libvirt": 2}}, "openstack:replicas.libvirt", "DaemonSet"),
    ({"replicas": {"keystone-db-sync": 2}}, "openstack:replicas.keystone-db-sync", "a Job runs once"),
    ({"replicas": {"nova-cell-setup": 2}}, "openstack:replicas.nova-cell-setup", "Job"),
    ({"replicas": {"mariadb": 3}}, "openstack:replicas.mariadb", "Galera cluster under ha"),
    ({"replicas": {"nova-compute-maintenance": 2}}, "openstack:replicas.nova-compute-maintenance", "runs alone"),
    ({"replicas": {"rabbitmq": 3}}, "openstack:replicas.rabbitmq", "three under ha"),
    ({**NO_CINDER, "replicas": {"cinder-volume": 2}}, "openstack:replicas.cinder-volume", "DaemonSet"),
    ({"resources": {"keystone-apl": {"limitsCpu": "2"}}}, "openstack:resources.keystone-apl", "'keystone-api'"),
    # A Cyrillic a (U+0430) looks like the Latin one: the key would be ignored without this check.
    ({"resources": {"nov\u0430-api": {"limitsCpu": "2"}}}, "openstack:resources.nov\u0430-api", "'nova-api'"),
    ({"resources": {"defaults": {"limitsCpu": "2"}}}, "openstack:resources.defaults", "unknown container"),
    ({"endpoints": {"hosts": {"glanse": "images.example.org"}}}, "openstack:endpoints.hosts.glanse", "'glance'"),
    ({"endpoints": {"hosts": {"mariadb": "db.example.org"}}}, "openstack:endpoints.hosts.mariadb", "public host"),
    ({**NO_CINDER, "endpoints": {"hosts": {"volume": "v.example"}}}, "openstack:endpoints.hosts.volume", "cinderv3"),
    ({"endpoints": {"hosts": {"dashboard": "x.example.org"}}}, "openstack:endpoints.hosts.dashboard", "horizon"),
    (
        {"images": {"overrides": {"libvirt": "example.org/libvirt:1"}}},
        "openstack:images.overrides.libvirt",
        "'nova-libvirt'",
    ),
    (
        {"images": {"overrides": {"mariadb": "example.org/mariadb:11"}}},
        "openstack:images.overrides.mariadb",
        "unknown image",
    ),
    (
        {"policyEnforcement": {"image-pined": "advisory"}},
        "openstack:policyEnforcement.image-pined",
        "unknown policy; did you mean 'image-pinned'?; allowed: added-capabilities, ",
    ),
    (
        {"policyEnforcement": {"image-pinned": "mandtory"}},
        "openstack:policyEnforcement.image-pinned",
        "unknown enforcement level; did you mean 'mandatory'?; allowed: advisory, mandatory, remediate, disabled",
    ),
    (
        {"policyEnforcement": {"readiness-probes": "warn"}},
        "openstack:policyEnforcement.readiness-probes",
        "allowed: advisory",
    ),
    (
        {"policyEnforcement": {"host-ports": "mandatory"}},
        "openstack:policyEnforcement.host-ports",
        "its level is fixed in policies/registry.py",
    ),
]


@pytest.mark.parametrize(("raw", "key", "says"), UNKNOWN_NAMES, ids=[c[1].partition(":")[2] for c in UNKNOWN_NAMES])
def test_a_map_key_that_names_nothing_of_the_stack_is_an_error(raw: dict[str, Any], key: str, says: str) -> None:
    with pytest.raises(SettingsError) as caught:
        parse_settings(raw)
    [problem] = [p for p in caught.value.problems if p.startswith(f"{key}: ")]
    assert says in problem


# Names a user may set, found the other way: read off the plan's manifests, not the specs.
def _manifest_names(stack: str) -> tuple[set[str], set[str], set[str]]:
    objects = [r.inputs for r in plan_of(stack).custom if r.kind]
    scaled = {
        o["metadata"]["name"]
        for o in objects
        if o.get("kind") in ("Deployment", "StatefulSet")
        # A singleton controller (nova-compute-maintenance) replaces its pod, never runs two.
        and o["spec"].get("strategy", {}).get("type") != "Recreate"
    }
    pods = [o["spec"]["template"]["spec"] for o in objects if o.get("kind") in ("Deployment", "DaemonSet", "Job")]
    pods += [o["spec"]["jobTemplate"]["spec"]["template"]["spec"] for o in objects if o.get("kind") == "CronJob"]
    containers = [c for pod in pods for c in (*pod["containers"], *pod.get("initContainers", ()))]
    images = {c["image"].rsplit("/", 1)[1].split(":")[0] for c in containers}
    return scaled, {c["name"] for c in containers}, images


@pytest.mark.parametrize("stack", ["dev", "staging", "prod"])
def test_every_workload_container_and_image_of_the_plan_is_a_valid_key(stack: str) -> None:
    scaled, containers, images = _manifest_names(stack)
    assert {"keystone-api", "memcached"} <= scaled and "libvirt" in containers and "nova-libvirt" in images
    settings = plan_of(stack).settings
    raw = settings.model_dump(by_alias=True, exclude_unset=True, mode="json")
    raw["replicas"] = dict.fromkeys(scaled, 2)
    raw["resources"] = {name: {"limitsMemory": "1Gi"} for name in containers}
    raw["images"] = {"overrides": {name: f"example.org/{name}:1" for name in images}}
    raw["storage"] = {**raw.get("storage", {}), "storageClass": "cephfs"}  # replicated glance-api
    parse_settings(raw)


def test_every_unknown_key_is_reported_at_once_with_the_rest() -> None:
    raw = {
        "region": "",
        "replicas": {"nova-apii": 2},
        "resources": {"neutron-sever": {"limitsCpu": "1"}},
        "endpoints": {"hosts": {"keystne": "id.example.org"}},
        "images": {"overrides": {"horizn": "example.org/h:1"}},
    }
    with pytest.raises(SettingsError) as caught:
        parse_settings(raw)
    assert {p.split(": ")[0] for p in caught.value.problems} == {
        "openstack:region",
        "openstack:replicas.nova-apii",
        "openstack:resources.neutron-sever",
        "openstack:endpoints.hosts.keystne",
        "openstack:images.overrides.horizn",
    }


def test_the_model_leaves_the_names_to_its_caller_and_the_stack_reader_checks_them() -> None:
    """Settings.parse cannot know the names (the services that declare them import the model):
    a reader that skipped parse_settings would ignore a misspelt key without a word."""
    raw = {"replicas": {"nova-apii": 2}}
    assert Settings.parse(raw).replicas == {"nova-apii": 2}
    with pytest.raises(SettingsError) as caught:
        parse_settings(raw)
    assert [p.partition(";")[0] for p in caught.value.problems] == [
        "openstack:replicas.nova-apii: unknown workload with replicas"
    ]


def test_a_disabled_service_keeps_its_entries() -> None:
    """Turning a service off must not make its tuning an error (the names are the program's)."""
    parse_settings(
        {
            **NO_CINDER,
            "replicas": {"cinder-api": 2},
            "resources": {"cinder-volume": {"limitsCpu": "2"}},
            "endpoints": {"hosts": {"cinderv3": "volumes.example.org"}},
            "images": {"overrides": {"cinder-volume": "example.org/cinder-volume:1"}},
        }
    )


def test_keys_of_the_stack_pass() -> None:
    parse_settings(
        {
            "replicas": {"memcached": 2, "nova-api": 3},
            "resources": {"default": {"limitsCpu": "2"}, "libvirt": {"limitsCpu": "4"}, "glance-db-sync": {}},
            "endpoints": {"hosts": {"novncproxy": "console.example.org", "horizon": "dash.example.org"}},
            "images": {"overrides": {"nova-libvirt": "example.org/nova-libvirt:1"}},
        }
    )


def _groups(*selectors: dict[str, str]) -> dict[str, Any]:
    return {"compute": {"nodeGroups": [{"name": f"g{i}", "nodeSelector": s} for i, s in enumerate(selectors)]}}


OVERLAPPING = [
    pytest.param(_groups({}, {}), 1, id="two-without-selectors"),
    pytest.param(_groups({"gpu": "yes"}, {}), 1, id="one-without-a-selector"),
    pytest.param(_groups({"gpu": "yes"}, {"ssd": "yes"}), 1, id="different-keys"),
    pytest.param(_groups({"zone": "a"}, {"zone": "a"}), 1, id="same-key-same-value"),
    pytest.param(_groups({"zone": "a"}, {"zone": "a", "gpu": "yes"}), 1, id="a-narrower-selector"),
    pytest.param(_groups({"zone": "a"}, {"zone": "b"}, {"rack": "r1"}), 2, id="a-third-group-overlaps-both"),
]


@pytest.mark.parametrize(("raw", "index"), OVERLAPPING)
def test_node_groups_that_can_select_one_node_are_an_error(raw: dict[str, Any], index: int) -> None:
    with pytest.raises(SettingsError) as caught:
        parse_settings(raw)
    [problem] = caught.value.problems
    assert problem.startswith(f"openstack:compute.nodeGroups.{index}.nodeSelector: node group 'g{index}'")
    assert "openstack-compute-group" in problem


DISJOINT = [
    pytest.param(_groups({}), id="one-group"),
    pytest.param(_groups({"zone": "a"}, {"zone": "b"}), id="one-key-two-values"),
    pytest.param(_groups({"zone": "a", "gpu": "yes"}, {"zone": "b"}), id="extra-keys-beside-the-distinct-one"),
    pytest.param(_groups(*({"openstack-compute-group": f"g{i}"} for i in range(5))), id="the-readme-label"),
]


@pytest.mark.parametrize("raw", DISJOINT)
def test_node_groups_that_give_one_key_different_values_pass(raw: dict[str, Any]) -> None:
    parse_settings(raw)


def test_the_program_checks_policy_names_without_pulumi_policy() -> None:
    """policyEnforcement's check of policy names needs no pulumi-policy (the tables name the policies)."""
    script = (
        "import sys; sys.modules['pulumi_policy'] = None\n"
        "from components.settings.model import SettingsError\n"
        "from components.cloud.stack_config import parse_settings\n"
        "try:\n    parse_settings({'policyEnforcement': {'host-port': 'advisory'}})\n"
        "except SettingsError as error:\n    print(error)\n"
    )
    done = subprocess.run([sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True, check=True)
    assert "openstack:policyEnforcement.host-port: unknown policy; did you mean 'host-ports'?" in done.stdout
