"""The service catalog: plain data the pack can import, and what the plan really deploys."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from components.cloud.graph import steps_of
from components.cloud.stack_config import parse_settings
from components.settings.model import OPTIONAL_SERVICES, Settings, SettingsError
from components.tables import catalog
from policies.settings import PackSettings
from tests.conftest import plan_of
from tests.helpers import objects

REPO = Path(__file__).resolve().parents[1]


def test_the_catalog_imports_with_the_standard_library_alone() -> None:
    """-S: no site-packages, so pydantic, pulumi and the rest are not there (as in the engine's pack)."""
    run = subprocess.run(
        [sys.executable, "-S", "-c", "import components.tables.catalog, components.tables.roles"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=False,
    )
    assert run.returncode == 0, run.stderr


def test_the_switches_are_the_catalogs_optional_services_and_refuse_anything_else() -> None:
    """The model is made from the catalog at import; it must still refuse unknown keys and unmet needs."""
    assert set(Settings().services.model_dump()) == {"keystone", *OPTIONAL_SERVICES}
    with pytest.raises(SettingsError, match=r"openstack:services\.heat: unknown setting"):
        parse_settings({"services": {"heat": True}})
    with pytest.raises(SettingsError, match="nova needs glance to be enabled"):
        parse_settings({"services": {"glance": False}})
    assert parse_settings({"services": {"horizon": False}}).services.enabled() == tuple(
        name for name in OPTIONAL_SERVICES if name != "horizon"
    )


def test_a_service_with_a_schema_runs_a_db_sync_job_and_one_without_none() -> None:
    plan = plan_of("prod")
    jobs = objects(plan, "Job")
    for spec in plan.graph.specs:
        has_sync = any(step.name == f"{spec.name}-db-sync" for step in steps_of(spec, plan.settings))
        assert has_sync == bool(catalog.entry(spec.name).databases), spec.name
        assert (f"{spec.name}-db-sync" in jobs) == has_sync


def test_the_pack_knows_api_pods_and_database_services_as_the_plan_labels_them() -> None:
    """Its defaults come from the catalog; here they are checked against the planned objects."""
    plan, pack = plan_of("prod"), PackSettings.from_config({})
    deployments = objects(plan, "Deployment")
    services = objects(plan, "Service")
    for entry in catalog.SERVICES:
        for api in entry.apis:
            labels = deployments[api].inputs["metadata"]["labels"]
            assert labels["app.kubernetes.io/component"] in pack.api_components, api
            assert api in services, f"{api} serves its API behind a Service of its name"
    synced = {
        r.inputs["metadata"]["labels"]["app.kubernetes.io/name"]
        for n, r in objects(plan, "Job").items()
        if n.endswith("-db-sync")
    }
    assert set(pack.database_services) == synced


def test_every_control_plane_image_runs_as_its_services_kolla_user() -> None:
    plan = plan_of("prod")
    users = catalog.image_users()
    for spec in plan.graph.specs:
        own = set(catalog.entry(spec.name).images)
        images = {step.image for step in steps_of(spec, plan.settings)}
        images |= {p.image for p in spec.processes if p.node_pod is None}
        for image in images:
            assert image in own or image in catalog.TOOL_IMAGES or spec.name == "compute", (spec.name, image)
            assert image in users, image


def test_a_catalog_entry_that_needs_an_unknown_service_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    broken = (*catalog.SERVICES, catalog.ServiceEntry("heat", "components.heat:heat", needs=("keystone", "barbican")))
    monkeypatch.setattr(catalog, "SERVICES", broken)
    monkeypatch.setattr(catalog, "BY_NAME", {e.name: e for e in broken})
    with pytest.raises(ValueError, match=r"heat needs unknown services \['barbican'\]"):
        catalog._check()


def test_a_catalog_entry_whose_spec_is_no_function_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    from components.services import specs as services

    heat = catalog.ServiceEntry("heat", "components.mechanism.oslo:MARIADB")
    monkeypatch.setitem(catalog.BY_NAME, "heat", heat)
    with pytest.raises(LookupError, match=r"heat's spec 'components.mechanism.oslo:MARIADB' is no function"):
        services.spec_builder("heat")


def test_services_switch_on_and_off_by_catalog_name_only() -> None:
    switches = Settings().services
    assert switches.on("keystone") and switches.on("nova")
    with pytest.raises(KeyError, match="no service 'heat'"):
        switches.on("heat")
