"""How the lab judges certificate renewal under load (tests/lab/cloud/rotation.py): the clients' calls against the
restarts the consumers made, and the summary line. The renewal itself runs in the staging lab (tests/cloud)."""

from __future__ import annotations

from typing import Any

from tests.conftest import plan_of
from tests.lab.cloud import api_clients
from tests.lab.cloud.api_clients import Restart, judge
from tests.lab.cloud.ca_rotation import phases
from tests.lab.cloud.engine import engine_steps
from tests.lab.cloud.report import _rotation_line
from tests.lab.cloud.rotation import ca_verdict

RENEWED_AT = 1000.0


def _call(
    t: float, ok: bool = True, client: str = "laptop", call: str = "image list", seconds: float = 0.1
) -> dict[str, Any]:
    return {"t": t, "ok": ok, "client": client, "call": call, "status": 200 if ok else 503, "error": "" if ok else "x",
            "seconds": seconds}  # fmt: skip


def test_every_call_counts_and_failures_during_a_restart_are_told_apart() -> None:
    restart = Restart("mariadb-0", "mariadb-operator: Secrets ['mariadb-internal-tls'] renewed", 1020.0, 1035.0)
    calls = [
        _call(990.0), _call(995.0, client="user-pod"),
        _call(1021.0, ok=False),  # while MariaDB restarts
        _call(1035.0 + api_clients.RESTART_GRACE_SECONDS - 1, ok=False, client="user-pod"),  # reconnecting after it
        _call(1060.0, ok=False, call="console url"),  # nothing restarted then: the renewal broke something
        _call(1070.0, seconds=21.5),  # slow (an API reloading), not failed
    ]  # fmt: skip
    judged = judge(calls, [restart], RENEWED_AT)
    assert judged["calls"] == 6 and judged["calls_before_renewal"] == 2 and judged["failed_before_renewal"] == 0
    assert judged["failed_calls"] == 3 and judged["failed_outside_restarts"] == 1
    assert judged["by_client"] == {"laptop": {"calls": 4, "failed": 2, "slowest_seconds": 21.5},
                                   "user-pod": {"calls": 2, "failed": 1, "slowest_seconds": 0.1}}  # fmt: skip
    assert [f["call"] for f in judged["failures"]] == ["image list", "image list", "console url"]


def test_failures_before_the_renewal_are_the_clients_own_and_no_restart_excuses_them() -> None:
    judged = judge([_call(990.0, ok=False), _call(1001.0)], [Restart("mariadb-0", "x", 980.0, 995.0)], RENEWED_AT)
    assert judged["failed_before_renewal"] == 1 and judged["failed_outside_restarts"] == 0


def test_a_call_in_flight_when_the_restart_began_counts_against_it() -> None:
    # Seen in the lab: nova-api's query began 30 ms before mariadb-operator's stand-in deleted the pod and
    # lost its connection during it (pymysql 2013). It overlapped the restart; one that ended before did not.
    restart = Restart("mariadb-0", "x", 1020.0, 1024.0)
    in_flight = {**_call(1019.97, ok=False), "seconds": 0.05}
    before = {**_call(1019.0, ok=False), "seconds": 0.5}
    judged = judge([in_flight, before], [restart], RENEWED_AT)
    assert judged["failed_calls"] == 2 and judged["failed_outside_restarts"] == 1
    assert restart.covers(1019.97, 1020.02) and not restart.covers(1019.0, 1019.5)


def test_a_call_under_way_when_the_renewal_began_is_judged_with_the_calls_after_it() -> None:
    # Seen in the lab: keystone's token call began 0.1 s before the renewal, and MariaDB's pod was
    # replaced before it was answered; it is no failure of the clients' own baseline.
    restart = Restart("mariadb-0", "x", RENEWED_AT + 0.3, RENEWED_AT + 3.0)
    under_way = {**_call(RENEWED_AT - 0.1, ok=False), "seconds": 0.5}
    judged = judge([_call(990.0), under_way], [restart], RENEWED_AT)
    assert judged["calls_before_renewal"] == 1 and judged["failed_before_renewal"] == 0
    assert judged["failed_outside_restarts"] == 0  # it overlapped the restart
    # Without the restart it would have failed outside every restart: still counted, not excused.
    assert judge([_call(990.0), under_way], [], RENEWED_AT)["failed_outside_restarts"] == 1


def test_a_restart_whose_pod_never_got_ready_covers_until_now() -> None:
    unready = Restart("mariadb-0", "x", 1020.0, None)
    assert unready.covers(1020.0) and not unready.covers(1019.0)


def test_the_summary_line_names_what_was_not_served_and_the_restarts() -> None:
    line = _rotation_line({
        "ok": False, "renewed": {"openstack/rabbitmq-internal-tls": False, "openstack/mariadb-client-tls": None,
                                 "openstack/public-tls": True},
        "calls": 120, "failed_calls": 4, "failed_outside_restarts": 0,
        "restarted": [{"pod": "mariadb-0", "why": "x", "seconds": 14.2}], "vm_survived": True,
        "by_client": {"laptop": {"calls": 60, "failed": 4, "slowest_seconds": 21.5}},
    })  # fmt: skip
    assert line == (
        "ok False, 3 renewed, not served ['openstack/rabbitmq-internal-tls'], calls 120, failed 4 (0 outside the "
        "restarts ['mariadb-0']), slowest call {'laptop': 21.5} s, VM survived True"
    )
    assert _rotation_line({"not_run": "plain text"}) == "not run (plain text)"


def _later(changed: dict[str, Any]) -> Any:
    return plan_of("staging", **changed)


def _steps(staging: Any, found: list[Any], kind: str) -> list[set[str]]:
    """What each phase's `pulumi up` changes the pod template of, against the plan before it (the engine's
    steps, which tests/lab/cloud/apply.py applies)."""
    before = [staging, *(p.plan for p in found[:-1])]
    return [
        {s.name for s in engine_steps(b.custom, p.plan.custom).values() if s.kind == kind and s.template}
        for b, p in zip(before, found, strict=True)
    ]


def test_the_lab_rotates_stagings_own_ca_through_the_three_phases_and_rolls_what_the_plan_rolls() -> None:
    staging = plan_of("staging")
    found = phases(staging, _later)
    assert found is not None and [p.name for p in found] == ["trust", "issue", "done"]
    internal = [p.plan.settings.tls.internal for p in found]
    assert [(i.generation, i.rotation.phase if i.rotation else None) for i in internal if i] == [
        (2, "trust"), (2, "issue"), (2, None)]  # fmt: skip
    assert all(p.plan.settings.tls.public == staging.settings.tls.public for p in found)  # only the internal CA
    # What `pulumi up` of each phase replaces or rolls, read from the plans as the lab applies them.
    assert _steps(staging, found, "Job") == [{"internal-ca-bundle"}, set(), {"internal-ca-bundle"}]
    read_once = {"keystone-api", "glance-api", "placement-api", "nova-api", "nova-metadata", "neutron-server",
                 "cinder-api", "nova-scheduler", "nova-conductor", "nova-novncproxy", "horizon"}  # fmt: skip
    assert _steps(staging, found, "Deployment") == [read_once, set(), read_once]
    assert _steps(staging, found, "StatefulSet") == _steps(staging, found, "DaemonSet") == [set(), set(), set()]
    # A stack on another issuer's CA, or in a rotation already: none here.
    vault = {**_tls(staging), "internal": {"issuer": {"kind": "ClusterIssuer", "name": "vault"}}}
    assert phases(_later({"tls": vault}), _later) is None
    assert phases(found[0].plan, _later) is None


def _tls(plan: Any) -> dict[str, Any]:
    return dict(plan.settings.tls.model_dump(mode="json", by_alias=True, exclude_none=True))


def _phase(**facts: Any) -> dict[str, Any]:
    matched = {"matches": True}
    return {"verified_ok": True, "error": "", "bundle": ["CN=internal-ca"], "rolled": {},
            "predicted_vs_actual": matched, **facts}  # fmt: skip


def test_the_ca_rotation_is_ok_only_with_both_cas_then_the_new_one_the_rolls_as_predicted_and_no_failed_call() -> None:
    plans = phases(plan_of("staging"), _later)
    assert plans is not None
    done = plans[-1].plan.settings.tls.internal
    calls = {"calls": 300, "failed_calls": 2, "failed_outside_restarts": 0}
    good = {
        "trust": _phase(bundle=["CN=internal-ca", "CN=internal-ca-2"], rolled={"Deployment/keystone-api": 40.0}),
        "issue": _phase(),
        "done": _phase(bundle=["CN=internal-ca-2"], rolled={"Deployment/keystone-api": 38.0}),
    }
    verdict = ca_verdict(good, calls, True, done, plans)
    assert verdict["ok"] and (verdict["from"], verdict["to"]) == (1, 2)
    bad = {
        "an endpoint still presenting the old CA's certificate": {**good["done"], "verified_ok": False},
        "the processes that read the CA once were not restarted": {**good["done"], "rolled": {}},
        "the apply failed": {**good["done"], "error": "Job internal-ca-bundle failed"},
        "the apply did other than --against predicted": {**good["done"], "predicted_vs_actual": {"matches": False}},
    }
    for why, phase in bad.items():
        assert not ca_verdict({**good, "done": phase}, calls, True, done, plans)["ok"], why
    assert not ca_verdict(good, {**calls, "failed_outside_restarts": 1}, True, done, plans)["ok"]
    assert not ca_verdict(good, calls, False, done, plans)["ok"]
    assert "not_run" in ca_verdict({}, calls, True, done, None)


def test_a_restarts_effects_last_until_the_calls_it_caught_have_ended() -> None:
    # Seen in prod's lab: both nova-computes rolled at once; a console URL call made during the roll hung 60 s
    # on RPC (nova's rpc_response_timeout) past the new pods' readiness, holding nova-api's two workers, and
    # the server list calls right after were refused. A failure after every caught call ended is the
    # restart's no longer.
    restart = Restart("DaemonSet/nova-compute-kvm-general", "template", 1020.0, 1100.0)
    hung = _call(1090.0, ok=False, call="console url", seconds=60.1)
    refused = _call(1150.0, ok=False, call="server list")
    later = _call(1160.2 + api_clients.RESTART_GRACE_SECONDS + 1, ok=False, call="server list")
    judged = judge([hung, refused, later], [restart], RENEWED_AT)
    assert judged["failed_calls"] == 3 and judged["failed_outside_restarts"] == 1
    assert [f["t"] for f in judged["failures_outside_restarts"]] == [later["t"]]


def test_a_restart_excuses_only_the_calls_that_need_what_restarted() -> None:
    """Cinder's API rolling explains a failed volume list, not a failed image list; MariaDB and Keystone
    are under every call."""
    cinder = Restart("Deployment/cinder-api", "template", 1020.0, 1030.0)
    judged = judge([_call(1021.0, ok=False, call="volume list"), _call(1022.0, ok=False, call="image list")],
                   [cinder], RENEWED_AT)  # fmt: skip
    assert judged["failed_outside_restarts"] == 1 and judged["failures_outside_restarts"][0]["call"] == "image list"
    keystone = Restart("Deployment/keystone-api", "template", 1020.0, 1030.0)
    calls = [_call(1021.0 + i, ok=False, call=name) for i, name in enumerate(api_clients.CALL_API)]
    assert judge(calls, [keystone], RENEWED_AT)["failed_outside_restarts"] == 0
    # A node's libvirt explains the console URL (nova-compute asks it for the console), not a network list.
    libvirt = Restart("DaemonSet/libvirt-kvm-general", "template", 1020.0, 1030.0)
    calls = [_call(1021.0, ok=False, call="console url"), _call(1021.5, ok=False, call="network list")]
    assert [f["call"] for f in judge(calls, [libvirt], RENEWED_AT)["failures_outside_restarts"]] == ["network list"]
