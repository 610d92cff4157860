"""The deploy graph as a value: built before any resource, checked, and what the program walks."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest

from components.cloud.graph import CloudGraph, GraphError, Need, Node, cloud_graph
from components.mechanism.spec import ServiceSpec, Step
from components.services import specs as services
from components.settings.model import Settings
from components.tables import catalog
from tests.conftest import STACKS, plan_of
from tools.explain import explain
from tools.plan import Plan, build_plan
from tools.plan import main as plan_main
from tools.runtime import Registration
from tools.views import graph_text

# What the program creates that the graph holds; the rest (Services, budgets, claims, RBAC of a
# Job, operators' charts, generated passwords) belongs to one node or to no order at all.
GRAPH_KINDS = {"Job", "CronJob", "Deployment", "DaemonSet", "StatefulSet", "MariaDB", "RabbitmqCluster"}
CONFIG_KINDS = {"Secret", "ConfigMap"}


def _planned(plan: Plan) -> dict[str, Registration]:
    """Planned objects by the graph's key for them (a CronJob may share its name with a Job)."""
    found = {}
    for r in plan.custom:
        if r.kind in GRAPH_KINDS | CONFIG_KINDS | {"ClusterRoleBinding", "ValidatingAdmissionPolicy"}:
            key = f"{r.k8s_name} (CronJob)" if r.kind == "CronJob" else str(r.k8s_name)
            found[key] = r
    return found


@pytest.mark.parametrize("stack", STACKS)
def test_the_engine_waits_exactly_along_the_graphs_edges(stack: str) -> None:
    """Between the graph's objects, the planned dependencies are the graph's needs and no others."""
    plan = plan_of(stack)
    graph, planned = plan.graph, _planned(plan)
    nodes = {(node.kind, node.name) for node in graph.nodes.values() if node.waitable}
    by_urn = {r.urn: r for r in plan.custom}
    for key, node in graph.nodes.items():
        r = planned[key]
        assert r.kind == node.kind, key
        if node.kind in CONFIG_KINDS:
            continue  # a config object waits for the passwords it holds, which are no graph node
        # As the engine orders them: an edge declared on a component (a data store's) holds for what is inside.
        deps = [by_urn[d] for d in plan.dependencies[r.urn] if d in by_urn]
        engine = {d.k8s_name for d in deps if (d.kind, d.k8s_name) in nodes}
        assert engine == {need.name for need in node.needs}, key


@pytest.mark.parametrize("stack", STACKS)
def test_every_object_something_waits_for_is_in_the_graph(stack: str) -> None:
    plan = plan_of(stack)
    keys = set(plan.graph.nodes)
    missing = [key for key, r in _planned(plan).items() if r.kind in GRAPH_KINDS and key not in keys]
    assert missing == []


@pytest.mark.parametrize("stack", STACKS)
def test_the_order_puts_each_node_after_all_it_needs_and_every_edge_has_a_reason(stack: str) -> None:
    graph = plan_of(stack).graph
    seen: set[str] = set()
    for node in graph.order():
        for need in node.needs:
            assert need.name in seen, f"{node.key} before {need.name}"
            assert len(need.reason) > 20 and "\n" not in need.reason, (node.key, need)
        if node.waitable:
            seen.add(node.name)


def test_the_order_services_are_listed_in_does_not_matter(monkeypatch: pytest.MonkeyPatch) -> None:
    """Compute first, Keystone last: the graph still orders them, and the plan is the same."""
    before = build_plan("prod", {})
    monkeypatch.setattr(catalog, "SERVICES", tuple(reversed(catalog.SERVICES)))
    after = build_plan("prod", {})
    assert after.graph.specs[0].name == "compute"

    def edges(plan: Plan) -> dict[str, set[str]]:
        return {r.urn: set(r.dependencies) for r in plan.custom}

    assert edges(after) == edges(before)


def test_host_discovery_is_novas_alone_and_keeps_its_state_where_compute_had_it() -> None:
    plan = plan_of("prod")
    graph = plan.graph
    job, cron = graph["nova-cell-setup"], graph["nova-cell-setup (CronJob)"]
    assert (job.owner, cron.owner) == ("nova", "nova")
    compute = next(spec for spec in graph.specs if spec.name == "compute")
    assert compute.steps == ()
    daemonsets = {n.name for n in graph.nodes.values() if n.owner == "compute" and n.kind == "DaemonSet"}
    compute_node_daemonsets = {name for name in daemonsets if not name.startswith("network-")}
    assert compute_node_daemonsets <= {need.name for need in job.needs}
    planned = next(r for r in plan.custom if r.kind == "Job" and r.k8s_name == "nova-cell-setup")
    assert "openstack:service:Nova" in planned.urn
    # An upgrade finds the Job's state under its former parent, the compute component.
    former = [a["spec"].get("parentUrn", "") for a in planned.aliases if isinstance(a, dict)]
    assert any(urn.endswith("openstack:service:Compute::compute") for urn in former), planned.aliases


def _node(name: str, *needs: str, kind: str = "Job") -> Node:
    return Node(name, kind, "svc", "svc", tuple(Need(n, "a reason") for n in needs))


def test_a_need_nothing_provides_is_named_with_a_suggestion() -> None:
    with pytest.raises(GraphError, match=r"Job b \(service svc\) waits for 'aa-db-sync'.*did you mean 'a-db-sync'"):
        CloudGraph([_node("a-db-sync"), _node("b", "aa-db-sync")])


def test_a_cycle_is_named_along_its_path() -> None:
    # Read as "waits for": a waits for c, which waits for b, which waits for a.
    with pytest.raises(GraphError, match=r"cycle: (a -> c -> b -> a|c -> b -> a -> c|b -> a -> c -> b)"):
        CloudGraph([_node("a", "c"), _node("b", "a"), _node("c", "b"), _node("d")])


def test_a_name_declared_twice_is_refused_but_a_cron_job_may_share_a_jobs_name() -> None:
    with pytest.raises(GraphError, match="Deployment x is declared twice"):
        CloudGraph([_node("x", kind="Deployment"), _node("x", kind="Deployment")])
    graph = CloudGraph([_node("x"), _node("x", kind="CronJob"), _node("y", "x")])
    assert [n.key for n in graph.order()] == ["x", "x (CronJob)", "y"]


def test_a_cron_job_is_nothing_to_wait_for() -> None:
    with pytest.raises(GraphError, match="waits for 'x'"):
        CloudGraph([_node("x", kind="CronJob"), _node("y", "x")])


def test_a_service_step_that_needs_what_the_stack_does_not_deploy_fails_before_any_resource(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Turning Cinder off must not leave a need on cinder-api behind (here: one put there)."""
    builder = services.spec_builder
    original = builder("glance")

    def glance_needing_cinder(settings: Settings) -> ServiceSpec:
        spec = original(settings)
        wait = Step("glance-wait", "glance-api", ("true",), needs=("cinder-api",))
        return dataclasses.replace(spec, steps=(*spec.steps, wait))

    monkeypatch.setattr(
        services, "spec_builder", lambda name: glance_needing_cinder if name == "glance" else builder(name)
    )
    settings = plan_of("dev").settings
    off = settings.model_copy(update={"services": settings.services.model_copy(update={"cinder": False})})
    with pytest.raises(GraphError, match=r"Job glance-wait \(service glance\) waits for 'cinder-api'"):
        cloud_graph(off)


def test_the_graph_prints_by_wave_with_reasons() -> None:
    text = graph_text(plan_of("dev"))
    assert text.startswith("wave ")
    assert "  Job glance-db-sync (glance)\n    <- glance-db-init: needs the database and its user" in text
    waves = [int(line.split()[1]) for line in text.splitlines() if line.startswith("wave ")]
    assert waves == sorted(set(waves))


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_every_view_gives_an_object_the_same_wave(stack: str, tmp_path: Path) -> None:
    """graph.txt (the deploy graph's text), graph.md (the drawing's table) and --explain each print waves:
    one object, one number."""
    assert plan_main(["--stack", stack, "--out", str(tmp_path)]) == 0
    in_text: dict[tuple[str, str], int] = {}
    for line in (tmp_path / "graph.txt").read_text().splitlines():
        if line.startswith("wave "):
            wave = int(line.split()[1])
        elif line.startswith("  ") and not line.startswith("    "):
            kind, name = line.split()[:2]
            in_text[(kind, name)] = wave
    drawn = {
        (kind, name): int(wave)
        for name, kind, wave in re.findall(r'\["([^<]+)<br/>(\w+) · wave (\d+)"\]', (tmp_path / "graph.md").read_text())
    }
    both = set(in_text) & set(drawn)
    assert len(both) > 20, (sorted(in_text)[:5], sorted(drawn)[:5])
    assert {k: in_text[k] for k in both} == {k: drawn[k] for k in both}
    plan = plan_of(stack)
    explained = explain(plan, "MariaDB/mariadb")
    assert f"wave       {in_text[('MariaDB', 'mariadb')]} of " in explained


def test_the_plan_tool_prints_the_graph_and_writes_it_beside_the_plan(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    assert plan_main(["--stack", "dev", "--graph"]) == 0
    printed = capsys.readouterr().out
    assert re.match(r"wave \d+\n  \w+ \S+ \(\S+\)\n", printed), printed[:200]
    assert plan_main(["--stack", "dev", "--out", str(tmp_path)]) == 0
    assert (tmp_path / "graph.txt").read_text() == printed


def test_memcached_is_built_by_the_services_mechanism_and_keeps_its_former_state() -> None:
    plan = plan_of("prod")
    node = plan.graph["memcached"]
    assert (node.kind, node.owner) == ("StatefulSet", "memcached")
    component = next(r for r in plan.registrations if not r.custom and r.name == "memcached")
    assert component.type == "openstack:service:Memcached"
    # Its children's URNs follow from the component's, whose old type the alias names.
    assert {"type": "openstack:infra:Memcached", "parentUrn": ""} in [a["spec"] for a in component.aliases]
