"""Manifests read as kubectl reads them: YAML 1.1 booleans (go-yaml v2, which sigs.k8s.io/yaml
uses), duplicate keys refused, and any object with `items` a list whose items are applied
(apimachinery's unstructured decoding), so what kubectl would apply is what the pack judges."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from components.tables.roles import Topology, node_pods
from tools.policycheck import main

from .builders import container, control_plane, node_daemonset, run_policy, stack_config

STAGING = stack_config(Topology.POD_PER_SERVICE)


def run(capsys: pytest.CaptureFixture[str], path: Path, *args: str) -> tuple[int, str, str]:
    status = main([*args, str(path)])
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def privileged_as(word: str) -> str:
    """A control-plane Deployment whose container says privileged with `word`, as a person writes it."""
    text = yaml.safe_dump(control_plane(), sort_keys=False)
    line = "\n          allowPrivilegeEscalation: false\n"
    assert line in text
    return text.replace(line, f"{line}          privileged: {word}\n")


@pytest.mark.parametrize("word", ["y", "Y", "yes", "Yes", "on", "ON", "true", "True"])
def test_yaml_1_1_booleans_are_true_as_kubectl_reads_them(
    word: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "x.yaml"
    path.write_text(privileged_as(word))
    status, out, _err = run(capsys, path)
    assert status == 1, out
    assert "securityContext.privileged=true is not allowed" in out


@pytest.mark.parametrize("word", ["n", "N", "no", "off", "false", '"y"'])
def test_false_and_quoted_words_are_not_true(word: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "x.yaml"
    path.write_text(privileged_as(word))
    status, out, _err = run(capsys, path)
    assert "privileged" not in out
    assert status == 0, out


def test_duplicate_keys_are_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # A reader that keeps the last value would judge hostNetwork false; kubectl refuses the file.
    path = tmp_path / "x.yaml"
    path.write_text(
        "apiVersion: v1\nkind: Pod\nmetadata: {name: p, namespace: openstack}\n"
        "spec:\n  hostNetwork: true\n  containers: [{name: c, image: busybox:1}]\n  hostNetwork: false\n"
    )
    status, out, err = run(capsys, path)
    assert (status, out) == (2, "")
    assert f"policycheck: {path}: not valid YAML" in err and 'duplicate key "hostNetwork"' in err
    assert "line 7" in err


def pod(name: str, *, kind: bool = True) -> dict[str, Any]:
    body: dict[str, Any] = {
        "metadata": {"name": name, "namespace": "openstack"},
        "spec": {"containers": [{"name": "c", "image": "busybox:1", "securityContext": {"privileged": True}}]},
    }
    return {"apiVersion": "v1", "kind": "Pod", **body} if kind else body


def daemonset_without_type() -> dict[str, Any]:
    libvirt = node_daemonset(next(p for p in node_pods(Topology.POD_PER_SERVICE) if p.name == "libvirt"))
    del libvirt["apiVersion"], libvirt["kind"]
    return libvirt


def rogue_daemonset_without_type() -> dict[str, Any]:
    """libvirt's DaemonSet running another image: as a file's DaemonSet it holds no role."""
    rogue = daemonset_without_type()
    rogue["spec"]["template"]["spec"]["containers"][0]["image"] = "docker.io/library/busybox:1.37"
    return rogue


@pytest.mark.parametrize(
    "document",
    [
        # Typed lists, as `kubectl get -o yaml` of one kind prints them: items without kind.
        {"apiVersion": "v1", "kind": "PodList", "items": [pod("p", kind=False)]},
        {"apiVersion": "apps/v1", "kind": "DaemonSetList", "items": [rogue_daemonset_without_type()]},
        # Any object with items is a list to kubectl, whatever its kind says.
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "items": [pod("p")]},
        {"apiVersion": "example.com/v1", "kind": "WidgetList", "items": [pod("p")]},
        # Lists in lists.
        {"apiVersion": "v1", "kind": "List", "items": [{"apiVersion": "v1", "kind": "List", "items": [pod("p")]}]},
    ],
    ids=["PodList", "DaemonSetList", "ConfigMap-with-items", "WidgetList", "nested-List"],
)
def test_every_list_is_flattened_as_kubectl_applies_it(
    document: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "list.yaml"
    path.write_text(yaml.safe_dump(document))
    status, out, _err = run(capsys, path, "--stack", "staging")
    assert status == 1, out
    assert "MANDATORY privileged-containers:" in out


def test_a_typed_list_item_with_half_a_type_is_an_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    item = pod("p", kind=False) | {"kind": "Pod"}  # no apiVersion: kubectl does not fill in half a type
    path = tmp_path / "list.yaml"
    path.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "PodList", "items": [item]}))
    status, _out, err = run(capsys, path)
    assert status == 2 and f"{path} document 1 item 0: apiVersion missing" in err


def test_items_that_are_no_list_are_an_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "list.yaml"
    path.write_text("apiVersion: v1\nkind: PodList\nitems: {a: b}\n")
    status, _out, err = run(capsys, path)
    assert status == 2 and "items is not a list" in err


@pytest.mark.parametrize("list_kind", ["PodList", "DaemonSetList", "List"])
def test_the_pack_judges_the_items_of_a_list_resource(list_kind: str) -> None:
    """pulumi-kubernetes has *List resource types; the engine hands the pack the list whole."""
    item = daemonset_without_type() if list_kind == "DaemonSetList" else pod("p", kind=list_kind == "List")
    api_version = "apps/v1" if list_kind == "DaemonSetList" else "v1"
    document = {"apiVersion": api_version, "kind": list_kind, "metadata": {"name": "l"}, "items": [item]}
    found = run_policy("privileged-containers", document, STAGING)
    assert found and all("(item 0 of " in message for message in found)


def test_a_list_item_holds_no_node_role() -> None:
    """A node pod's DaemonSet as an item of a DaemonSetList: the table's DaemonSets are the program's own."""
    document = {"apiVersion": "apps/v1", "kind": "DaemonSetList", "metadata": {"name": "l"},
                "items": [daemonset_without_type()]}  # fmt: skip
    found = run_policy("privileged-containers", document, STAGING)
    assert found and "an item of a list holds no node role" in found[0]
    # The same DaemonSet on its own holds its role and passes.
    alone = {"apiVersion": "apps/v1", "kind": "DaemonSet", **daemonset_without_type()}
    assert run_policy("privileged-containers", alone, STAGING) == []


def test_the_control_plane_still_passes_as_a_list(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    deployment = control_plane()
    document = {"apiVersion": "apps/v1", "kind": "DeploymentList", "items": [copy.deepcopy(deployment)]}
    path = tmp_path / "list.yaml"
    path.write_text(yaml.safe_dump(document))
    status, out, _err = run(capsys, path, "--stack", "staging")
    assert (status, out.splitlines()[-1]) == (0, "policycheck: 1 objects, 0 violations (0 mandatory)")
    assert container(deployment)["name"] == "keystone-api"


@pytest.mark.parametrize(
    ("listed", "privileged"), [("[*privileged, *confined]", True), ("[*confined, *privileged]", False)]
)
def test_a_merge_key_list_lets_the_first_map_win_as_go_yaml_does(
    listed: str, privileged: bool, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """go-yaml (kubectl's sigs.k8s.io/yaml, the Pulumi CLI) takes the first listed map's value; PyYAML the last."""
    text = yaml.safe_dump(control_plane(), sort_keys=False)
    line = "        securityContext:\n"
    assert line in text
    anchors = "x-privileged: &privileged {privileged: true}\nx-confined: &confined {privileged: false}\n"
    path = tmp_path / "x.yaml"
    path.write_text(anchors + text.replace(line, f"{line}          <<: {listed}\n", 1))
    status, out, _err = run(capsys, path)
    assert ("securityContext.privileged=true is not allowed" in out) is privileged, out
    assert status == (1 if privileged else 0), out


def _alias_bomb(levels: int) -> str:
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]" for i in range(1, levels)]
    body = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: bomb, namespace: openstack}\ndata: {x: y}\n"
    return "\n".join(lines) + "\n" + body + f"bomb: *a{levels - 1}\n"


def test_an_alias_bomb_is_refused_at_once_as_go_yaml_refuses_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """10^9 nodes once expanded: refused from the node tree, before any value is built."""
    path = tmp_path / "bomb.yaml"
    path.write_text(_alias_bomb(9))
    status, _out, err = run(capsys, path)
    assert status == 2
    assert "excessive aliasing" in err and "Traceback" not in err


def test_aliases_that_expand_a_little_are_read(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "small.yaml"
    path.write_text(_alias_bomb(3))  # 10^3 nodes: an ordinary use of anchors
    status, out, err = run(capsys, path)
    assert status == 0 and "aliasing" not in err
    assert "1 objects, 0 violations" in out


def test_nesting_deeper_than_the_reader_recurses_is_a_clear_refusal(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "deep.yaml"
    depth = 5000
    path.write_text(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: deep}\ndata: " + "[" * depth + "]" * depth + "\n"
    )
    status, _out, err = run(capsys, path)
    assert status == 2
    assert "nested too deeply" in err and "Traceback" not in err
