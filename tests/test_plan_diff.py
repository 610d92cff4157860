"""--against: objects added, changed, replaced and removed, config diffs, rolls, Jobs, VMs, and no secret."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import plan_of
from tools import certificate_impact, diff_report, plan_diff
from tools import plan as plan_tool
from tools.plan import Plan
from tools.plan_diff import changed_paths
from tools.runtime import REPO, SECRET_MARK

LIBVIRT_IMAGE = "quay.io/openstack.kolla/nova-libvirt:2026.1-ubuntu-noble-fix1"


def stack_settings(stack: str) -> dict[str, Any]:
    config = yaml.safe_load((REPO / "stacks" / f"Pulumi.{stack}.yaml").read_text())["config"]
    return {k.split(":", 1)[1]: v for k, v in config.items() if k.startswith("openstack:")}


def diff_of(stack: str, **overrides: Any) -> dict[str, Any]:
    return plan_diff.diff(plan_diff.view_of(plan_of(stack)), plan_diff.view_of(plan_of(stack, **overrides)))


def refs(objects: list[dict[str, Any]]) -> set[str]:
    return {f"{o['kind']}/{o['name']}" for o in objects}


def generated(plan: Plan) -> list[str]:
    return [s for r in plan.registrations for s in r.generated_secrets]


def staging_changes() -> dict[str, Any]:
    """A nova setting, a libvirt image, a node group added and Cinder removed, at once."""
    settings = stack_settings("staging")
    compute = settings["compute"]
    # Groups may not share a node: the existing ones keep off the GPU nodes.
    group = {"name": "gpu", "virtType": "kvm", "cpuMode": "host-passthrough", "nodeSelector": {"gpu": "yes"}}
    existing = [{**g, "nodeSelector": {**g.get("nodeSelector", {}), "gpu": "no"}} for g in compute["nodeGroups"]]
    return {
        "endpoints": {**settings["endpoints"], "hosts": {"novncproxy": "console.staging.example.com"}},
        "compute": {**compute, "nodeGroups": [*existing, group]},
        "services": {"cinder": False},
        "images": {"overrides": {"nova-libvirt": LIBVIRT_IMAGE}},
    }


@pytest.fixture(scope="module")
def staging() -> dict[str, Any]:
    return diff_of("staging", **staging_changes())


def test_added_and_removed_objects(staging: dict[str, Any]) -> None:
    added, removed = refs(staging["added"]), refs(staging["removed"])
    # The new node group's own DaemonSets, suffixed with its name.
    assert {f"DaemonSet/{p}-gpu" for p in ("libvirt", "nova-compute", "neutron-ovs-agent")} <= added
    assert "DaemonSet/libvirt" not in added | removed
    # Cinder gone: its API, its bootstrap Jobs, its node pods and the iscsid pods it needed.
    assert {"Deployment/cinder-api", "Job/cinder-db-sync", "DaemonSet/cinder-volume", "Secret/cinder-etc"} <= removed
    assert "DaemonSet/iscsid" in removed
    assert not any(o["name"].startswith("cinder") for o in staging["added"] + staging["changed"])


def test_changed_config_file_is_shown_as_a_unified_diff(staging: dict[str, Any]) -> None:
    [nova_conf] = [
        c for c in staging["config_files"] if (c["kind"], c["name"], c["key"]) == ("Secret", "nova-etc", "nova.conf")
    ]
    lines = nova_conf["diff"].splitlines()
    assert "-novncproxy_base_url = https://novncproxy.openstack.staging.example.com/vnc_lite.html" in lines
    assert "+novncproxy_base_url = https://console.staging.example.com/vnc_lite.html" in lines
    assert lines[0] == "--- a/nova.conf"
    # A Secret's data is immutable to pulumi-kubernetes: the Secret is replaced.
    [etc] = [o for o in staging["replaced"] if o["name"] == "nova-etc"]
    assert etc["kind"] == "Secret" and "stringData[nova.conf]" in etc["immutable"]
    # A file of the new group is added in the compute Secret.
    assert any(c["key"] == "nova-gpu.conf" and c["change"] == "added" for c in staging["config_files"])


def test_pods_that_roll_and_jobs_that_rerun(staging: dict[str, Any]) -> None:
    rolls = {r["name"]: r for r in staging["rolls"]}
    assert {"nova-api", "nova-scheduler", "nova-conductor", "nova-compute", "libvirt"} <= rolls.keys()
    assert "keystone-api" not in rolls and "neutron-server" not in rolls and "glance-api" not in rolls
    assert any("nova.conf" in why for why in rolls["nova-api"]["why"])
    # libvirt rolls for its image and its group's new selector, not for the Nova setting:
    # nova.conf is no file of its pod.
    assert set(rolls["libvirt"]["why"]) == {"image of container libvirt", "spec.template.spec.nodeSelector.gpu"}
    assert rolls["libvirt"]["restarts"]
    jobs = {(j["kind"], j["name"]): j["runs"] for j in staging["jobs"]}
    assert jobs[("Job", "nova-db-sync")] == "re-runs"
    assert ("Job", "glance-db-sync") not in jobs and ("Job", "keystone-db-sync") not in jobs
    assert refs([o for o in staging["replaced"] if o["kind"] == "Job"]) == {
        f"Job/{name}" for kind, name in jobs if kind == "Job"
    }


def test_vm_impact_under_pod_per_service_kills_vms(staging: dict[str, Any]) -> None:
    vms = staging["vms"]
    assert vms["topology"] == "pod-per-service" and vms["kills_vms"] is True
    # libvirt for its image; OVS too, as the existing group's selector now keeps off GPU nodes.
    assert [t["name"] for t in vms["touched"]] == ["libvirt", "openvswitch-db", "openvswitch-vswitchd"]
    assert "kills" in vms["per_topology"]["pod-per-service"]["libvirt"]
    assert "keeps" in vms["per_topology"]["pod-per-service-host-pid"]["libvirt"]
    assert "host runs it" in vms["per_topology"]["baremetal-hypervisor"]["libvirt"]
    report = diff_report.render(staging, "main")
    assert "kills the VMs" in report and "`pod-per-service` (4) (this stack)" in report


def test_prod_keeps_vms_and_on_delete_restarts_nothing() -> None:
    settings = stack_settings("prod")
    diff = diff_of("prod", images={"overrides": {"nova-libvirt": LIBVIRT_IMAGE}})
    # The nova-libvirt image is libvirt-tls's too (tls.libvirt): it rolls, and holds no VM.
    libvirt, keeper = "DaemonSet/libvirt-kvm-general", "DaemonSet/libvirt-tls-kvm-general"
    assert refs(diff["changed"]) == {libvirt, keeper} and not diff["added"] + diff["removed"]
    rolls = {f"{r['kind']}/{r['name']}": r for r in diff["rolls"]}
    assert rolls[libvirt]["strategy"] == "OnDelete" and rolls[libvirt]["restarts"] is False
    assert rolls[keeper]["strategy"] == "RollingUpdate" and rolls[keeper]["restarts"] is True
    assert [t["name"] for t in diff["vms"]["touched"]] == ["libvirt-kvm-general"]
    vms = diff["vms"]
    assert vms["vm_safe"] is settings["compute"]["vmSafe"] is True
    assert vms["kills_vms"] is False and "OnDelete" in vms["verdict"] and "keeps the VMs" in vms["verdict"]
    assert not diff["jobs"]


def test_all_in_one_a_nova_setting_restarts_the_pod_that_holds_the_vms() -> None:
    plan = plan_of("dev")
    diff = diff_of("dev", endpoints={**stack_settings("dev").get("endpoints", {}), "clusterDomain": "cloud.internal"})
    vms = diff["vms"]
    assert vms["topology"] == "all-in-one" and vms["kills_vms"] is True
    assert [t["name"] for t in vms["touched"]] == ["compute-node"]
    assert {"libvirt", "openvswitch-vswitchd"} <= set(vms["touched"][0]["holds"])
    # The database host changed in every connection line; the password in it stays masked.
    [nova_conf] = [c for c in diff["config_files"] if (c["name"], c["key"]) == ("nova-etc", "nova.conf")]
    added = [line for line in nova_conf["diff"].splitlines() if line.startswith("+connection = ")]
    assert added and all(f"nova:{SECRET_MARK}@mariadb.openstack.svc.cloud.internal" in line for line in added)
    # A known generated password: it is in the rendered file, and nowhere in the diff.
    password = next(r.outputs["result"] for r in plan.registrations if r.name == "nova-db" and "Random" in r.type)
    assert password in plan.by_name("nova-etc", "Secret").revealed["stringData"]["nova.conf"]
    shown = json.dumps(diff) + diff_report.render(diff, "main")
    assert password not in shown
    assert not [s for s in generated(plan) + generated(plan_of("dev", endpoints={"clusterDomain": "x"})) if s in shown]


def test_secrets_differ_from_masked_inputs_only_in_secret_data() -> None:
    # The diff reads plan.json's inputs and drops only Secret data: that holds if nothing else is secret.
    for r in plan_of("prod").registrations:
        paths = changed_paths(r.inputs, r.revealed)
        assert all(r.kind == "Secret" and p[0] in ("stringData", "data") for p in paths), (r.name, paths)


def test_against_an_earlier_plan_directory(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    base, head = tmp_path / "base", tmp_path / "head"
    assert plan_tool.main(["--stack", "dev", "--out", str(base), "--show-secrets"]) == 0
    changed = yaml.safe_load((REPO / "stacks" / "Pulumi.dev.yaml").read_text())
    endpoints = changed["config"]["openstack:endpoints"]
    before, endpoints["domain"] = endpoints["domain"], "cloud.test"
    stack_file = tmp_path / "Pulumi.dev.yaml"
    stack_file.write_text(yaml.safe_dump(changed))
    args = ["--stack", "dev", "--stack-file", str(stack_file), "--out", str(head), "--against", str(base)]
    assert plan_tool.main(args) == 0
    assert {"configs.json", "graph.svg", "graph.md", "diff.md", "diff.json"} <= {p.name for p in head.iterdir()}
    diff = json.loads((head / "diff.json").read_text())
    assert diff["settings"] == [{"setting": "endpoints.domain", "before": before, "after": "cloud.test"}]
    # nova.conf names the public console URL; keystone.conf no public host: only its bootstrap's env does.
    assert "Deployment/nova-api" in refs(diff["rolls"]) and "Deployment/keystone-api" not in refs(diff["rolls"])
    assert "Job/keystone-bootstrap" in refs(diff["jobs"])
    text = (head / "diff.md").read_text() + (head / "diff.json").read_text()
    assert "cloud.test" in text
    # The earlier plan showed its secrets (--show-secrets); the diff still shows none.
    revealed = (base / "plan.json").read_text()
    secrets = generated(plan_of("dev"))
    assert any(s in revealed for s in secrets) and not any(s in text for s in secrets)
    assert "wrote" in capsys.readouterr().out


def test_against_a_directory_without_a_plan_is_an_error(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    with pytest.raises(SystemExit) as exit_:
        plan_tool.main(["--stack", "dev", "--out", str(tmp_path / "x"), "--against", str(tmp_path)])
    assert exit_.value.code == 2 and "holds no plan.json" in capsys.readouterr().err


def test_an_earlier_plan_without_configs_json_is_compared_without_its_config_files() -> None:
    old = plan_diff.view_of(plan_of("staging"))
    old.configs = None  # as an older tools.plan left it: plan.json only
    diff = plan_diff.diff(old, plan_diff.view_of(plan_of("staging", **staging_changes())))
    assert diff["configs_compared"] is False and diff["config_files"] == []
    assert "Deployment/cinder-api" in refs(diff["removed"]) and "Deployment/nova-api" in refs(diff["rolls"])
    assert "no configs.json" in diff_report.render(diff, "main")


def view(*objects: dict[str, Any]) -> plan_diff.PlanView:
    settings = {"hypervisorIsolation": "pod-per-service", "compute": {"vmSafe": False}}
    return plan_diff.PlanView(
        "s", settings, {o["key"]: {k: v for k, v in o.items() if k != "key"} for o in objects}, {}
    )


def k8s(key: str, kind: str, name: str, **inputs: Any) -> dict[str, Any]:
    meta = {"metadata": {"name": name, "namespace": "ns"}}
    return {
        "key": key,
        "kind": kind,
        "name": name,
        "namespace": "ns",
        "type": f"kubernetes:x:{kind}",
        "inputs": meta | inputs,
    }


def test_immutable_fields_replace_and_the_rest_updates_in_place() -> None:
    pod = {"metadata": {"labels": {"a": "1"}}, "spec": {"containers": [{"name": "c", "image": "i:1"}]}}
    before = view(
        k8s("d", "Deployment", "api", spec={"selector": {"matchLabels": {"a": "1"}}, "template": pod}),
        k8s("p", "PersistentVolumeClaim", "data", spec={"resources": {"requests": {"storage": "1Gi"}}}),
        k8s("s", "Service", "api", spec={"ports": [{"name": "api", "port": 80}]}),
        k8s("r", "Deployment", "old-name", spec={"template": pod}),
    )
    after = view(
        k8s("d", "Deployment", "api", spec={"selector": {"matchLabels": {"a": "2"}}, "template": pod}),
        k8s("p", "PersistentVolumeClaim", "data", spec={"resources": {"requests": {"storage": "2Gi"}}}),
        k8s("s", "Service", "api", spec={"ports": [{"name": "api", "port": 8080}]}),
        k8s("r", "Deployment", "new-name", spec={"template": pod}),
    )
    diff = plan_diff.diff(before, after)
    replaced = {o["name"]: o["immutable"] for o in diff["replaced"]}
    assert replaced == {
        "api": ["spec.selector.matchLabels.a"],
        "data": ["spec.resources.requests.storage"],
        "new-name": ["metadata.name"],
    }
    assert [(o["kind"], o["fields"]) for o in diff["changed"]] == [("Service", ["spec.ports[api].port"])]
    assert not diff["rolls"] and not diff["jobs"] and diff["vms"]["touched"] == []


def test_a_new_image_rolls_a_deployment_and_reruns_a_job() -> None:
    def pod(image: str) -> dict[str, Any]:
        return {"spec": {"containers": [{"name": "c", "image": image}]}}

    before = view(
        k8s("w", "Deployment", "web", spec={"template": pod("i:1")}),
        k8s("j", "Job", "sync", spec={"template": pod("i:1")}),
    )
    after = view(
        k8s("w", "Deployment", "web", spec={"template": pod("i:2")}),
        k8s("j", "Job", "sync", spec={"template": pod("i:2")}),
    )
    diff = plan_diff.diff(before, after)
    assert [(r["name"], r["restarts"], r["why"]) for r in diff["rolls"]] == [("web", True, ["image of container c"])]
    assert [(j["name"], j["runs"]) for j in diff["jobs"]] == [("sync", "re-runs")]
    assert refs(diff["replaced"]) == {"Job/sync"} and refs(diff["changed"]) == {"Deployment/web"}


def test_an_option_change_shows_with_before_and_after() -> None:
    """An earlier program that put retainOnDelete on the chart itself, which its CRDs never got (#3065)."""
    old, new = plan_diff.view_of(plan_of("dev")), plan_diff.view_of(plan_of("dev"))
    [key] = [k for k, o in old.objects.items() if o["name"] == "mariadb-operator-crds"]
    old.objects[key]["options"] = {"retainOnDelete": True}
    diff = plan_diff.diff(old, new)
    [entry] = diff["options"]
    assert (entry["kind"], entry["name"]) == ("Chart", "mariadb-operator-crds")
    changes = {c["option"]: (c["before"], c["after"]) for c in entry["changes"]}
    assert changes["retainOnDelete"] == (True, None)
    assert changes["transforms"][0] is None and "each CustomResourceDefinition" in changes["transforms"][1][0]
    assert not diff["changed"] and not diff["replaced"]  # the chart's inputs are the same
    text = diff_report.render(diff, "main")
    assert (
        "1 with new options" in text and "**Resource options**" in text and "`retainOnDelete`: `true` → `null`" in text
    )


def test_an_earlier_plan_without_options_is_compared_without_them() -> None:
    old = plan_diff.view_of(plan_of("dev"))
    for obj in old.objects.values():
        obj["options"] = None  # plan.json of an older tools.plan
    diff = plan_diff.diff(old, plan_diff.view_of(plan_of("dev")))
    assert diff["options"] == [] and diff["options_compared"] is False
    assert "recorded no resource options" in diff_report.render(diff, "main")


def test_replace_on_changes_replaces_and_a_retained_object_says_what_that_means() -> None:
    before = view(
        k8s("c", "Widget", "w", spec={"size": 1, "color": "red"}),
        k8s("p", "PersistentVolumeClaim", "data", spec={"storageClassName": "cephfs"}),
    )
    after = view(
        k8s("c", "Widget", "w", spec={"size": 2, "color": "red"}),
        k8s("p", "PersistentVolumeClaim", "data", spec={"storageClassName": "ceph-rbd"}),
    )
    before.objects["c"]["options"] = after.objects["c"]["options"] = {"replaceOnChanges": ["spec.size"]}
    before.objects["p"]["options"] = after.objects["p"]["options"] = {"retainOnDelete": True}
    diff = plan_diff.diff(before, after)
    replaced = {o["name"]: (o["immutable"], o["retained"]) for o in diff["replaced"]}
    assert replaced == {"w": (["spec.size"], False), "data": (["spec.storageClassName"], True)}
    text = diff_report.render(diff, "main")
    assert "- PersistentVolumeClaim `data`: `spec.storageClassName` (retained)" in text
    assert "cannot create the new one under the same name" in text
    after.objects["c"]["inputs"]["spec"] = {"size": 1, "color": "blue"}
    assert plan_diff.diff(before, after)["changed"][0]["fields"] == ["spec.color"]  # not under spec.size


def test_ignore_changes_hides_a_change_as_the_engine_diffs_the_old_value() -> None:
    """The keys Keystone rotates itself (keystone-fernet-keys: ignoreChanges data, stringData) and a Deployment
    whose replicas an autoscaler owns: a plan that changes them changes nothing in the cluster."""
    before = view(
        k8s("k", "ConfigMap", "keys", data={"0": "a"}),
        k8s("d", "Deployment", "api", spec={"replicas": 1, "template": {"spec": {"containers": []}}}),
    )
    after = view(
        k8s("k", "ConfigMap", "keys", data={"0": "b"}),
        k8s("d", "Deployment", "api", spec={"replicas": 3, "template": {"spec": {"containers": []}}}),
    )
    before.objects["k"]["options"] = after.objects["k"]["options"] = {"ignoreChanges": ["data", "stringData"]}
    before.objects["d"]["options"] = after.objects["d"]["options"] = {"ignoreChanges": ["spec.replicas"]}
    diff = plan_diff.diff(before, after)
    assert not diff["replaced"] and not diff["changed"]
    after.objects["d"]["inputs"]["spec"]["template"]["spec"]["containers"] = [{"name": "c", "image": "i:2"}]
    assert [(o["name"], o["fields"]) for o in plan_diff.diff(before, after)["changed"]] == [
        ("api", ["spec.template.spec.containers[c]"])
    ]


def test_a_removed_chart_says_which_children_stay() -> None:
    diff = diff_of("dev", operators={"mariadbCrds": {"install": False, "chartVersion": "26.6.0"}})
    [removed] = [o for o in diff["removed"] if o["name"] == "mariadb-operator-crds"]
    assert any("retainOnDelete on each CustomResourceDefinition" in does for does in removed["children"])
    assert "its children: retainOnDelete on each CustomResourceDefinition" in diff_report.render(diff, "main")


def test_a_certificate_change_names_the_pods_it_restarts_and_those_that_take_it_hot() -> None:
    """A Certificate cert-manager issues again (tools/certificate_impact.py): Pulumi rolls nothing for it, so
    what restarts is what its users do; MariaDB's operator replaces its pods, the others reload."""
    settings = stack_settings("staging")
    earlier = plan_of("staging")
    # Another public host for the console: public-tls names it, so cert-manager issues public-tls again.
    later = plan_of(
        "staging", endpoints={**settings["endpoints"], "hosts": {"novncproxy": "console.staging.example.com"}}
    )
    found = {
        c["certificate"]: c for c in certificate_impact.reissued(plan_diff.view_of(earlier), plan_diff.view_of(later))
    }
    assert set(found) == {"public-tls"}, found
    public = found["public-tls"]
    assert public["why"].startswith("spec changed: dnsNames") and public["rolls"] == []
    # staging attaches to its owner's Gateway: nothing of the plan mounts the Secret, and the diff says who reads it.
    assert [u["kind"] for u in public["users"]] == ["outside the plan"], public
    dev = plan_diff.view_of(plan_of("dev"))  # dev creates its Gateway: the listener takes it hot
    assert [(u["kind"], u["rolls"]) for u in certificate_impact.users(dev, "openstack", "public-tls")] == [
        ("Gateway", False)
    ]
    # The MariaDB server's certificate: the operator's resource names it, so its pods roll; the pods that
    # mount the CA bundle (every API) reload without a restart.
    view = plan_diff.view_of(earlier)
    mariadb = {(u["kind"], u["rolls"]) for u in certificate_impact.users(view, "openstack", "mariadb-internal-tls")}
    assert mariadb == {("MariaDB", True)}, mariadb
    bundle = list(certificate_impact.users(view, "openstack", "internal-ca-bundle"))
    assert ("MariaDB", True) in {(u["kind"], u["rolls"]) for u in bundle}
    assert ("RabbitmqCluster", False) in {(u["kind"], u["rolls"]) for u in bundle}
    assert {"keystone-api", "nova-api"} <= {u["name"] for u in bundle if u["kind"] == "Deployment" and not u["rolls"]}
    # A plan with a new Certificate: issued for the first time; the diff.md section says who restarts.
    new = certificate_impact.reissued(plan_diff.view_of(plan_of("prod")), plan_diff.view_of(earlier))
    assert any(c["why"] == "new" for c in new)
    text = "\n".join(certificate_impact.render(new))
    assert "**Certificates cert-manager issues again**" in text and "restarts `MariaDB/mariadb`" in text
