"""Every oslo.config file the program renders, for every stack and every release it deploys, against
that release's real projects.

The mock runtime proves shape; this proves content: `oslo-config-validator` with each
file's namespaces (plus a pass that reads every value through oslo.config's types) must
find zero unknown options, zero invalid values and no namespace it could not load.
Files that are not oslo.config (uWSGI ini, libvirt files, Horizon's Python) are listed
with the reason by `tests.lab.realenv.namespaces.not_oslo_reason`. The stack files name 2026.1;
each is also planned as 2025.2 deploys it (tests/conftest.py release_plan).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from components.settings.releases import DEFAULT_RELEASE, RELEASES
from components.settings.upgrade import sources
from tests.conftest import STACKS, plan_of, release_plan
from tests.helpers import containers, objects, pod_template
from tests.lab.realenv.namespaces import not_oslo_reason
from tests.lab.realenv.openstack_venv import OpenStackVenv
from tests.lab.realenv.validator import ValidationResult, config_check, validate, validate_all

REPORT = Path(__file__).resolve().parents[2] / "build" / "real" / "config-validation.txt"


@dataclass(frozen=True)
class Rendered:
    release: str
    stack: str
    secret: str  # the <service>-etc Secret that holds the file
    name: str
    text: str

    @property
    def label(self) -> str:
        return f"{self.release}/{self.stack}/{self.secret}/{self.name}"


def rendered_files() -> list[Rendered]:
    files = []
    for release in RELEASES:
        for stack in STACKS:
            for r in release_plan(stack, release).custom:
                if r.kind == "Secret" and r.k8s_name is not None and r.k8s_name.endswith("-etc"):
                    for name, text in r.revealed["stringData"].items():
                        files.append(Rendered(release, stack, r.k8s_name, name, text))
    return files


OSLO_FILES = [f for f in rendered_files() if not_oslo_reason(f.name) is None]


@pytest.fixture(scope="module")
def results(
    venv_of: Callable[[str], OpenStackVenv], tmp_path_factory: pytest.TempPathFactory
) -> dict[str, ValidationResult]:
    """Validate each distinct file once per release; stacks often render the same text."""
    root = tmp_path_factory.mktemp("configs")
    distinct: dict[tuple[str, str, str], Path] = {}
    for rendered in OSLO_FILES:
        key = (rendered.release, rendered.name, rendered.text)
        if key not in distinct:
            path = root / str(len(distinct)) / rendered.name
            path.parent.mkdir()
            path.write_text(rendered.text)
            distinct[key] = path
    venvs = {release: venv_of(release) for release in RELEASES}
    started = time.monotonic()
    # One process per release and namespace list, two at a time (validate_all).
    found = validate_all([config_check(venvs[release], path) for (release, _, _), path in distinct.items()])
    verdicts = dict(zip(distinct, found, strict=True))
    elapsed = time.monotonic() - started
    by_label = {f.label: verdicts[(f.release, f.name, f.text)] for f in OSLO_FILES}
    _write_report(by_label, len(distinct), elapsed)
    return by_label


def _write_report(results: dict[str, ValidationResult], distinct: int, seconds: float) -> None:
    skipped = sorted({(f.name, not_oslo_reason(f.name)) for f in rendered_files() if not_oslo_reason(f.name)})
    lines = [
        f"{len(results)} rendered oslo.config files over {len(STACKS)} stacks and releases {', '.join(RELEASES)} "
        f"({distinct} distinct) "
        f"validated in {seconds:.0f}s; {sum(r.checked for r in results.values())} options checked "
        f"({sum(r.checked for r in {id(r): r for r in results.values()}.values())} in distinct files)",
        *(f"  {label}: {r.checked} options, {'ok' if r.ok else 'FAILED'}" for label, r in sorted(results.items())),
        "not oslo.config files (validated elsewhere or not at all):",
        *(f"  {name}: {why}" for name, why in skipped),
    ]
    REPORT.parent.mkdir(parents=True, exist_ok=True)
    REPORT.write_text("\n".join(lines) + "\n")


@pytest.mark.parametrize("release", RELEASES)
def test_every_stack_renders_the_expected_oslo_files(release: str) -> None:
    names = {(f.stack, f.secret, f.name) for f in OSLO_FILES if f.release == release}
    for stack in STACKS:
        assert (stack, "keystone-etc", "keystone.conf") in names
        assert (stack, "nova-etc", "nova.conf") in names
        assert (stack, "neutron-etc", "ml2_conf.ini") in names
        assert (stack, "compute-etc", "openvswitch_agent.ini") in names
        assert (stack, "glance-etc", "glance-api.conf") in names
    assert ("staging", "cinder-etc", "cinder.conf") in names
    assert not [n for n in names if n[0] == "dev" and n[1] == "cinder-etc"]


@pytest.mark.parametrize("rendered", OSLO_FILES, ids=[f.label for f in OSLO_FILES])
def test_no_unknown_option_or_invalid_value(rendered: Rendered, results: dict[str, ValidationResult]) -> None:
    result = results[rendered.label]
    assert result.checked > 0
    assert result.ok, result.summary()


@pytest.mark.parametrize("release", RELEASES)
def test_the_validator_would_catch_a_wrong_option(
    release: str, venv_of: Callable[[str], OpenStackVenv], tmp_path: Path, results: dict[str, ValidationResult]
) -> None:
    """The same path the stacks' files took, with one mistake added: it must be found."""
    nova = next(f for f in OSLO_FILES if f.name == "nova.conf" and f.release == release)
    broken = tmp_path / "nova.conf"
    broken.write_text(nova.text + "\n[libvirt]\nvirt_typo = kvm\n[quota]\ninstances = lots\n")
    result = validate(venv_of(release), broken)
    assert ("libvirt", "virt_typo") in result.unknown
    assert [i[:2] for i in result.invalid] == [("quota", "instances")]
    print(REPORT.read_text())  # the figures, in the test log


def _read_by_the_previous_release(stack: str, previous: str) -> list[Rendered]:
    """The oslo.config files that the Jobs running `previous`'s images read during an upgrade from it:
    rendered for the new release, read by the previous release's code (its preflight checks)."""
    plan = plan_of(stack, upgrade={"from": previous})
    found = {}
    for job in objects(plan, "Job").values():
        if not any(c["image"].endswith(":" + RELEASES[previous].kolla_tag) for c in containers(job)):
            continue
        spec = pod_template(job, revealed=True)["spec"]
        secrets = {v["name"]: v["secret"]["secretName"] for v in spec["volumes"] if "secret" in v}
        for mount in (m for c in spec["containers"] for m in c.get("volumeMounts", [])):
            secret, name = secrets.get(mount["name"]), mount.get("subPath")
            if secret and secret.endswith("-etc") and name and not_oslo_reason(name) is None:
                text = plan.by_name(secret, "Secret").revealed["stringData"][name]
                found[(secret, name)] = Rendered(previous, stack, secret, name, text)
    return list(found.values())


# The upgrades into the stack files' release from a release the program deploys (2025.2 → 2026.1).
UPGRADES = [(stack, prev) for stack in ("prod", "dev") for prev in sources(DEFAULT_RELEASE) if prev in RELEASES]


@pytest.mark.parametrize(("stack", "previous"), UPGRADES)
def test_the_previous_releases_checks_read_files_it_understands(
    stack: str, previous: str, venv_of: Callable[[str], OpenStackVenv], tmp_path: Path
) -> None:
    """During an upgrade the previous release's Jobs (keystone-manage db_sync --check, the online
    data migrations ...) read the new release's files: each must hold no value the previous
    release's types refuse, and no option it does not know, which it would ignore (one added
    later must be judged: harmless to those Jobs, or rendered the previous way meanwhile as
    components/settings/releases.py does for [ml2])."""
    files = _read_by_the_previous_release(stack, previous)
    assert {f.name for f in files} >= {"keystone.conf", "nova.conf", "placement.conf"}
    checks = []
    for rendered in files:
        path = tmp_path / rendered.secret / rendered.name
        path.parent.mkdir(exist_ok=True)
        path.write_text(rendered.text)
        checks.append(config_check(venv_of(previous), path))
    for result in validate_all(checks):
        assert result.checked > 0
        assert result.ok, result.summary()
