"""The check over whole stacks: every container of each stack's plan against its Kolla image, as
kolla builds it for the plan's release."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from components.settings.releases import DEFAULT_RELEASE
from tools.imagecheck.check import Miss, check_container
from tools.imagecheck.contents import ImageContents, load
from tools.imagecheck.pods import Skipped, plan_containers
from tools.plan import Plan, build_plan

STACKS = ("dev", "staging", "prod")
# What the check does not see, by design (the record adds what it could not read).
CANNOT_SEE = (
    "files a program finds by itself: oslo.config defaults (api-paste.ini, rootwrap.conf, policy files), "
    "plugins loaded by entry point or importlib, commands built at run time (subprocess with computed lists)",
    "config values other than absolute paths alone on their line; files a command writes (they are taken as made)",
    "what maintainer scripts do besides update-alternatives (users, directories, dpkg-statoverride)",
    "the distribution's image is taken as noble's Priority: required packages and apt",
    "scripts of the image itself (kolla_start, ...): found, not read; users, modes and ownership of image files",
)


@dataclass
class StackReport:
    stack: str
    release: str = DEFAULT_RELEASE
    containers: int = 0
    images: set[str] = field(default_factory=set)
    commands: int = 0
    files: int = 0
    modules: int = 0
    misses: list[Miss] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    skipped: list[Skipped] = field(default_factory=list)

    def summary(self) -> str:
        return (
            f"stack {self.stack} ({self.release}): {self.containers} containers of {len(self.images)} Kolla images; "
            f"checked {self.commands} commands, {self.files} files, {self.modules} modules; "
            f"{len(self.misses)} missing; {len(self.skipped)} skipped"
        )


def image_name(reference: str) -> str:
    """'quay.io/openstack.kolla/nova-api:2026.1-ubuntu-noble' → 'nova-api'."""
    return reference.rsplit("/", 1)[-1].split("@")[0].split(":")[0]


def kolla_images(plan: Plan, references: Iterable[str]) -> dict[str, str]:
    """The references that are the plan's Kolla images (its settings' image of that name) → name."""
    return {ref: image_name(ref) for ref in references if plan.settings.image(image_name(ref)) == ref}


def _references(plan: Plan) -> set[str]:
    found: set[str] = set()
    for r in plan.custom:
        spec = r.revealed.get("spec")
        if not isinstance(spec, dict):
            continue
        template = spec.get("jobTemplate", {}).get("spec", {}).get("template") or spec.get("template") or {}
        pod = template.get("spec", {}) if isinstance(template, dict) else {}
        for group in ("initContainers", "containers"):
            found.update(c["image"] for c in pod.get(group, []) if "image" in c)
    return found


def check_plans(plans: list[Plan], contents: dict[str, ImageContents] | None = None) -> list[StackReport]:
    """The check of each plan against its release's images; `contents` stands in for the images'
    (tests give small ones)."""
    named = [kolla_images(plan, _references(plan)) for plan in plans]
    wanted: dict[str, set[str]] = {}
    for plan, images in zip(plans, named, strict=True):
        wanted.setdefault(plan.settings.release, set()).update(images.values())
    loaded = {release: contents or load(names, release) for release, names in wanted.items()}
    reports = []
    for plan, images in zip(plans, named, strict=True):
        report = StackReport(plan.stack, plan.settings.release)
        found = plan_containers(plan, images)
        report.skipped = found.skipped
        for container in found.containers:
            name = images[container.image]
            result = check_container(container, name, loaded[plan.settings.release][name])
            report.containers += 1
            report.images.add(name)
            report.commands += len(result.commands)
            report.files += len(result.files)
            report.modules += len(result.modules)
            report.misses += result.misses
            report.notes += [f"{container.where} ({name}): {n}" for n in result.notes]
        reports.append(report)
    return reports


def check_stacks(stacks: Iterable[str] = STACKS, release: str | None = None) -> list[StackReport]:
    """The check of each stack file's plan, as its own release or `release` deploys it (settings
    refuse a stack that release cannot deploy, saying why)."""
    overrides = {"release": release} if release is not None else None
    return check_plans([build_plan(stack, overrides) for stack in stacks])
