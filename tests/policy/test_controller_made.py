"""Objects only controllers make (controller-made-objects): a ControllerRevision to roll a DaemonSet back
to, a CertificateRequest for a CA to sign; the program declares neither."""

from __future__ import annotations

from typing import Any

from components.tables.roles import Topology, compute_node_pods
from policies.report import load_config

from .builders import node_daemonset, run_policy

STAGING = load_config("staging")
[LIBVIRT] = [pod for pod in compute_node_pods(Topology.POD_PER_SERVICE) if pod.name == "libvirt"]


def revision() -> dict[str, Any]:
    """An old template of libvirt's DaemonSet (an old image), to roll back to."""
    daemonset = node_daemonset(LIBVIRT)
    template = daemonset["spec"]["template"]
    template["spec"]["containers"][0]["image"] = "quay.io/openstack.kolla/nova-libvirt:2024.1-ubuntu-jammy"
    return {
        "apiVersion": "apps/v1",
        "kind": "ControllerRevision",
        "metadata": {"name": "libvirt-5d8f7c9b4", "namespace": "openstack", "labels": daemonset["metadata"]["labels"]},
        "revision": 1,
        "data": {"spec": {"template": {**template, "$patch": "replace"}}},
    }


def test_a_controller_revision_is_refused() -> None:
    [message] = run_policy("controller-made-objects", revision(), STAGING)
    assert message.startswith("ControllerRevision openstack/libvirt-5d8f7c9b4: object: ControllerRevision is not")
    assert "a pod template the pack never judged" in message


def test_a_certificate_request_is_refused() -> None:
    request = {
        "apiVersion": "cert-manager.io/v1",
        "kind": "CertificateRequest",
        "metadata": {"name": "libvirt-tls-compute-1", "namespace": "openstack"},
        "spec": {"request": "LS0t", "issuerRef": {"name": "internal-ca"}},
    }
    [message] = run_policy("controller-made-objects", request, STAGING)
    assert message.startswith("CertificateRequest openstack/libvirt-tls-compute-1: object: CertificateRequest is not")


def test_the_objects_the_program_declares_pass() -> None:
    assert run_policy("controller-made-objects", node_daemonset(LIBVIRT), STAGING) == []
