"""tools.policycheck: manifests in, violations out, exit 1 on a mandatory one."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from components.tables.roles import Topology, node_pods
from tools.policycheck import main

from .builders import container, control_plane, node_daemonset

REPO = Path(__file__).resolve().parents[2]


def write(path: Path, *documents: object) -> Path:
    path.write_text("---\n".join(yaml.safe_dump(d) for d in documents))
    return path


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, list[str], str]:
    status = main(list(args))
    captured = capsys.readouterr()
    return status, captured.out.splitlines(), captured.err


def test_multi_document_files_with_every_object_as_its_resource_type(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    privileged = control_plane()
    container(privileged)["securityContext"]["privileged"] = True
    config_map = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": "openstack"},
                  "data": {"nova.conf": "[DEFAULT]\npassword = hunter2\n"}}  # fmt: skip
    path = write(tmp_path / "cloud.yaml", control_plane(), None, privileged, config_map)
    status, out, _err = run(capsys, str(path))
    assert status == 1
    assert out[-1] == "policycheck: 3 objects, 2 violations (2 mandatory)"
    assert out[0].startswith(
        "MANDATORY privileged-containers: Deployment openstack/keystone-api: container 'keystone-api': "
        "spec.template.spec.containers[0].securityContext.privileged=true is not allowed"
    )
    assert out[0].endswith(f"[{path}#3]")  # file and document number
    assert out[1].startswith("MANDATORY no-plaintext-passwords: ConfigMap openstack/c: data['nova.conf'] line 2")


def test_node_pods_of_the_stacks_topology_pass_and_others_fail(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    libvirt = node_daemonset(next(p for p in node_pods(Topology.POD_PER_SERVICE_HOST_PID) if p.name == "libvirt"))
    path = write(tmp_path / "libvirt.yaml", {"apiVersion": "v1", "kind": "List", "items": [libvirt]})
    status, out, _err = run(capsys, "--stack", "prod", str(path))
    assert (status, out) == (0, ["policycheck: 1 objects, 0 violations (0 mandatory)"])
    status, out, _err = run(capsys, "--stack", "staging", str(path))
    assert status == 1
    assert any("spec.template.spec.hostPID=true is not allowed" in line for line in out)


def test_hygiene_is_advice_in_dev_and_a_gate_in_prod(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    unpinned = control_plane()
    container(unpinned)["image"] = "quay.io/openstack.kolla/keystone:latest"
    path = write(tmp_path / "keystone.yaml", unpinned)
    assert run(capsys, "--stack", "dev", str(path))[0] == 0
    status, out, _err = run(capsys, "--stack", "prod", str(path))
    assert status == 1
    assert out[0].startswith("MANDATORY image-pinned: Deployment openstack/keystone-api")


@pytest.mark.parametrize(
    ("content", "error"),
    [
        (None, "cannot read {path}: No such file or directory"),
        ("kind: [unclosed", "{path}: not valid YAML"),
        ("- just\n- a list\n", "{path} document 1: not a Kubernetes object (a YAML mapping), but list"),
        ("metadata: {name: x}\n", "{path} document 1: apiVersion and kind missing"),
        ("apiVersion: v1\nkind: List\nitems: [{kind: Pod}]\n", "{path} document 1 item 0: apiVersion missing"),
    ],
)
def test_unreadable_input_is_a_clear_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: str | None, error: str
) -> None:
    path = tmp_path / "input.yaml"
    if content is not None:
        path.write_text(content)
    status, out, err = run(capsys, str(path))
    assert (status, out) == (2, [])
    assert err.startswith("policycheck: " + error.format(path=path))


def test_an_unknown_stack_is_a_clear_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    status, _out, err = run(capsys, "--stack", "qa", str(write(tmp_path / "x.yaml", control_plane())))
    assert status == 2
    assert "no policy config for stack 'qa'" in err and "(stacks: dev, prod, staging)" in err


def test_runs_as_a_module(tmp_path: Path) -> None:
    privileged = control_plane()
    container(privileged)["securityContext"]["privileged"] = True
    path = write(tmp_path / "x.yaml", privileged)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    done = subprocess.run(
        [sys.executable, "-m", "tools.policycheck", "--stack", "staging", str(path)],
        cwd=REPO, env=env, capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert done.returncode == 1, done.stderr
    assert done.stdout.startswith("MANDATORY privileged-containers: Deployment openstack/keystone-api")
