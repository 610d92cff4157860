"""Settings that would break the cloud are refused, each naming its key; their good neighbours
still plan; and setting one field of a nested setting keeps the defaults of the others."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from components.cloud.stack_config import parse_settings
from components.settings.model import SettingsError
from tools import plan as plan_tool

S3 = {"bucket": "cloud-backups", "endpoint": "minio.storage.svc:9000", "credentials": "backup-s3"}
TWO_BRIDGES = {"physnet1": "br-ex", "physnet2": "br-data"}


def s3(**changed: str) -> dict[str, Any]:
    return {"backup": {"storage": {"s3": {**S3, **changed}}}}


def group(**fields: Any) -> dict[str, Any]:
    return {"compute": {"nodeGroups": [{"name": "a", **fields}]}}


# (settings, the key the error must name, a fragment of what it must say)
BREAKING: list[tuple[str, dict[str, Any], str, str]] = [
    # One NIC can be the uplink of one bridge: OVS refuses a port on a second bridge.
    ("nic-on-two-bridges",
     {"neutron": {"bridgeMappings": TWO_BRIDGES, "bridgeInterfaces": {"br-ex": "eth1", "br-data": "eth1"}}},
     "openstack:neutron.bridgeInterfaces", "eth1 is the uplink of br-data and br-ex"),
    ("group-nic-on-two-bridges",
     {"neutron": {"bridgeMappings": TWO_BRIDGES}, **group(bridgeInterfaces={"br-ex": "eth2", "br-data": "eth2"})},
     "openstack:compute.nodeGroups.0.bridgeInterfaces", "eth2 is the uplink of br-data and br-ex"),
    # A bridge as another bridge's uplink: the agent's own, or one of the provider bridges.
    ("nic-br-int", {"neutron": {"bridgeInterfaces": {"br-ex": "br-int"}}},
     "openstack:neutron.bridgeInterfaces", "br-int is a bridge"),
    ("nic-br-tun", {"neutron": {"bridgeInterfaces": {"br-ex": "br-tun"}}},
     "openstack:neutron.bridgeInterfaces", "br-tun is a bridge"),
    ("nic-provider-bridge",
     {"neutron": {"bridgeMappings": TWO_BRIDGES, "bridgeInterfaces": {"br-ex": "br-data"}}},
     "openstack:neutron.bridgeInterfaces", "br-data is a bridge"),
    ("nic-itself", {"neutron": {"bridgeInterfaces": {"br-ex": "br-ex"}}},
     "openstack:neutron.bridgeInterfaces", "br-ex is a bridge"),
    ("group-nic-br-int", group(bridgeInterfaces={"br-ex": "br-int"}),
     "openstack:compute.nodeGroups.0.bridgeInterfaces", "br-int is a bridge"),
    ("s3-port-high", s3(endpoint="minio.storage.svc:99999"), "openstack:backup.storage.s3.endpoint", "1-65535"),
    ("s3-port-zero", s3(endpoint="minio.storage.svc:0"), "openstack:backup.storage.s3.endpoint", "1-65535"),
    ("bucket-two-dots", s3(bucket="cloud..backups"), "openstack:backup.storage.s3.bucket", "two periods"),
    ("bucket-ip", s3(bucket="192.168.5.4"), "openstack:backup.storage.s3.bucket", "IP address"),
    ("bucket-xn", s3(bucket="xn--backups"), "openstack:backup.storage.s3.bucket", "xn--"),
    ("bucket-sthree", s3(bucket="sthree-backups"), "openstack:backup.storage.s3.bucket", "sthree-"),
    ("bucket-s3alias", s3(bucket="backups-s3alias"), "openstack:backup.storage.s3.bucket", "-s3alias"),
    ("bucket-dot-dash", s3(bucket="cloud.-backups"), "openstack:backup.storage.s3.bucket", "next to"),
    ("bucket-upper", s3(bucket="Backups"), "openstack:backup.storage.s3.bucket", "S3 bucket name"),
    ("replicas-true", {"replicas": {"nova-api": True}}, "openstack:replicas.nova-api", "a whole number"),
    ("memory-true", group(reservedHostMemoryMb=True), "openstack:compute.nodeGroups.0.reservedHostMemoryMb",
     "a whole number"),
    ("cpus-false", group(reservedHostCpus=False), "openstack:compute.nodeGroups.0.reservedHostCpus",
     "a whole number"),
    ("age-true", {"housekeeping": {"cinderDbPurge": {"ageInDays": True}}},
     "openstack:housekeeping.cinderDbPurge.ageInDays", "a whole number"),
    ("network-nodes-true", {"neutron": {"networkNodeCount": True}}, "openstack:neutron.networkNodeCount",
     "a whole number"),
    ("vxlan-port-true", {"neutron": {"vxlanUdpPort": True}}, "openstack:neutron.vxlanUdpPort", "a whole number"),
    ("vxlan-port-high", {"neutron": {"vxlanUdpPort": 65536}}, "openstack:neutron.vxlanUdpPort", "65535"),
    ("qemu-processes-true", group(qemuMaxProcesses=True), "openstack:compute.nodeGroups.0.qemuMaxProcesses",
     "a whole number"),
    ("qemu-files-true", group(qemuMaxFiles=True), "openstack:compute.nodeGroups.0.qemuMaxFiles", "a whole number"),
    ("chart-latest", {"operators": {"mariadb": {"chartVersion": "latest"}}},
     "openstack:operators.mariadb.chartVersion", "a chart version"),
    ("chart-range", {"operators": {"mariadbCrds": {"chartVersion": ">=26.0.0"}}},
     "openstack:operators.mariadbCrds.chartVersion", "a chart version"),
    ("chart-short", {"operators": {"mariadb": {"chartVersion": "26.6"}}},
     "openstack:operators.mariadb.chartVersion", "a chart version"),
    ("one-host-two-services", {"endpoints": {"hosts": {"nova": "api.example.com", "glance": "api.example.com"}}},
     "openstack:endpoints.hosts.nova", "api.example.com is also glance's"),
    ("host-of-another-default", {"endpoints": {"hosts": {"glance": "keystone.cloud.example.com"}}},
     "openstack:endpoints.hosts.glance", "keystone.cloud.example.com is also keystone's"),
    ("snake-case", {"node_selectors": {"compute": {"a": "b"}}}, "openstack:node_selectors", "unknown setting"),
    ("snake-case-nested", {"compute": {"vm_safe": True}}, "openstack:compute.vm_safe", "unknown setting"),
    ("snake-and-camel", {"compute": {"vmSafe": True, "vm_safe": False}}, "openstack:compute.vm_safe",
     "unknown setting"),
    ("compute-selector-empty", {"nodeSelectors": {"compute": {}}}, "openstack:nodeSelectors.compute",
     "nothing would keep compute agents"),
    ("network-selector-empty", {"nodeSelectors": {"network": {}}}, "openstack:nodeSelectors.network",
     "nothing would keep network agents"),
    ("storage-selector-empty", {"nodeSelectors": {"storage": {}}}, "openstack:nodeSelectors.storage",
     "nothing would keep storage agents"),
    ("group-selector-overrides-compute", group(nodeSelector={"openstack-compute-node": "no"}),
     "openstack:compute.nodeGroups.0.nodeSelector", "nodeSelectors.compute"),
    ("namespace-kube-system", {"namespace": "kube-system"}, "openstack:namespace", "kube-system"),
    ("namespace-kube-prefix", {"namespace": "kube-node-lease"}, "openstack:namespace", "kube-"),
    ("namespace-default", {"namespace": "default"}, "openstack:namespace", "default"),
    ("namespace-rabbitmq-operator", {"namespace": "rabbitmq-system"}, "openstack:namespace",
     "RabbitMQ Cluster Operator"),
    # Where a cluster's own operators run, as operators.* says.
    ("namespace-cluster-rabbitmq-operator",
     {"namespace": "messaging", "operators": {"rabbitmq": {"install": False, "namespace": "messaging"}}},
     "openstack:namespace", "cluster's RabbitMQ Cluster Operator"),
    ("namespace-cluster-mariadb-operator",
     {"namespace": "mariadb-operator", "operators": {"mariadb": {"install": False}}},
     "openstack:namespace", "cluster's mariadb-operator"),
    ("namespace-cluster-mariadb-operator-named",
     {"namespace": "databases", "operators": {"mariadb": {"install": False, "namespace": "databases"}}},
     "openstack:namespace", "cluster's mariadb-operator"),
]  # fmt: skip


@pytest.mark.parametrize(("raw", "key", "says"), [c[1:] for c in BREAKING], ids=[c[0] for c in BREAKING])
def test_a_setting_that_would_break_the_cloud_is_refused_naming_its_key(
    raw: dict[str, Any], key: str, says: str
) -> None:
    with pytest.raises(SettingsError) as caught:
        parse_settings(raw)
    named = [p for p in caught.value.problems if p.startswith(f"{key}: ")]
    assert named, caught.value.problems
    assert any(says in p for p in named), named


# Their good neighbours: each must still be accepted.
GOOD: list[tuple[str, dict[str, Any]]] = [
    ("two-nics",
     {"neutron": {"bridgeMappings": TWO_BRIDGES, "bridgeInterfaces": {"br-ex": "eth1", "br-data": "eth2"}}}),
    ("group-other-nic",
     {"neutron": {"bridgeInterfaces": {"br-ex": "eth1"}}, **group(bridgeInterfaces={"br-ex": "bond0"})}),
    ("s3-port", s3(endpoint="minio.storage.svc:65535")),
    ("s3-no-port", s3(endpoint="s3.us-east-1.amazonaws.com")),
    ("bucket-dots", s3(bucket="cloud.backups.2026")),
    ("bucket-short", s3(bucket="abc")),
    ("counts", {"replicas": {"nova-api": 3}, **group(reservedHostMemoryMb=0, reservedHostCpus=2)}),
    ("chart-prerelease", {"operators": {"mariadb": {"chartVersion": "26.7.0-rc.1"}}}),
    ("hosts", {"endpoints": {"hosts": {"nova": "compute.example.com", "glance": "images.example.com"}}}),
    ("group-selector-adds", group(nodeSelector={"openstack-compute-group": "a"})),
    ("no-cinder-no-storage", {"services": {"cinder": False}, "nodeSelectors": {"storage": {}}}),
    ("namespace", {"namespace": "openstack-two"}),
    ("namespace-kube-in-the-middle", {"namespace": "my-kube-cloud"}),
    # The RabbitMQ operator's manifest namespace is free when the cluster's own runs elsewhere, and
    # the mariadb-operator the stack installs runs in the stack's namespace, whatever its name.
    ("namespace-rabbitmq-system-unused",
     {"namespace": "rabbitmq-system", "operators": {"rabbitmq": {"install": False, "namespace": "messaging"}}}),
    ("namespace-mariadb-operator-installed", {"namespace": "mariadb-operator"}),
    ("network-ports-and-counts", {"neutron": {"vxlanUdpPort": 4800, "networkNodeCount": 2},
                                  **group(qemuMaxProcesses=65536, qemuMaxFiles=65536)}),
]  # fmt: skip


@pytest.mark.parametrize("raw", [c[1] for c in GOOD], ids=[c[0] for c in GOOD])
def test_the_good_variants_are_accepted(raw: dict[str, Any]) -> None:
    parse_settings(raw)


def test_the_good_variants_plan(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """One stack with the good variants together plans cleanly: schemas valid, no mandatory violation."""
    config = {
        "openstack:namespace": "openstack-two",
        "openstack:neutron": {"bridgeMappings": TWO_BRIDGES, "bridgeInterfaces": {"br-ex": "eth1", "br-data": "eth2"}},
        "openstack:compute": {"nodeGroups": [{"name": "a", "bridgeInterfaces": {"br-ex": "bond0"},
                                              "nodeSelector": {"openstack-compute-group": "a"}}]},
        "openstack:backup": {"storage": {"s3": {**S3, "bucket": "cloud.backups.2026"}}},
        "openstack:endpoints": {"hosts": {"nova": "compute.example.com", "glance": "images.example.com"}},
        "openstack:operators": {"mariadb": {"install": False}},
        "openstack:housekeeping": {"cinderDbPurge": {"ageInDays": 60}},
    }  # fmt: skip
    path = tmp_path / "Pulumi.good.yaml"
    path.write_text(yaml.safe_dump({"config": config}))
    out = tmp_path / "out"
    assert plan_tool.main(["--stack", "good", "--stack-file", str(path), "--out", str(out)]) == 0, capsys.readouterr()
    settings = json.loads((out / "plan.json").read_text())["settings"]
    # namespace unset: the cluster's operator runs in mariadb-operator (MariadbOperator.namespace_in).
    assert settings["operators"]["mariadb"] == {"install": False, "chartVersion": "26.6.0", "namespace": None}
    assert settings["housekeeping"]["cinderDbPurge"] == {"schedule": "20 0 * * *", "ageInDays": 60}


@pytest.mark.parametrize(
    ("raw", "path", "kept"),
    [
        ({"operators": {"mariadb": {"install": False}}}, ("operators", "mariadb", "chart_version"), "26.6.0"),
        ({"operators": {"mariadbCrds": {"install": False}}}, ("operators", "mariadb_crds", "chart_version"), "26.6.0"),
        ({"operators": {"rabbitmq": {"install": False}}}, ("operators", "rabbitmq", "version"), "v2.21.1"),
        ({"housekeeping": {"cinderDbPurge": {"ageInDays": 60}}}, ("housekeeping", "cinder_db_purge", "schedule"),
         "20 0 * * *"),
        ({"housekeeping": {"novaArchiveDeletedRows": {"ageInDays": 7}}},
         ("housekeeping", "nova_archive_deleted_rows", "schedule"), "10 * * * *"),
    ],
)  # fmt: skip
def test_a_partial_override_keeps_the_other_defaults(raw: dict[str, Any], path: tuple[str, ...], kept: str) -> None:
    value: Any = parse_settings(raw)
    for step in path:
        value = getattr(value, step)
    assert value == kept


def test_a_partial_override_still_checks_what_it_sets() -> None:
    with pytest.raises(SettingsError) as caught:
        parse_settings({"operators": {"rabbitmq": {"version": "v2.22.0"}}})
    assert any(p.startswith("openstack:operators.rabbitmq: ") and "cert-manager" in p for p in caught.value.problems)


def test_a_node_selector_mistake_stops_the_plan_before_the_policy(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    """What the pack's agents-on-their-nodes found in the plan is a settings error, exit 2, naming the key."""
    path = tmp_path / "Pulumi.x.yaml"
    path.write_text("config:\n  openstack:nodeSelectors:\n    compute: {}\n")
    out = tmp_path / "out"
    assert plan_tool.main(["--stack", "x", "--stack-file", str(path), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "openstack:nodeSelectors.compute: empty" in err and "mandatory policy violation" not in err
    assert not out.exists()
