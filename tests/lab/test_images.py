"""A container's PATH finds only its image's commands, linked to this machine's binaries."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import STACKS, plan_of
from tools.cloud.images import IMAGE_BIN, IMAGES, build_layer, restricted_path
from tools.cloud.run import plan_images


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
