"""Several Cinder backends at once (`cinder.backends`): one section and one volume type each, and
cinder-volume pods per backend that each run their own backend only."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from components.mechanism.inifile import parse_ini
from components.settings.problems import PROJECT
from tests.cloud.test_tempest import ADMIN, FACTS
from tests.conftest import plan_of
from tests.helpers import containers, objects, pod_template, settings_problems
from tests.lab.cloud.tempest_conf import tempest_conf, volume_backend_runs
from tools.plan import Plan

CEPH = {"external": {"fsid": "5c3f8a2e-7d41-4b9e-a6c0-2f1e9d8b7a63", "monitors": ["10.0.0.1"]}}
LVM_PATHS = {"/sys/kernel/config", "/run/lock/lvm", "/dev"}


def both() -> Plan:
    """prod (Ceph) with its rbd backend first and LVM beside it."""
    return plan_of("prod", cinder={"backends": ["rbd", "lvm"]})


def _conf(plan: Plan) -> Any:
    return parse_ini(plan.by_name("cinder-etc", "Secret").revealed["stringData"]["cinder.conf"])


def _volume_container(plan: Plan, daemonset: str) -> dict[str, Any]:
    return next(c for c in containers(objects(plan, "DaemonSet")[daemonset]) if c["name"] == "cinder-volume")


def _env(container: dict[str, Any]) -> dict[str, Any]:
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in container.get("env", [])}


def _host_paths(plan: Plan, daemonset: str) -> set[str]:
    spec = pod_template(objects(plan, "DaemonSet")[daemonset])["spec"]
    return {v["hostPath"]["path"] for v in spec.get("volumes", []) if "hostPath" in v}


def test_cinder_conf_has_a_section_per_backend_and_the_first_is_the_default_type() -> None:
    conf = _conf(both())
    assert conf["DEFAULT"]["enabled_backends"] == "rbd,lvm"
    assert conf["DEFAULT"]["default_volume_type"] == "rbd"
    assert conf["rbd"]["volume_backend_name"] == "rbd" and conf["rbd"]["rbd_pool"] == "volumes"
    assert conf["lvm"]["volume_backend_name"] == "lvm" and conf["lvm"]["volume_group"] == "cinder-volumes"


def test_each_backend_runs_in_its_own_pod_with_only_its_backend_enabled() -> None:
    plan = both()
    daemonsets = {n for n in objects(plan, "DaemonSet") if n.startswith("cinder-volume")}
    assert daemonsets == {"cinder-volume", "cinder-volume-lvm"}  # the first keeps its name
    rbd, lvm = _volume_container(plan, "cinder-volume"), _volume_container(plan, "cinder-volume-lvm")
    assert _env(rbd)["OS_DEFAULT__ENABLED_BACKENDS"] == "rbd" and _env(rbd)["CINDER_BACKEND"] == "rbd"
    assert _env(lvm)["OS_DEFAULT__ENABLED_BACKENDS"] == "lvm" and _env(lvm)["CINDER_BACKEND"] == "lvm"
    # LVM's iSCSI target listens on the node's address; the rbd pod has no target.
    assert "OS_LVM__TARGET_IP_ADDRESS" in _env(lvm) and not any(k.startswith("OS_LVM__") for k in _env(rbd))
    # The rbd pod holds none of LVM's host paths, and only it has cinder's Ceph keyring.
    assert _host_paths(plan, "cinder-volume") == set() and _host_paths(plan, "cinder-volume-lvm") >= LVM_PATHS
    mounts = {n: {m["mountPath"] for m in c.get("volumeMounts", [])} for n, c in (("rbd", rbd), ("lvm", lvm))}
    assert any(p.startswith("/etc/ceph/") for p in mounts["rbd"])
    assert not any(p.startswith("/etc/ceph/") for p in mounts["lvm"])


def test_one_backend_plans_as_before() -> None:
    """`backend: x` is `backends: [x]`, and one backend's pod needs no narrowing of enabled_backends."""
    old, new = plan_of("staging", cinder={"backend": "lvm"}), plan_of("staging", cinder={"backends": ["lvm"]})
    assert _conf(old) == _conf(new)
    assert {n for n in objects(new, "DaemonSet") if n.startswith("cinder-volume")} == {"cinder-volume"}
    assert "OS_DEFAULT__ENABLED_BACKENDS" not in _env(_volume_container(new, "cinder-volume"))


def test_the_volume_type_job_creates_a_type_per_backend(monkeypatch: pytest.MonkeyPatch) -> None:
    job = next(c for c in containers(objects(both(), "Job")["cinder-volume-type"]))
    assert _env(job)["VOLUME_TYPES"] == "rbd=rbd lvm=lvm"
    made: list[tuple[str, dict[str, str]]] = []
    existing = {"lvm": SimpleNamespace(extra_specs={"volume_backend_name": "old"})}
    updated: list[dict[str, str]] = []
    storage = SimpleNamespace(
        find_type=existing.get,
        create_type=lambda name, extra_specs, **_: made.append((name, extra_specs)),
        update_type_extra_specs=lambda _type, **specs: updated.append(specs),
    )
    connection = SimpleNamespace(block_storage=storage)
    monkeypatch.setitem(sys.modules, "openstack", SimpleNamespace(connect=lambda: connection))
    monkeypatch.syspath_prepend(str(Path(__file__).parents[1] / "components" / "scripts"))
    monkeypatch.setenv("VOLUME_TYPES", _env(job)["VOLUME_TYPES"])
    script = importlib.reload(importlib.import_module("cinder_volume_type"))
    script.main()
    assert made == [("rbd", {"volume_backend_name": "rbd"})]
    assert updated == [{"volume_backend_name": "lvm"}]


@pytest.mark.parametrize(
    ("raw", "key", "fragment"),
    [
        ({"cinder": {"backends": ["lvm", "lvm"]}}, "openstack:cinder.backends", "lvm listed twice"),
        ({"cinder": {"backends": []}}, "openstack:cinder.backends", "at least 1"),
        ({"cinder": {"backends": ["lvm", "iscsi"]}}, "openstack:cinder.backends.1", "'lvm', 'nfs' or 'rbd'"),
        ({"cinder": {"backend": "lvm", "backends": ["rbd"]}}, "openstack:cinder", "write the backends list only"),
        ({"cinder": {"backends": ["lvm", "rbd"]}}, "openstack:cinder.backends", "set ceph.external"),
        ({"cinder": {"backends": ["lvm", "nfs"]}}, "openstack:cinder", "needs at least one entry in nfsShares"),
        ({"ceph": CEPH, "cinder": {"backends": ["lvm", "nfs"], "nfsShares": ["h:/x"], "backup": "ceph"}},
         "openstack:cinder.backup", "add 'rbd' to cinder.backends"),
    ],
)  # fmt: skip
def test_bad_backend_lists_name_their_key(raw: dict[str, Any], key: str, fragment: str) -> None:
    found = [p for p in settings_problems(raw) if p.startswith(f"{key}: ")]
    assert found and fragment in found[0], settings_problems(raw)


def test_backups_to_ceph_with_rbd_among_other_backends_plan() -> None:
    plan = plan_of("prod", cinder={"backends": ["lvm", "rbd"], "backup": "ceph"})
    assert "cinder-backup" in objects(plan, "DaemonSet")


def test_tempest_knows_every_backend_and_which_of_them_run_here() -> None:
    plan = both()
    lvm_stopped = {"cinder-volume-lvm": "no device-mapper here"}
    conf = tempest_conf(plan, ADMIN, FACTS, lvm_stopped, Path("/work"))
    volume = parse_ini(conf.text)
    assert volume["volume"]["backend_names"] == "rbd,lvm"
    assert volume["volume"]["volume_type"] == "rbd"
    # The default type's backend runs, so the volume tests run; multi-backend ones need LVM too.
    assert volume_backend_runs(lvm_stopped, plan.settings) == ""
    assert volume["volume-feature-enabled"]["multi_backend"] == "false"
    assert "cinder-volume-lvm: no device-mapper here" in conf.features_off["volume-feature-enabled.multi_backend"]
    running = parse_ini(tempest_conf(plan, ADMIN, FACTS, {}, Path("/work")).text)
    assert running["volume-feature-enabled"]["multi_backend"] == "true"
    # LVM first: its pod is `cinder-volume`, and the tests that need a backend are left out.
    lvm_first = plan_of("prod", cinder={"backends": ["lvm", "rbd"]})
    assert volume_backend_runs({"cinder-volume": "no device-mapper here"}, lvm_first.settings) != ""


def test_the_policy_pack_passes_each_backends_pod() -> None:
    from policies.report import load_config
    from tools.plan import policy_report

    for plan in (both(), plan_of("prod", cinder={"backends": ["lvm", "nfs", "rbd"], "nfsShares": ["h:/x"]})):
        violations = policy_report(plan, load_config("prod"))
        assert [v["message"] for v in violations if v["enforcement"] == "mandatory"] == []


def test_rbd_pods_join_one_cinder_cluster_and_per_node_backends_do_not() -> None:
    """kolla-ansible refuses several cinder-volume hosts without cinder_cluster_name (cinder precheck):
    without a cluster, an rbd volume belongs to the one node that created it."""
    plan = plan_of("prod", cinder={"backends": ["rbd", "lvm"], "cluster": "block"})
    rbd, lvm = _volume_container(plan, "cinder-volume"), _volume_container(plan, "cinder-volume-lvm")
    assert _env(rbd)["OS_DEFAULT__CLUSTER"] == "block"
    assert "OS_DEFAULT__CLUSTER" not in _env(lvm)  # LVM's volumes live on their node's disk
    # Only cinder-volume registers the option (cinder/cmd/volume.py), so the shared file leaves it out.
    assert "cluster" not in _conf(plan)["DEFAULT"]


@pytest.mark.parametrize("name", ["", "a@b", "a#b", "-x", "x" * 64])
def test_a_cinder_cluster_name_cinder_would_split_is_refused(name: str) -> None:
    problems = settings_problems({"ceph": CEPH, "cinder": {"backends": ["rbd"], "cluster": name}})
    assert any(p.startswith(f"{PROJECT}:cinder.cluster: ") and "a-z A-Z 0-9" in p for p in problems), problems


@pytest.mark.parametrize("stack", ["staging", "prod"])
def test_image_conversion_and_glance_staging_have_scratch_volumes_of_their_settings_size(stack: str) -> None:
    """cinder.conversionSize and glance.scratchSize: emptyDirs with that sizeLimit where the rendered configs
    put the files, not the container's writable layer."""
    stacked = plan_of(stack).settings  # the stack's own glance and cinder settings, two sizes changed
    cinder = {"backends": list(stacked.cinder.backends), "backup": stacked.cinder.backup, "conversionSize": "7Gi"}
    plan = plan_of(stack, cinder=cinder, glance={"backend": stacked.glance.backend, "scratchSize": "9Gi"})
    glance_conf = parse_ini(plan.by_name("glance-etc", "Secret").revealed["stringData"]["glance-api.conf"])
    dirs = {
        ("glance-api", glance_conf[store]["filesystem_store_datadir"])
        for store in ("os_glance_staging_store", "os_glance_tasks_store")
    }
    dirs |= {(name, _conf(plan)["DEFAULT"]["image_conversion_dir"]) for name in objects(plan, "DaemonSet")
             if name.startswith("cinder-volume")}  # fmt: skip
    sizes = {"glance-api": "9Gi", "cinder-volume": "7Gi"}
    for workload, directory in dirs:
        kind = "Deployment" if workload == "glance-api" else "DaemonSet"
        spec = pod_template(objects(plan, kind)[workload])["spec"]
        empty = {v["name"]: v["emptyDir"] for v in spec["volumes"] if "emptyDir" in v}
        [container] = [c for c in spec["containers"] if c["name"] in ("glance-api", "cinder-volume")]
        under = [m for m in container["volumeMounts"] if directory.startswith(m["mountPath"].rstrip("/") + "/")
                 or directory == m["mountPath"]]  # fmt: skip
        deepest = max(under, key=lambda m: len(m["mountPath"]))
        assert deepest["name"] in empty, (workload, directory, deepest)
        assert empty[deepest["name"]] == {"sizeLimit": sizes["-".join(workload.split("-")[:2])]}
        assert not deepest.get("readOnly") and "subPath" not in deepest
