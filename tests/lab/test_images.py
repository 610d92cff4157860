"""A container's PATH finds only its image's commands, linked to this machine's binaries; each image
is given the OpenStack virtualenv and layer of its release."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import STACKS, plan_of
from tests.helpers import containers
from tests.lab.cloud.images import (
    IMAGE_BIN,
    IMAGES,
    ReleaseVenvs,
    UnknownReleaseError,
    build_layer,
    image_release,
    layer_name,
    restricted_path,
)
from tests.lab.cloud.plan_images import plan_images
from tools.plan import Plan


def test_a_layer_links_only_the_images_own_commands(tmp_path: Path) -> None:
    image = IMAGES["neutron-l3-agent"]
    commands = {
        "sh": "/bin/sh",  # on this machine at the same path
        "neutron-l3-agent": "/var/lib/kolla/venv/bin/neutron-l3-agent",  # the virtualenv's: mounted, not linked
        "no-such-tool-here": "/usr/bin/no-such-tool-here",  # the image's, not this machine's
    }
    layer = build_layer(image, tmp_path / "venv", tmp_path / "layer", commands)
    linked = {p.name: str(p.readlink()) for p in (layer / IMAGE_BIN.lstrip("/")).iterdir()}
    assert linked == {"sh": "/bin/sh"}
    assert restricted_path(image) == f"/var/lib/kolla/venv/bin:{IMAGE_BIN}"
    assert restricted_path(IMAGES["openvswitch-vswitchd"]) == IMAGE_BIN


@pytest.mark.parametrize("stack", STACKS)
def test_every_image_a_stack_runs_is_in_the_labs_table(stack: str) -> None:
    """A container of an image missing from the table fails to start in the lab (UnknownImageError)."""
    assert plan_images(plan_of(stack)) - set(IMAGES) == set()


# An upgrade runs two releases at once: its checks run the previous release's images, the rest the new one's.
def _references(plan: Plan) -> dict[str, str]:
    """Container name → image reference, over the plan's workloads and Jobs."""
    return {
        f"{r.k8s_name}/{c['name']}": c["image"]
        for r in plan.custom
        if r.kind in ("Deployment", "StatefulSet", "DaemonSet", "Job", "CronJob")
        for c in containers(r)
    }


def test_each_image_runs_with_the_venv_of_its_release(tmp_path: Path) -> None:
    upgrading = plan_of("prod", upgrade={"from": "2025.2"})
    references = _references(upgrading)
    made: list[str] = []

    def ensure(release: str) -> Path:  # stands in for building the venvs (tests/lab/realenv/openstack_venv.py)
        made.append(release)
        return tmp_path / f"venv-{release}"

    venvs = ReleaseVenvs.for_images(references.values(), upgrading.settings.release, ensure)
    assert made == ["2025.2", "2026.1"]
    assert venvs.venv_of(references["keystone-upgrade-check-2026-1/keystone-upgrade-check-2026-1"]) == (
        tmp_path / "venv-2025.2"
    )
    assert venvs.venv_of(references["nova-db-sync/nova-db-sync"]) == tmp_path / "venv-2026.1"
    assert venvs.venv_of(references["keystone-api/keystone-api"]) == tmp_path / "venv-2026.1"
    # A plan of one release needs that release's venv alone.
    assert ReleaseVenvs.for_images(_references(plan_of("dev", release="2025.2")).values(), "2025.2", ensure).venvs == {
        "2025.2": tmp_path / "venv-2025.2"
    }


@pytest.mark.parametrize(
    ("reference", "release"),
    [
        ("quay.io/openstack.kolla/nova-api:2025.2-ubuntu-noble", "2025.2"),
        ("quay.io/openstack.kolla/nova-api:2026.1-ubuntu-noble", "2026.1"),
        # images.tag and images.overrides pin the stack's own release, whatever their tag says.
        ("registry.local/nova-api:2025.2-ubuntu-noble-fix1", "2026.1"),
        ("registry.local/nova-api@sha256:" + "0" * 64, "2026.1"),
        ("rabbitmq:4.2.8-management", "2026.1"),
    ],
)
def test_an_images_release_is_its_kolla_tags_or_the_stacks(reference: str, release: str) -> None:
    assert image_release(reference, "2026.1") == release


def test_an_image_of_a_release_the_lab_has_no_venv_for_is_refused() -> None:
    with pytest.raises(UnknownReleaseError, match=r"2025\.1's, which the program does not deploy"):
        image_release("quay.io/openstack.kolla/keystone:2025.1-ubuntu-noble", "2026.1")


def test_an_images_layer_is_built_per_release_from_that_releases_venv(tmp_path: Path) -> None:
    image = IMAGES["nova-api"]
    layers = {}
    for release in ("2025.2", "2026.1"):
        shipped = tmp_path / f"venv-{release}" / "etc" / "nova"
        shipped.mkdir(parents=True)
        (shipped / "api-paste.ini").write_text(f"# nova of {release}\n")
        reference = f"quay.io/openstack.kolla/nova-api:{release}-ubuntu-noble"
        layers[release] = build_layer(image, shipped.parents[1], tmp_path / "images" / layer_name(reference, release))
    assert layers["2025.2"] != layers["2026.1"]
    for release, layer in layers.items():
        assert (layer / "etc/nova/api-paste.ini").read_text() == f"# nova of {release}\n"
