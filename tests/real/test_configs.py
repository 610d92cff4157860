"""Every oslo.config file the program renders, for every stack and every release it deploys, against
that release's real projects.

The mock runtime proves shape; this proves content: `oslo-config-validator` with each
file's namespaces (plus a pass that reads every value through oslo.config's types) must
find zero unknown options, zero invalid values and no namespace it could not load.
Files that are not oslo.config (uWSGI ini, libvirt files, Horizon's Python) are listed
with the reason by `tools.realenv.namespaces.not_oslo_reason`. The stack files name 2026.1;
each is also planned as 2025.2 deploys it (tests/conftest.py release_plan).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest

from components.releases import RELEASES
from tests.conftest import STACKS, release_plan
from tools.realenv.namespaces import not_oslo_reason
from tools.realenv.openstack_venv import OpenStackVenv
from tools.realenv.validator import ValidationResult, validate

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
    # Each validation imports a whole project (seconds of CPU): one per core.
    with ThreadPoolExecutor(max_workers=2) as pool:
        found = pool.map(lambda item: validate(venvs[item[0][0]], item[1]), distinct.items())
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
