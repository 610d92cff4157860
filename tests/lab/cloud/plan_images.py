"""The images a run's plans start, the OpenStack venv of each one's release, and each image's commands.

A run may apply several plans to one cloud (tests/lab/cloud/apply.py): an upgrade's deploys a release,
and the next plans run the new one beside the previous release's checks. Every image of every plan
is known before the first pod starts, so the venvs and the image contents (tools/imagecheck) are
made once, up front: an image of a release is one layer (tests/lab/cloud/images.py `layer_name`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from tests.lab.cloud.images import ReleaseVenvs, image_name, image_release, layer_name
from tools.imagecheck.contents import image_software
from tools.plan import Plan
from tools.runtime import Registration

POD_KINDS = ("Deployment", "StatefulSet", "DaemonSet", "Job", "CronJob")


def _pod_spec(r: Registration) -> dict[str, Any]:
    spec = r.revealed["spec"]
    return dict((spec["jobTemplate"]["spec"] if r.kind == "CronJob" else spec)["template"]["spec"])


def plan_references(plan: Plan) -> set[str]:
    """The image references of the plan's containers, init containers included."""
    return {
        c["image"]
        for r in plan.custom
        if r.kind in POD_KINDS
        for c in _pod_spec(r).get("containers", []) + _pod_spec(r).get("initContainers", [])
    }


def plan_images(plan: Plan) -> set[str]:
    """The image names (tests/lab/cloud/images.py's keys) of the plan's containers."""
    return {image_name(reference) for reference in plan_references(plan)}


def release_venvs(plans: Iterable[Plan], stack_release: str, ensure: Callable[[str], Path]) -> ReleaseVenvs:
    """The venv of every release the plans' images run, for a cloud that runs `stack_release` first."""
    releases = {p.settings.release for p in plans} | {
        image_release(ref, p.settings.release) for p in plans for ref in plan_references(p)
    }
    return ReleaseVenvs(stack_release, {release: ensure(release) for release in sorted(releases)})


def image_commands(plans: Iterable[Plan]) -> dict[str, dict[str, str]]:
    """Each Kolla image's commands as Kolla builds it for its release (tools/imagecheck), by layer: a
    container's PATH finds only those."""
    by_release: dict[str, set[str]] = {}
    for plan in plans:
        for reference in plan_references(plan):
            by_release.setdefault(image_release(reference, plan.settings.release), set()).add(image_name(reference))
    return {
        layer_name(name, release): dict(software.executables)
        for release, names in sorted(by_release.items())
        for name, software in image_software(sorted(names), release).items()
    }
