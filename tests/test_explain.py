"""--explain: what an object waits for and why, what waits for it, and where its name is declared."""

from __future__ import annotations

import re

import pytest

from tests.conftest import plan_of
from tests.helpers import GRAPH_KINDS, waits_for
from tools import plan as plan_tool
from tools.explain import explain
from tools.source_index import REPO


def sections(text: str) -> tuple[str, str, str]:
    """(the header, the rows of 'waits for', the rows of 'waited for by')."""
    head, _, rest = text.partition("\nwaits for")
    waits, _, waiters = rest.partition("\nwaited for by")
    return head, waits, waiters


def rows(section: str) -> dict[str, str]:
    """'Kind name' → the reason on its line."""
    found = {}
    for line in section.splitlines():
        match = re.match(r"  ([A-Z][A-Za-z]+ [a-z0-9-]+)\s{2,}(.*)", line)
        if match:
            found[match.group(1)] = match.group(2)
    return found


def source_line(site: str) -> str:
    path, line = re.match(r"(components/[a-z_/]+\.py):(\d+)", site).groups()  # type: ignore[union-attr]
    return (REPO / path).read_text().splitlines()[int(line) - 1]


def test_db_sync_names_its_needs_its_waiters_and_the_fstring_that_declares_it() -> None:
    plan = plan_of("prod")
    head, waits, waiters = sections(explain(plan, "glance-db-sync"))
    assert head.startswith("Job glance-db-sync (namespace openstack)")
    assert "app.kubernetes.io/name=glance" in head and "/glance-api:" in head  # its image
    found = rows(waits)
    # Every Job and workload the engine makes it wait for is listed, with why.
    assert {f"Job {n}" for n in waits_for(plan, "glance-db-sync")} <= found.keys()
    assert "database" in found["Job glance-db-init"] and "glance-db-init" in found["Job glance-db-init"]
    assert "`needs` of Step glance-db-sync" in waits.split("Job glance-db-init", 1)[1].splitlines()[1]
    assert "/etc/glance/glance-api.conf" in found["Secret glance-etc"]  # the Secret it mounts
    assert "inherited" in waits.split("Namespace openstack", 1)[1].splitlines()[1]  # from its component
    assert "schema" in rows(waiters)["Deployment glance-api"]
    # Declared by an f-string in shared code, filled in by the service module: both lines are real.
    declared = re.search(r"declared\s+(\S+)", head).group(1)  # type: ignore[union-attr]
    line = source_line(declared)
    assert "-db-sync" in line and 'f"{' in line
    filled = re.search(r"filled in\s+(\S+)", head).group(1)  # type: ignore[union-attr]
    assert '"glance"' in source_line(filled) and "components/services/glance.py" in filled


def test_a_literal_name_points_at_its_line_and_every_waiter_is_listed() -> None:
    plan = plan_of("dev")
    head, waits, waiters = sections(explain(plan, "keystone-bootstrap"))
    declared = re.search(r"declared\s+(\S+)", head).group(1)  # type: ignore[union-attr]
    assert '"keystone-bootstrap"' in source_line(declared)
    assert "Job keystone-db-sync" in rows(waits)
    bootstrap = plan.by_name("keystone-bootstrap", "Job")
    expected = {f"{r.kind} {r.k8s_name}" for r in plan.custom if bootstrap.urn in plan.dependencies[r.urn] and r.kind}
    assert expected and expected == set(rows(waiters))
    assert all("admin user" in why for why in rows(waiters).values())


def test_waits_for_rabbitmq_user_and_memcached_are_explained() -> None:
    plan = plan_of("staging")
    _, waits, _ = sections(explain(plan, "nova-api"))
    assert "RabbitMQ user" in rows(waits)["Job nova-rabbit-init"]
    _, waits, _ = sections(explain(plan, "keystone-api"))
    assert "StatefulSet memcached" in rows(waits)


def test_a_daemonset_built_from_its_pod_name_points_at_the_pod_declaration() -> None:
    head, _, _ = sections(explain(plan_of("prod"), "libvirt-kvm-general"))
    assert "no literal or f-string" in head  # honest: the name is composed at run time
    site = re.search(r"(components/tables/roles\.py:\d+)", head).group(1)  # type: ignore[union-attr]
    assert 'NodePod("libvirt"' in source_line(site)


def test_a_name_of_several_kinds_lists_each_and_kind_slash_name_picks_one() -> None:
    plan = plan_of("prod")
    both = explain(plan, "nova-cell-setup")
    assert both.startswith("2 objects are named 'nova-cell-setup'")
    assert "\nCronJob nova-cell-setup" in both and "\nJob nova-cell-setup" in both
    one = explain(plan, "Job/nova-cell-setup")
    assert one.startswith("Job nova-cell-setup") and "CronJob" not in one.splitlines()[0]
    # The Job of the deploy waits for the compute DaemonSets; the CronJob does not.
    assert "DaemonSet nova-compute-kvm-general" in rows(sections(one)[1])


def test_every_graph_object_can_be_explained() -> None:
    plan = plan_of("staging")
    for r in plan.custom:
        if r.kind in GRAPH_KINDS:
            assert f"{r.kind} {r.k8s_name}" in explain(plan, f"{r.kind}/{r.k8s_name}")


def test_an_unknown_name_exits_2_with_close_matches(capsys: pytest.CaptureFixture) -> None:
    assert plan_tool.main(["--stack", "dev", "--explain", "glance-db-snyc"]) == 2
    captured = capsys.readouterr()
    assert "no object named 'glance-db-snyc'" in captured.err and "glance-db-sync" in captured.err
    assert captured.out == ""


def _option_lines(head: str) -> list[str]:
    return [line for line in head.splitlines() if line.startswith("  options ") or line.startswith("             - ")]


def test_the_options_the_engine_acts_on_are_explained() -> None:
    plan = plan_of("prod")
    job = _option_lines(sections(explain(plan, "Job/keystone-db-sync"))[0])
    assert job == ["  options    deleteBeforeReplace", "  options    customTimeouts create=30m, update=30m"]
    # Prod's images are in Ceph: the backup claim is the one it keeps on delete.
    claim = _option_lines(sections(explain(plan, "mariadb-backup"))[0])
    assert claim == ["  options    retainOnDelete"]
    assert _option_lines(sections(explain(plan, "Deployment/keystone-api"))[0]) == []


def test_a_chart_shows_the_transforms_its_children_go_through() -> None:
    """Offline a chart is one resource: what it does to its CRDs is seen only through its transforms."""
    head, _, _ = sections(explain(plan_of("prod"), "rabbitmq-cluster-operator"))
    lines = _option_lines(head)
    assert lines[0].startswith("  options    transforms of its children")
    assert "             - OPERATOR_SCOPE_NAMESPACE=openstack on Deployment rabbitmq-cluster-operator" in lines
    assert any(line.startswith("             - retainOnDelete on each CustomResourceDefinition") for line in lines)
