"""Pods as the lab's kubelet makes them: config volumes read-only, names by dnsPolicy, loud about the unknown."""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import pytest

from tests.lab.cloud.images import ReleaseVenvs
from tests.lab.cloud.node import Node
from tests.lab.cloud.pods import NODE_RESOLV_CONF, PodFactory, PodSpecError, secret_data

IMAGE = "quay.io/openstack.kolla/keystone:2026.1-ubuntu-noble"
OBJECTS = {("Secret", "keys"): {"0": "key0"}, ("ConfigMap", "env"): {"A": "1", "bad key": "x"}}


def lookup(kind: str, name: str) -> dict[str, str]:
    if (kind, name) not in OBJECTS:
        raise PodSpecError(f"{kind} {name} does not exist")
    return OBJECTS[(kind, name)]


def pod(**spec: Any) -> dict[str, Any]:
    container = {"name": "c", "image": IMAGE, "command": ["true"], **spec.pop("container", {})}
    return {"metadata": {"labels": {"app": "x"}},
            "spec": {"containers": [container], "enableServiceLinks": False, "automountServiceAccountToken": False,
                     **spec}}  # fmt: skip


@pytest.fixture
def factory(tmp_path: Path) -> tuple[PodFactory, Node]:
    node = Node("node-cp", 1, tmp_path / "nodes" / "node-cp", {})
    return PodFactory(ReleaseVenvs("2026.1", {"2026.1": tmp_path / "venv"}), lookup, tmp_path / "logs"), node


def build(setup: tuple[PodFactory, Node], template: dict[str, Any], host: bool = False) -> Any:
    factory, node = setup
    if host:
        template["spec"]["hostNetwork"] = True
    return factory.build("Deployment", "w", template, "w-1", "10.244.1.5", node)


def test_secret_volumes_are_read_only_whatever_the_pod_says(factory: tuple[PodFactory, Node]) -> None:
    template = pod(
        volumes=[{"name": "keys", "secret": {"secretName": "keys"}}, {"name": "scratch", "emptyDir": {}}],
        container={"volumeMounts": [{"name": "keys", "mountPath": "/keys", "readOnly": False},
                                    {"name": "scratch", "mountPath": "/scratch"}]},
    )  # fmt: skip
    mounts = {m.target: m for m in build(factory, template).containers[0].container.mounts}
    assert mounts["/keys"].read_only and not mounts["/scratch"].read_only
    assert (mounts["/keys"].source / "0").read_text() == "key0"


def test_names_are_resolved_as_the_dns_policy_says(factory: tuple[PodFactory, Node]) -> None:
    def resolv(template: dict[str, Any], host: bool = False) -> str:
        plan = build(factory, template, host)
        mount = next(m for m in plan.containers[0].container.mounts if m.target == "/etc/resolv.conf")
        return mount.source.read_text()

    assert "nameserver 10.96.0.10" in resolv(pod())
    assert resolv(pod(), host=True) == NODE_RESOLV_CONF  # ClusterFirst on the host network: the node's
    assert "nameserver 10.96.0.10" in resolv(pod(dnsPolicy="ClusterFirstWithHostNet"), host=True)
    assert resolv(pod(dnsPolicy="Default")) == NODE_RESOLV_CONF


def test_env_from_takes_valid_names_with_their_prefix(factory: tuple[PodFactory, Node]) -> None:
    plan = build(factory, pod(container={"envFrom": [{"configMapRef": {"name": "env"}, "prefix": "P_"}]}))
    env = plan.containers[0].container.env
    assert env["P_A"] == "1" and "P_bad key" not in env
    assert env["KUBERNETES_SERVICE_HOST"] == "10.96.0.1"


def test_what_the_lab_does_not_implement_stops_the_pod(factory: tuple[PodFactory, Node]) -> None:
    with pytest.raises(PodSpecError, match="shareProcessNamespace"):
        build(factory, pod(shareProcessNamespace=True))
    with pytest.raises(PodSpecError, match="stdin"):
        build(factory, pod(container={"stdin": True}))
    with pytest.raises(PodSpecError, match="grpc"):
        build(factory, pod(container={"readinessProbe": {"grpc": {"port": 1}}}))
    with pytest.raises(PodSpecError, match="no API server"):
        build(factory, pod(automountServiceAccountToken=True))


def test_probes_by_port_name(factory: tuple[PodFactory, Node]) -> None:
    container = {"ports": [{"name": "api", "containerPort": 5000}], "startupProbe": {"tcpSocket": {"port": "api"}}}
    plan = build(factory, pod(container=container))
    assert plan.containers[0].startup.port == 5000
    assert plan.ports == {"api": 5000}


def test_secret_data_reads_data_or_string_data() -> None:
    assert secret_data({"data": {"k": base64.b64encode(b"v").decode()}}) == {"k": "v"}
    assert secret_data({"stringData": {"k": "v"}}) == {"k": "v"}


def test_mount_targets_follow_symlinks_inside_the_container_root(tmp_path: Path) -> None:
    from tests.lab.cloud.container import in_root

    layer, base = tmp_path / "layer", tmp_path / "base"
    (base / "run").mkdir(parents=True)
    (base / "var").mkdir()
    (base / "var" / "run").symlink_to("/run")  # as Debian and Ubuntu have it
    (layer / "etc").mkdir(parents=True)
    (layer / "etc" / "conf").symlink_to("../opt/conf")  # the image's own link wins over the base
    assert in_root("/var/run/secrets/kubernetes.io/serviceaccount", (layer, base)) == (
        "/run/secrets/kubernetes.io/serviceaccount"
    )
    assert in_root("/etc/conf/x", (layer, base)) == "/opt/conf/x"
    assert in_root("/plain/path", (layer, base)) == "/plain/path"


def test_a_directory_is_mounted_before_the_files_mounted_into_it(factory: tuple[PodFactory, Node]) -> None:
    """containerd sorts mounts by depth: a file's subPath mount over an emptyDir that comes after it survives."""
    template = pod(
        volumes=[{"name": "keys", "secret": {"secretName": "keys"}}, {"name": "dir", "emptyDir": {}}],
        container={"volumeMounts": [{"name": "keys", "mountPath": "/etc/k/0", "subPath": "0"},
                                    {"name": "dir", "mountPath": "/etc/k"}]},
    )  # fmt: skip
    targets = [m.target for m in build(factory, template).containers[0].container.mounts]
    assert targets.index("/etc/k") < targets.index("/etc/k/0")


def test_args_alone_run_under_the_images_entrypoint(factory: tuple[PodFactory, Node]) -> None:
    template = pod()
    container = template["spec"]["containers"][0]
    container["args"] = container.pop("command")
    plan = build(factory, template)
    assert plan.containers[0].container.command == ["dumb-init", "--single-child", "--", "true"]
    del container["args"]
    with pytest.raises(PodSpecError, match="neither command nor args"):
        build(factory, template)
