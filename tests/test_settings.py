"""Stack settings: validated as a whole before any resource is declared."""

from __future__ import annotations

from typing import Any

import pulumi
import pytest
import yaml

from components.cloud.stack_config import parse_settings
from components.settings.model import Settings, SettingsError
from tests.conftest import plan_of
from tools.runtime import REPO, FakeCloudMocks, RecordingMonitor, run_program

# (settings, the key the error must name, a fragment of what the error must say is allowed)
MALFORMED: list[tuple[dict[str, Any], str, str]] = [
    ({"namespace": "Open_Stack"}, "openstack:namespace", "DNS-1123"),
    ({"kubernetesVersion": "1.12"}, "openstack:kubernetesVersion", "1.31"),
    ({"hypervisorIsolation": "hyperv"}, "openstack:hypervisorIsolation", "pod-per-service-host-pid (5)"),
    ({"hypervisorIsolation": 6}, "openstack:hypervisorIsolation", "all-in-one (1)"),
    ({"release": "2023.2"}, "openstack:release", "2026.1"),
    ({"replicas": {"keystone-api": 0}}, "openstack:replicas.keystone-api", "greater than or equal to 1"),
    ({"storage": {"mariadbSize": "lots"}}, "openstack:storage.mariadbSize", "a size with a unit"),
    ({"nodeSelectors": {"compute": {"bad key!": "x"}}}, "openstack:nodeSelectors.compute", "label key"),
    ({"services": {"placement": False}}, "openstack:services", "nova needs placement"),
    ({"services": {"keystone": False}}, "openstack:services.keystone", "True"),
    ({"images": {"overrides": {"keystone": "example.org/keystone"}}}, "openstack:images.overrides", "pinned"),
    ({"images": {"overrides": {"nova-api": "example.org/nova-api:latest"}}}, "openstack:images.overrides", "latest"),
    ({"endpoints": {"scheme": "ftp"}}, "openstack:endpoints.scheme", "'http' or 'https'"),
    ({"ha": "sometimes"}, "openstack:ha", "boolean"),
    ({"namspace": "openstack"}, "openstack:namspace", "unknown setting"),
    ({"ha": True}, "openstack:storage.classes.images", "provides ReadWriteMany"),
    ({"replicas": {"glance-api": 2}}, "openstack:storage.classes.images", "glance-api runs 2 replicas"),
    (
        {"resources": {"mariadb": {"limitsMemory": "200Mi"}}},
        "openstack:resources.mariadb.limitsMemory",
        "limit of at least 256Mi",
    ),
    (
        {"resources": {"default": {"limitsMemory": "300Mi"}, "memcached": {"limitsMemory": "64Mi"}}},
        "openstack:resources.memcached.limitsMemory",
        "at least 80Mi",
    ),
    ({"resources": {"default": {"limitsMemory": "128Mi"}}}, "openstack:resources.default.limitsMemory", "mariadb"),
    ({"operators": {"rabbitmq": {"chartVersion": "4.4.3"}}}, "openstack:operators.rabbitmq.chartVersion", "unknown"),
    ({"operators": {"rabbitmq": {"version": "2.21.1"}}}, "openstack:operators.rabbitmq.version", "pattern"),
    ({"operators": {"rabbitmq": {"version": "v2.22.0"}}}, "openstack:operators.rabbitmq", "need cert-manager"),
    ({"compute": {"nodeGroups": []}}, "openstack:compute.nodeGroups", "at least one node group"),
    (
        {"compute": {"nodeGroups": [{"name": "a"}, {"name": "a"}]}},
        "openstack:compute.nodeGroups",
        "repeated: a",
    ),
    ({"compute": {"nodeGroups": [{"name": "g", "virtType": "xen"}]}}, "openstack:compute.nodeGroups.0.virtType", "kvm"),
    (
        {"compute": {"nodeGroups": [{"name": "g", "virtType": "qemu", "cpuMode": "host-passthrough"}]}},
        "openstack:compute.nodeGroups.0",
        "needs virtType 'kvm'",
    ),
    ({"neutron": {"datapathType": "dpdk"}}, "openstack:neutron.datapathType", "'system' or 'netdev'"),
    # The nodes' network namespace is the network plugin's too: its tunnel ports are refused.
    ({"neutron": {"vxlanUdpPort": 4789}}, "openstack:neutron.vxlanUdpPort", "Calico"),
    ({"neutron": {"vxlanUdpPort": 8472}}, "openstack:neutron.vxlanUdpPort", "Flannel and Cilium"),
    ({"neutron": {"vxlanUdpPort": 6081}}, "openstack:neutron.vxlanUdpPort", "Geneve"),
    ({"neutron": {"vxlanUdpPort": 4790}}, "openstack:neutron.vxlanUdpPort", "VXLAN-GPE"),
    ({"neutron": {"vxlanUdpPort": 31000}}, "openstack:neutron.vxlanUdpPort", "NodePort range"),
    ({"neutron": {"vxlanUdpPort": 65536}}, "openstack:neutron.vxlanUdpPort", "less than or equal to 65535"),
    ({"neutron": {"vxlanUdpPort": "vxlan"}}, "openstack:neutron.vxlanUdpPort", "valid integer"),
    ({"neutron": {"networkNodeCount": 0}}, "openstack:neutron.networkNodeCount", "greater than or equal to 1"),
    (
        {"ha": True, "storage": {"storageClass": "cephfs"}, "neutron": {"networkNodeCount": 1}},
        "openstack:neutron.networkNodeCount",
        "under ha at least 2 network nodes",
    ),
    ({"neutron": {"bridgeInterfaces": {"br-ex": "a-much-too-long-nic"}}}, "openstack:neutron.bridgeInterfaces", "1-15"),
    ({"neutron": {"bridgeInterfaces": {"br-ex": "eth 1"}}}, "openstack:neutron.bridgeInterfaces", "interface name"),
    ({"neutron": {"bridgeInterfaces": {"br-prv": "eth1"}}}, "openstack:neutron", "does not map: br-prv"),
    (
        {"compute": {"nodeGroups": [{"name": "g", "bridgeInterfaces": {"br-x": "eth2"}}]}},
        "openstack",
        "nodeGroups 'g': bridgeInterfaces names bridges that neutron.bridgeMappings does not map: br-x",
    ),
]


@pytest.mark.parametrize(("raw", "key", "allowed"), MALFORMED, ids=[m[1] + "-" + m[2][:12] for m in MALFORMED])
def test_malformed_settings_name_the_key_and_what_is_allowed(raw: dict[str, Any], key: str, allowed: str) -> None:
    with pytest.raises(SettingsError) as caught:
        parse_settings(raw)
    [problem] = [p for p in caught.value.problems if p.startswith(key) and allowed in p]
    assert "got" in problem or "unknown setting" in problem


def test_every_problem_is_reported_at_once() -> None:
    with pytest.raises(SettingsError) as caught:
        parse_settings({"namespace": "UPPER", "region": "", "kubernetesVersion": "2.0", "hypervisorIsolation": 0})
    keys = {p.split(":")[1] for p in caught.value.problems}
    assert keys == {"namespace", "region", "kubernetesVersion", "hypervisorIsolation"}


def test_problems_that_depend_on_other_settings_are_reported_with_theirs() -> None:
    """pydantic stops at invalid fields; what depends on them is still found, in the same run."""
    raw = {
        "ha": True,
        "storage": {"mariadbSize": "lots"},
        "resources": {"mariadb": {"requestsMemory": "128Mi", "limitsMemory": "200Mi"}},
        "compute": {"nodeGroups": [{"name": "g", "virtType": "xen", "bridgeInterfaces": {"br-x": "eth2"}}]},
    }
    with pytest.raises(SettingsError) as caught:
        parse_settings(raw)
    keys = [p.split(": ")[0] for p in caught.value.problems]
    assert keys == [
        "openstack:storage.mariadbSize",
        "openstack:compute.nodeGroups.0.virtType",
        "openstack:compute.nodeGroups.0.bridgeInterfaces",
        "openstack:storage.classes.images",
        "openstack:resources.mariadb.limitsMemory",
    ]


@pytest.mark.parametrize(
    ("given", "expected"),
    [(1, "all-in-one"), ("5", "pod-per-service-host-pid"), ("baremetal-hypervisor", "baremetal-hypervisor")],
)
def test_topology_by_name_or_option_number(given: object, expected: str) -> None:
    assert parse_settings({"hypervisorIsolation": given}).hypervisor_isolation.value == expected


def test_invalid_stack_declares_nothing() -> None:
    monitor = RecordingMonitor(FakeCloudMocks())
    with pytest.raises(pulumi.RunError) as caught:
        run_program({"openstack:namespace": "Bad Namespace", "openstack:replicas": {"nova-api": -1}}, monitor=monitor)
    message = str(caught.value)
    assert "openstack:namespace" in message and "openstack:replicas.nova-api" in message
    assert monitor.registrations == []


def test_ha_raises_replicas_to_three_but_keeps_larger_counts() -> None:
    settings = parse_settings({"ha": True, "replicas": {"nova-api": 5}, "storage": {"storageClass": "cephfs"}})
    assert settings.replicas_of("keystone-api") == 3
    assert settings.replicas_of("nova-api") == 5
    assert parse_settings({}).replicas_of("keystone-api") == 1


def test_network_nodes_are_three_under_ha_unless_the_stack_says() -> None:
    ha = {"ha": True, "storage": {"storageClass": "cephfs"}}
    assert parse_settings(ha).network_node_count() == 3
    assert parse_settings({**ha, "neutron": {"networkNodeCount": 5}}).network_node_count() == 5
    assert parse_settings({}).network_node_count() == 1


def test_default_images_are_kolla_images_of_the_release() -> None:
    pinned = "registry.local/nova-api@sha256:" + "0123456789abcdef" * 4
    settings = parse_settings({"images": {"overrides": {"nova-api": pinned}}})
    assert settings.image("keystone") == "quay.io/openstack.kolla/keystone:2026.1-ubuntu-noble"
    assert settings.image("nova-api") == pinned


def test_project_file_declares_every_top_level_setting() -> None:
    project = yaml.safe_load((REPO / "Pulumi.yaml").read_text())
    declared = project["config"]
    fields = {info.alias or name for name, info in Settings.model_fields.items()}
    assert set(declared) == fields
    defaults = Settings()
    for key, entry in declared.items():
        assert entry["description"]
        value = getattr(defaults, next(n for n, i in Settings.model_fields.items() if (i.alias or n) == key))
        if "type" in entry:
            assert str(entry["default"]).lower() == str(getattr(value, "value", value)).lower(), key
            assert entry["type"] in {"string", "integer", "boolean"}
        else:  # an object: {} stands for the model's defaults, or unset for an optional section
            assert entry["default"] == {}, key


@pytest.mark.parametrize(
    "raw",
    [
        {"ha": True, "glance": {"backend": "cinder"}},
        {"ha": True, "replicas": {"glance-api": 1}, "services": {"glance": False, "nova": False}},
        {"replicas": {"glance-api": 1}},
    ],
)
def test_glance_without_a_shared_volume_needs_no_storage_class(raw: dict[str, Any]) -> None:
    assert parse_settings(raw).storage.storage_class is None


# Prod keeps its images in Ceph (glance.backend rbd, no claim); on files, as before, with its classes.
PROD_ON_FILES = {
    "glance": {"backend": "file"},
    "storage": {"classes": {"database": "ceph-rbd", "queue": "ceph-rbd", "images": "cephfs", "backups": "cephfs"}},
}


@pytest.mark.parametrize(("stack", "overrides"), [("staging", {}), ("prod", PROD_ON_FILES)])
def test_replicated_glance_claims_its_shared_volume_from_the_stack_storage_class(
    stack: str, overrides: dict[str, Any]
) -> None:
    plan = plan_of(stack, **overrides)
    assert plan.settings.replicas_of("glance-api") > 1
    claim = plan.by_name("glance-images", "PersistentVolumeClaim").inputs["spec"]
    assert claim["accessModes"] == ["ReadWriteMany"]
    assert claim["storageClassName"] == plan.settings.storage.class_for("images") == "cephfs"


def test_readme_labels_a_node_for_every_default_node_selector() -> None:
    example = next(line for line in (REPO / "README.md").read_text().splitlines() if "kubectl label node" in line)
    selectors = Settings().node_selectors
    for kind in ("control_plane", "network", "compute", "storage"):
        for key, value in getattr(selectors, kind).items():
            assert f"{key}={value}" in example, kind


@pytest.mark.parametrize("stack", ["dev", "staging", "prod"])
def test_stack_files_hold_no_secrets(stack: str) -> None:
    text = (REPO / "stacks" / f"Pulumi.{stack}.yaml").read_text().lower()
    assert "password" not in text and "secure:" not in text and "secret" not in text
