"""Tempest against the lab, without the lab: tempest.conf from a plan and a cloud's facts, the tests
selected, and the results classed (tests/lab/cloud/tempest_conf.py, tempest_limits.py)."""

from __future__ import annotations

import re
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from components.mechanism.inifile import parse_ini
from tests.conftest import plan_of
from tests.lab.cloud.__main__ import main as cloud_cli
from tests.lab.cloud.tempest_conf import (
    LVM_DRIVER,
    NO_SSH_GUEST,
    RBD_DRIVER,
    _volume_management,
    narrowed,
    selection,
    tempest_conf,
    volume_backend_runs,
)
from tests.lab.cloud.tempest_discover import (
    ALT_IMAGE,
    GUEST_VCPUS,
    MULTIATTACH_TYPE,
    alt_image,
    guest_vcpus,
    multiattach_type,
)
from tests.lab.cloud.tempest_limits import NO_SSH_LOGIN, LabLimit, excluded, summarize, volume_backend_tests
from tests.lab.cloud.tempest_run import TempestRequest
from tests.lab.realenv.openstack_venv import VenvRecipe, recipe
from tests.lab.realenv.tempest_venv import TEMPEST
from tools.plan import Plan
from tools.release_pins import RELEASES

ADMIN = {
    "OS_AUTH_URL": "http://keystone-api.openstack.svc.cluster.local:5000/v3",
    "OS_USERNAME": "admin",
    "OS_PASSWORD": "s3cret",
    "OS_PROJECT_NAME": "admin",
    "OS_USER_DOMAIN_NAME": "Default",
    "OS_PROJECT_DOMAIN_NAME": "Default",
    "OS_REGION_NAME": "RegionOne",
    "OS_INTERFACE": "internal",
}
FACTS: dict[str, Any] = {
    "image": "image-id",
    "image_alt": "image-alt-id",
    "flavor": "flavor-id",
    "flavor_alt": "flavor-alt-id",
    "public_network": "public-id",
    "hypervisors": 1,
    "hypervisor_types": ["QEMU"],
    "microversions": {
        "compute": {"min": "2.1", "max": "2.96"},
        "placement": {"min": "1.0", "max": "1.39"},
        "volume": {"min": "3.0", "max": "3.70"},
    },
    "extensions": {"identity": ["OS-EC2"], "network": ["router", "port-security"], "volume": ["OS-SCH-HNT"]},
    "image_stores": ["file"],
    "volume_catalog_type": "volumev3",
    "volume_type_multiattach": "multiattach",
}
NO_LVM = {"cinder-volume": "no device-mapper here", "iscsid-kvm-general": "no iSCSI"}
SMOKE_ID = "tempest.api.compute.servers.test_create_server.ServersTestJSON.test_list_servers[id-9a43,smoke]"
PLAIN_ID = "tempest.api.compute.servers.test_create_server.ServersTestJSON.test_host_name_is_same[id-ac1a]"
VOLUME_ID = "tempest.api.volume.test_versions.VersionsTest.test_list_versions[id-77838fc4,smoke]"


def _conf(
    stack: str = "prod", facts: dict[str, Any] = FACTS, cannot_run: dict[str, str] = NO_LVM, plan: Plan | None = None
) -> Any:
    return tempest_conf(plan or plan_of(stack), ADMIN, facts, cannot_run, Path("/work"))


def test_the_conf_reaches_the_cloud_as_its_admin_through_the_internal_endpoints() -> None:
    conf = parse_ini(_conf().text)
    assert conf["identity"]["uri_v3"] == ADMIN["OS_AUTH_URL"]
    assert conf["auth"]["admin_password"] == "s3cret" and conf["auth"]["admin_project_name"] == "admin"
    for section in ("identity", "compute", "image", "network", "volume", "placement"):
        endpoint = conf[section].get("endpoint_type", conf[section].get("v3_endpoint_type"))
        assert endpoint == "internal", section
        assert conf[section]["region"] == "RegionOne", section
    assert conf["volume"]["catalog_type"] == "volumev3"  # as the cloud registered Cinder


def test_the_conf_uses_what_the_cloud_reports() -> None:
    conf = parse_ini(_conf().text)
    assert (conf["compute"]["image_ref"], conf["compute"]["flavor_ref"]) == ("image-id", "flavor-id")
    assert conf["compute"]["image_ref_alt"] == "image-alt-id"
    assert conf["compute"]["flavor_ref_alt"] == "flavor-alt-id"
    assert conf["compute"]["max_microversion"] == "2.96" and conf["volume"]["max_microversion"] == "3.70"
    assert conf["network"]["public_network_id"] == "public-id"
    assert conf["network-feature-enabled"]["api_extensions"] == "router,port-security"
    assert conf["network-feature-enabled"]["port_security"] == "true"
    assert conf["volume-feature-enabled"]["api_extensions"] == "OS-SCH-HNT"
    assert conf["identity-feature-enabled"]["api_extensions"] == "OS-EC2"
    assert conf["compute"]["min_compute_nodes"] == "1"


def test_features_follow_the_deployment_and_every_one_turned_off_says_why() -> None:
    found = _conf()
    conf = parse_ini(found.text)
    services = conf["service_available"]
    assert (services["cinder"], services["neutron"], services["swift"]) == ("true", "true", "false")
    # prod backs volumes up to Ceph; staging deploys no cinder-backup.
    assert conf["volume-feature-enabled"]["backup"] == "true"
    staging = _conf("staging")
    assert parse_ini(staging.text)["volume-feature-enabled"]["backup"] == "false"
    assert "cinder-backup" in staging.features_off["volume-feature-enabled.backup"]
    assert conf["validation"]["run_validation"] == "false"
    assert found.features_off["validation.run_validation"] == NO_SSH_GUEST
    # One hypervisor: no live migration; two: live migration. Never a resize or cold migration: no
    # SSH between compute nodes (nor resizing to the same host).
    assert conf["compute-feature-enabled"]["live_migration"] == "false"
    assert "1 compute host" in found.features_off["compute-feature-enabled.live_migration"]
    two = parse_ini(_conf(facts={**FACTS, "hypervisors": 2}).text)["compute-feature-enabled"]
    assert two["live_migration"] == "true"
    assert (two["resize"], two["cold_migration"]) == ("false", "false")
    assert "SSH" in found.features_off["compute-feature-enabled.cold_migration"]
    # libvirt's stable device rescue where the hypervisors are libvirt's, and only there.
    assert conf["compute-feature-enabled"]["stable_rescue"] == "true"
    other = _conf(facts={**FACTS, "hypervisor_types": ["ironic"]})
    assert parse_ini(other.text)["compute-feature-enabled"]["stable_rescue"] == "false"
    assert "ironic" in other.features_off["compute-feature-enabled.stable_rescue"]
    features = [(s, o) for s in conf.sections() if s.endswith("-feature-enabled") for o in conf[s]]
    turned_off = {f"{s}.{o}" for s, o in features if o not in conf.defaults() and conf[s][o] == "false"}
    assert "compute-feature-enabled.vnc_console" in turned_off
    assert turned_off <= found.features_off.keys(), turned_off - found.features_off.keys()


def test_block_migration_only_where_every_node_group_keeps_its_disks_locally() -> None:
    # prod's VM disks are in Ceph: nova-compute refuses to block-migrate them (the full run's 400
    # "Block migration can not be used with shared storage" when the conf said otherwise).
    assert plan_of("prod").settings.compute.ephemeral_storage == "rbd"
    two = {**FACTS, "hypervisors": 2}
    prod = _conf(facts=two)
    assert parse_ini(prod.text)["compute-feature-enabled"]["block_migration_for_live_migration"] == "false"
    assert "rbd" in prod.features_off["compute-feature-enabled.block_migration_for_live_migration"]
    staging = parse_ini(_conf("staging", facts=two).text)["compute-feature-enabled"]
    assert staging["block_migration_for_live_migration"] == "true"


def test_volume_backed_live_migration_where_volumes_run_and_servers_can_move() -> None:
    two = {**FACTS, "hypervisors": 2}
    assert (
        parse_ini(_conf(facts=two, cannot_run={}).text)["compute-feature-enabled"]["volume_backed_live_migration"]
        == "true"
    )
    no_backend = _conf(facts=two)  # NO_LVM: cinder-volume does not run
    assert parse_ini(no_backend.text)["compute-feature-enabled"]["volume_backed_live_migration"] == "false"
    assert "volume backend" in no_backend.features_off["compute-feature-enabled.volume_backed_live_migration"]
    one = _conf(cannot_run={})
    assert parse_ini(one.text)["compute-feature-enabled"]["volume_backed_live_migration"] == "false"


def test_multiattach_where_the_default_backend_reports_it_and_volumes_run() -> None:
    # prod's default volume type is Ceph's RBD (the full set skipped the multiattach tests when it was off).
    prod_conf = parse_ini(_conf(cannot_run={}).text)
    assert prod_conf["compute-feature-enabled"]["volume_multiattach"] == "true"
    # Its tests make their volumes of the type discovery made: without it they attach a plain volume twice.
    assert prod_conf["volume"]["volume_type_multiattach"] == MULTIATTACH_TYPE
    untyped = _conf(cannot_run={}, facts={k: v for k, v in FACTS.items() if k != "volume_type_multiattach"})
    assert "no multiattach volume type" in untyped.features_off["compute-feature-enabled.volume_multiattach"]
    nfs = _conf(cannot_run={}, plan=plan_of("prod", cinder={"backend": "nfs", "nfsShares": ["h:/x"], "backup": "none"}))
    assert parse_ini(nfs.text)["compute-feature-enabled"]["volume_multiattach"] == "false"
    assert "NfsDriver" in nfs.features_off["compute-feature-enabled.volume_multiattach"]
    no_backend = _conf()  # NO_LVM: cinder-volume does not run
    assert "no volume backend" in no_backend.features_off["compute-feature-enabled.volume_multiattach"]
    ironic = _conf(cannot_run={}, facts={**FACTS, "hypervisor_types": ["ironic"]})
    assert "libvirt" in ironic.features_off["compute-feature-enabled.volume_multiattach"]


def test_cinders_optional_features_are_on_where_the_backends_drivers_have_them() -> None:
    """Tempest leaves manage and extend-attached off unless told; prod's RBD and staging's LVM have them."""
    prod = parse_ini(_conf(cannot_run={}).text)
    assert [prod["volume-feature-enabled"][k] for k in ("manage_volume", "manage_snapshot")] == ["true", "true"]
    assert prod["volume-feature-enabled"]["extend_attached_volume"] == "true"
    # The RBD driver renames the image's snapshot to snapshot-<id>; LVM's volume is _snapshot-<id>.
    assert prod["volume"]["manage_snapshot_ref"] == "source-name,snapshot-%s"
    assert parse_ini(_conf("staging").text)["volume"]["manage_snapshot_ref"] == "source-name,_snapshot-%s"
    nfs = _conf(cannot_run={}, plan=plan_of("prod", cinder={"backend": "nfs", "nfsShares": ["h:/x"], "backup": "none"}))
    assert parse_ini(nfs.text)["volume-feature-enabled"]["manage_volume"] == "false"
    assert "NfsDriver" in nfs.features_off["volume-feature-enabled.manage_snapshot"]
    old_volume_api = {**FACTS, "microversions": {**FACTS["microversions"], "volume": {"min": "3.0", "max": "3.41"}}}
    older = _conf(cannot_run={}, facts=old_volume_api)
    assert parse_ini(older.text)["volume-feature-enabled"]["extend_attached_volume"] == "false"
    assert "volume 3.41" in older.features_off["volume-feature-enabled.extend_attached_volume"]
    # RBD beside LVM: both manage volumes, but one snapshot ref cannot name the snapshots of both.
    off: dict[str, str] = {}
    mixed, refs = _volume_management({RBD_DRIVER, LVM_DRIVER}, FACTS, True, off)
    assert (mixed["manage_volume"], mixed["manage_snapshot"], refs) == (True, False, {})
    assert "name snapshots apart" in off["volume-feature-enabled.manage_snapshot"]


def test_a_volume_backend_the_lab_cannot_run_is_named() -> None:
    settings = plan_of("staging").settings
    assert volume_backend_runs(NO_LVM, settings) == "no device-mapper here"
    assert volume_backend_runs({"iscsid-kvm-general": "no iSCSI"}, settings) == ""
    assert "no device-mapper here" in _conf().features_off["(tests needing a volume backend)"]
    assert "(tests needing a volume backend)" not in _conf(cannot_run={}).features_off


def test_a_stack_without_cinder_neither_configures_nor_selects_volume_tests() -> None:
    plan = plan_of("dev")
    assert not plan.settings.services.on("cinder")
    conf = parse_ini(tempest_conf(plan, ADMIN, FACTS, {}, Path("/work")).text)
    assert conf["service_available"]["cinder"] == "false"
    assert "volume" not in conf.sections()
    assert not re.search(selection(plan, smoke=False), VOLUME_ID)
    assert re.search(selection(plan_of("prod"), smoke=False), VOLUME_ID)


def test_a_filter_narrows_the_selection_and_never_widens_it() -> None:
    full = selection(plan_of("prod"), smoke=False)
    assert narrowed(full, None) == full
    rerun = narrowed(full, r"test_live_migration\.LiveMigrationTest")
    migration = "tempest.api.compute.admin.test_live_migration.LiveMigrationTest.test_live_block_migration[id-1]"
    assert re.search(rerun, migration)
    assert not re.search(rerun, "tempest.api.compute.admin.test_live_migration.LiveAutoBlockMigrationV225Test.x")
    # Not in the selection (dev deploys no Cinder), so not run even when the filter names it.
    assert not re.search(narrowed(selection(plan_of("dev"), smoke=False), "volume"), VOLUME_ID)
    assert not re.search(narrowed(full, "test_live"), "tempest.scenario.test_live_x")


def test_the_cli_refuses_a_filter_or_workers_without_a_selection_and_bad_values(
    capsys: pytest.CaptureFixture[str],
) -> None:
    for argv, says in (
        (["--stack", "prod", "--tempest-filter", "x"], "--tempest smoke or --tempest full"),
        (["--stack", "prod", "--tempest", "full", "--tempest-filter", "(x"], "not a regular expression"),
        (["--stack", "prod", "--tempest-workers", "2"], "--tempest smoke or --tempest full"),
        (["--stack", "prod", "--tempest", "full", "--tempest-workers", "0"], "invalid choice"),
        (["--stack", "prod", "--tempest", "full", "--tempest-workers", "9"], "invalid choice"),
        (["--stack", "prod", "--tempest-only"], "--tempest smoke or --tempest full"),
    ):
        with pytest.raises(SystemExit) as stopped:
            cloud_cli(argv)
        assert stopped.value.code == 2
        assert says in capsys.readouterr().err


def test_the_smoke_set_is_the_smoke_tagged_api_tests() -> None:
    prod = plan_of("prod")
    assert re.search(selection(prod, smoke=True), SMOKE_ID)
    assert not re.search(selection(prod, smoke=True), PLAIN_ID)
    assert re.search(selection(prod, smoke=False), PLAIN_ID)
    scenario = "tempest.scenario.test_server_basic_ops.TestServerBasicOps.test_server_basic_ops[id-7fff,smoke]"
    assert not re.search(selection(prod, smoke=True), scenario)  # the lab's guest cannot be logged in to


def test_results_are_counted_and_every_failure_classed() -> None:
    limits = (
        LabLimit(r"\.ImportImagesTest\.test_image_web_download_import\b", r"TimeoutException", "no Internet here"),
    )
    records = [
        {"id": "t.A.test_ok", "status": "success", "details": {}},
        {"id": "t.A.test_skip", "status": "skip", "details": {"reason": "Resize is not available."}},
        {"id": "t.A.test_skip2", "status": "skip", "details": {"reason": "Resize is not available."}},
        {
            "id": "tempest.api.image.v2.test_images.ImportImagesTest.test_image_web_download_import[id-1,smoke]",
            "status": "fail",
            "details": {"traceback": "Traceback ...\ntempest.lib.exceptions.TimeoutException: Request timed out"},
        },
        {
            "id": "setUpClass (tempest.api.image.v2.admin.test_images_metadefs.MetadefsTest)",
            "status": "fail",
            "details": {"traceback": "Traceback ...\n  File x\nAssertionError: [] is empty\n"},
        },
    ]
    left_out = {"tempest.api.volume.test_volumes_get.VolumesGetTest.test_x": "cinder-volume does not run here"}
    found = summarize(records, left_out, limits)
    assert (found["passed"], found["failed"], found["skipped"]) == (1, 2, 3)
    assert found["skips"] == {"Resize is not available.": 2, "cinder-volume does not run here": 1}
    cloud, lab = sorted(found["failures"], key=lambda f: f["class"])
    assert (lab["class"], lab["reason"]) == ("lab", "no Internet here")
    assert lab["error"].startswith("tempest.lib.exceptions.TimeoutException")
    assert cloud == {"test": records[4]["id"], "reason": "AssertionError: [] is empty", "class": "cloud"}


def test_the_rebuild_that_logs_in_over_ssh_is_a_limit_of_the_lab_and_nothing_else_of_its_class() -> None:
    base = "tempest.api.compute.servers.test_server_actions.ServerActionsV293TestJSON"
    error = (
        "tempest.lib.exceptions.InvalidParam: Invalid Parameter passed: When validation.connect_method equals "
        "floating, validation_resources cannot be None"
    )
    records = [
        {"id": f"{base}.{name}[id-6652dab9]", "status": "fail", "details": {"traceback": f"Traceback\n{error}\n"}}
        for name in ("test_rebuild_volume_backed_server", "test_rebuild_volume_backed_server_other")
    ]
    cloud, lab = sorted(summarize(records, {})["failures"], key=lambda f: f["class"])
    assert (lab["class"], lab["reason"]) == ("lab", NO_SSH_LOGIN)
    assert cloud["class"] == "cloud"


def test_a_listed_test_that_fails_with_another_error_is_the_clouds() -> None:
    """The lab's limit excuses the error it causes, not the test: the rebuild failing on, e.g., a server that
    never became ACTIVE is a failure of the cloud."""
    test = "tempest.api.compute.servers.test_server_actions.ServerActionsV293TestJSON.test_rebuild_volume_backed_server"
    error = "tempest.exceptions.BuildErrorException: Server 1 failed to build and is in ERROR status"
    records = [{"id": f"{test}[id-1]", "status": "fail", "details": {"traceback": f"Traceback\n{error}\n"}}]
    [failure] = summarize(records, {})["failures"]
    assert failure == {"test": records[0]["id"], "reason": error, "class": "cloud"}


def test_tests_are_left_out_by_pattern_with_the_reason() -> None:
    ids = [VOLUME_ID, "tempest.api.volume.test_volumes_get.VolumesGetTest.test_volume_create_get[id-1]"]
    assert excluded(ids, [r"\.test_volumes_get\.VolumesGetTest\."], "why") == {ids[1]: "why"}


def test_without_a_volume_backend_only_the_tests_that_need_one_are_left_out() -> None:
    base = "tempest.api.volume.test_volumes_get.VolumesGetTest"
    ids = [
        f"{base}.test_volume_create_get_update_delete[id-c8c5ab38,smoke]",  # listed test
        f"{base}.test_volume_create_get_update_delete_as_clone[id-3f591b4a]",  # listed test, a longer name
        f"{base}.test_volume_get_metadata_none[id-0b2ff7a9]",  # its class's other test: needs no volume
        "tempest.api.volume.test_volumes_list.VolumesListTestJSON.test_volume_list[id-0b6ddd39,smoke]",  # class
        "tempest.api.volume.admin.test_volume_types.VolumeTypesTest.test_volume_type_list[id-9d9b28e3]",
    ]
    left_out = excluded(ids, volume_backend_tests(), "no backend")
    assert sorted(left_out) == sorted([ids[0], ids[1], ids[3]])


def test_each_venv_is_cached_under_a_key_of_everything_that_decides_its_contents() -> None:
    assert TEMPEST.requirements() == ["tempest==47.0.0"]
    openstack = [recipe(release) for release in RELEASES]
    assert len({r.cache_key() for r in [TEMPEST, *openstack]}) == 1 + len(RELEASES)
    assert len({r.name for r in openstack}) == len(RELEASES)  # each release's builds cached apart
    same = VenvRecipe(TEMPEST.name, dict(TEMPEST.pinned), TEMPEST.cutoff)
    assert same.cache_key() == TEMPEST.cache_key()
    assert VenvRecipe(TEMPEST.name, {"tempest": "46.3.0"}, TEMPEST.cutoff).cache_key() != TEMPEST.cache_key()
    assert VenvRecipe(TEMPEST.name, dict(TEMPEST.pinned), "2026-01-01T00:00:00Z").cache_key() != TEMPEST.cache_key()


class _Response:
    def __init__(self, status: int, body: dict[str, Any] | None = None) -> None:
        self.status_code, self.body = status, body or {}

    def json(self) -> dict[str, Any]:
        return self.body


class _Placement:
    """Placement's inventories of one compute node; nova-compute bumps the generation once, in between."""

    def __init__(self, total: int, reserved: int, ratio: float, conflicts: int = 1) -> None:
        self.vcpu = {"total": total, "reserved": reserved, "allocation_ratio": ratio, "min_unit": 1, "max_unit": total}
        self.generation, self.conflicts, self.puts = 5, conflicts, 0

    def get(self, url: str) -> _Response:
        if url == "/resource_providers":
            return _Response(200, {"resource_providers": [{"uuid": "rp-1", "name": "node-1"}]})
        assert url == "/resource_providers/rp-1/inventories"
        body = {"inventories": {"VCPU": dict(self.vcpu)}, "resource_provider_generation": self.generation}
        return _Response(200, body)

    def put(self, url: str, json: dict[str, Any], raise_exc: bool) -> _Response:
        assert url == "/resource_providers/rp-1/inventories/VCPU" and raise_exc is False
        self.puts += 1
        if self.conflicts:
            self.conflicts -= 1
            self.generation += 1  # nova-compute's periodic update came first
            return _Response(409)
        assert json["resource_provider_generation"] == self.generation
        self.vcpu = {k: json[k] for k in self.vcpu}
        return _Response(200)


def test_a_node_with_too_few_guest_vcpus_gets_a_higher_ratio_through_placement() -> None:
    placement, prepared = _Placement(total=2, reserved=1, ratio=4.0), list[str]()
    guest_vcpus(SimpleNamespace(placement=placement), prepared)
    assert placement.vcpu["allocation_ratio"] == GUEST_VCPUS  # one core for guests
    assert placement.puts == 2  # retried after the generation conflict
    assert prepared == [f"VCPU allocation ratio of node-1 4.0 -> {float(GUEST_VCPUS)} (1 core(s) for guests)"]
    roomy, prepared = _Placement(total=64, reserved=2, ratio=4.0), list[str]()
    guest_vcpus(SimpleNamespace(placement=roomy), prepared)
    assert (roomy.puts, roomy.vcpu["allocation_ratio"], prepared) == (0, 4.0, [])


def test_the_volume_protocol_is_the_one_the_backends_driver_reports() -> None:
    """Tempest compares it with the pools' storage_protocol: cinder's RBD driver says 'ceph', LVM's target iSCSI."""
    assert parse_ini(_conf().text)["volume"]["storage_protocol"] == "ceph"
    assert parse_ini(_conf("staging").text)["volume"]["storage_protocol"] == "iSCSI"


class _Images:
    """Glance through openstacksdk's image proxy, as alt_image uses it (a double: no cloud here)."""

    def __init__(self, *existing: str) -> None:
        self.images = {name: SimpleNamespace(id=f"{name}-id", name=name, properties={}) for name in existing}
        self.created: list[dict[str, Any]] = []

    def find_image(self, name: str) -> Any:
        return self.images.get(name)

    def download_image(self, image: Any) -> Any:
        return SimpleNamespace(content=b"disk of " + image.name.encode())

    def create_image(self, **fields: Any) -> Any:
        self.created.append(fields)
        self.images[fields["name"]] = SimpleNamespace(id="new-id", name=fields["name"], properties={})
        return self.images[fields["name"]]

    def update_image(self, image: Any, **properties: str) -> None:
        image.properties.update(properties)


def test_the_alt_image_is_the_guest_again_once() -> None:
    guest = SimpleNamespace(id="guest-id", name="guest", disk_format="raw", container_format="bare", properties={})
    images, prepared = _Images(), list[str]()
    found = alt_image(SimpleNamespace(image=images), guest, prepared)
    assert found.id == "new-id" and found.id != guest.id
    assert images.created == [{"name": ALT_IMAGE, "data": b"disk of guest", "disk_format": "raw",
                               "container_format": "bare", "visibility": "public"}]  # fmt: skip
    assert found.properties == {"os_shutdown_timeout": "0"}
    again = alt_image(SimpleNamespace(image=images), guest, [])
    assert again is found and len(images.created) == 1


def test_a_tempest_request_names_what_it_refuses() -> None:
    assert TempestRequest("full", workers=2).workers == 2
    with pytest.raises(ValueError, match="workers 5: from 1 to 4"):
        TempestRequest("full", workers=5)
    with pytest.raises(ValueError, match="selection 'all': one of smoke, full"):
        TempestRequest("all")


class _VolumeTypes:
    """Cinder's volume types through openstacksdk's block-storage proxy (a double: no cloud here)."""

    def __init__(self) -> None:
        self.types: dict[str, dict[str, str]] = {}

    def find_type(self, name: str) -> Any:
        return self.types.get(name)

    def create_type(self, name: str, extra_specs: dict[str, str]) -> None:
        self.types[name] = extra_specs


def test_the_multiattach_volume_type_is_made_once_with_cinders_extra_spec() -> None:
    volumes, prepared = _VolumeTypes(), list[str]()
    assert multiattach_type(SimpleNamespace(block_storage=volumes), prepared) == MULTIATTACH_TYPE
    assert volumes.types == {MULTIATTACH_TYPE: {"multiattach": "<is> True"}} and len(prepared) == 1
    multiattach_type(SimpleNamespace(block_storage=volumes), prepared)
    assert len(prepared) == 1
