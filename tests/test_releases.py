"""The releases the program deploys: what differs between them is rendered per release, and every
table that is kept per release (venvs, kolla, namespaces) knows the same releases.

What each release's code makes of the rendered files is proven in tests/real (test_configs.py,
test_commands.py); here the plans say what each release is given.
"""

from __future__ import annotations

from typing import Any

import pytest

from components.mechanism.inifile import parse_ini
from components.settings.releases import DEFAULT_RELEASE, RELEASES, GlanceServer
from tests.conftest import STACKS, plan_of, release_plan, stacks_release
from tests.helpers import containers, objects, settings_problems
from tools.imagecheck.kolla import KOLLA_VERSIONS
from tools.plan import Plan
from tools.release_pins import RELEASES as VENV_RELEASES

FLAMINGO, GAZPACHO = "2025.2", "2026.1"


def _file(plan: Plan, secret: str, name: str) -> str:
    text: str = plan.by_name(secret, "Secret").revealed["stringData"][name]
    return text


def _glance_api(plan: Plan) -> dict[str, Any]:
    [container] = [c for c in containers(objects(plan, "Deployment")["glance-api"]) if c["name"] == "glance-api"]
    return container


def test_every_per_release_table_knows_the_same_releases() -> None:
    assert set(RELEASES) == {FLAMINGO, GAZPACHO}
    assert set(VENV_RELEASES) == set(RELEASES)  # tools/release_pins.py: one venv's pins each
    assert set(KOLLA_VERSIONS) == set(RELEASES)  # tools/imagecheck/kolla.py: one kolla each
    assert stacks_release() == DEFAULT_RELEASE == GAZPACHO
    assert {VENV_RELEASES[r].codename for r in RELEASES} == {RELEASES[r].codename for r in RELEASES}


@pytest.mark.parametrize("release", [FLAMINGO, GAZPACHO])
def test_a_release_gets_its_own_kolla_images(release: str) -> None:
    plan = plan_of("dev", release=release)
    images = {c["image"] for kind in ("Deployment", "Job") for r in objects(plan, kind).values() for c in containers(r)}
    kolla = {image for image in images if image.startswith("quay.io/openstack.kolla/")}
    assert kolla and {image.rsplit(":", 1)[1] for image in kolla} == {f"{release}-ubuntu-noble"}


def test_a_release_the_program_does_not_deploy_is_refused_with_those_it_does() -> None:
    [problem] = [p for p in settings_problems({"release": "2025.1"}) if p.startswith("openstack:release")]
    assert "allowed: 2025.2, 2026.1" in problem


def test_glance_runs_under_uwsgi_from_2026_1_and_as_its_own_server_before() -> None:
    gazpacho, flamingo = plan_of("dev"), plan_of("dev", release=FLAMINGO)
    assert _glance_api(gazpacho)["args"] == ["uwsgi", "--ini", "/etc/glance/glance-api-uwsgi.ini"]
    assert "bind_port" not in parse_ini(_file(gazpacho, "glance-etc", "glance-api.conf"))["DEFAULT"]

    assert _glance_api(flamingo)["args"] == ["glance-api", "--config-file", "/etc/glance/glance-api.conf"]
    files = flamingo.by_name("glance-etc", "Secret").revealed["stringData"]
    assert "glance-api-uwsgi.ini" not in files
    default = parse_ini(files["glance-api.conf"])["DEFAULT"]
    assert (default["bind_host"], default["bind_port"], default["workers"]) == ("0.0.0.0", "9292", "2")
    # The same port and probe as under uWSGI: the Service, routes and policies need no change.
    for plan in (gazpacho, flamingo):
        assert _glance_api(plan)["readinessProbe"]["httpGet"]["port"] == 9292


def test_glance_of_2025_2_cannot_serve_internal_tls_and_settings_say_so() -> None:
    tls = {"internal": {"selfSigned": True}}
    problems = settings_problems({"release": FLAMINGO, "tls": tls})
    [problem] = [p for p in problems if p.startswith("openstack:tls.internal:")]
    assert "glance-api serves no TLS" in problem and "plainText" in problem and "2026.1" in problem
    assert not [p for p in problems if "glance" in p and p is not problem]
    # Internal TLS in plain text is no problem (another problem makes settings_problems find one).
    plain = settings_problems({"release": FLAMINGO, "tls": {"internal": {"plainText": True}}, "ha": "sometimes"})
    assert not [p for p in plain if p.startswith("openstack:tls")]


@pytest.mark.parametrize(
    ("release", "upgrade", "option"),
    [
        (FLAMINGO, None, "tenant_network_types"),
        (GAZPACHO, None, "project_network_types"),
        # While an upgrade from 2025.2 runs, 2025.2's neutron-server still reads ml2_conf.ini.
        (GAZPACHO, {"from": FLAMINGO}, "tenant_network_types"),
    ],
)
def test_the_project_network_types_option_is_spelt_as_the_release_reads_it(
    release: str, upgrade: dict[str, str] | None, option: str
) -> None:
    plan = plan_of("prod", release=release, **({"upgrade": upgrade} if upgrade else {}))
    ml2 = parse_ini(_file(plan, "neutron-etc", "ml2_conf.ini"))["ml2"]
    assert ml2[option] == "vxlan"
    assert set(ml2) & {"tenant_network_types", "project_network_types"} == {option}


@pytest.mark.parametrize("stack", STACKS)
def test_each_stack_has_a_2025_2_variant_that_changes_only_what_the_release_needs(stack: str) -> None:
    variant = release_plan(stack, FLAMINGO)
    assert variant.settings.release == FLAMINGO
    own = plan_of(stack).settings
    same = variant.settings.model_dump(exclude={"release", "tls"}) == own.model_dump(exclude={"release", "tls"})
    assert same
    if RELEASES[FLAMINGO].glance_server is GlanceServer.OWN:
        assert not variant.settings.tls.internal_enabled
    assert variant.settings.tls.public == own.tls.public
