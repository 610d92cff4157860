"""When the lab's `pulumi up` stops waiting, and for how long it waits, as pulumi-kubernetes does."""

from __future__ import annotations

import pytest

from tests.lab.cloud.awaits import awaited, go_duration, timeout_seconds
from tests.lab.cloud.critical_path import critical_path


def test_timeouts_come_from_custom_timeouts_of_the_operation_then_the_annotation_then_the_kind() -> None:
    """provider/pkg/metadata/overrides.go TimeoutDuration: the engine's timeout (customTimeouts of the
    operation) before `pulumi.com/timeoutSeconds`; 10 minutes without either, 5 for a claim's create."""
    annotated = {"annotations": {"pulumi.com/timeoutSeconds": "1200"}}
    assert timeout_seconds("MariaDB", annotated, {"create": "30m"}) == 1800
    assert timeout_seconds("MariaDB", annotated, {}) == 1200
    assert timeout_seconds("MariaDB", annotated, {"create": "30m"}, "update") == 1200
    assert timeout_seconds("Job", {}, {"create": "30m", "update": "45m"}, "update") == 2700
    assert timeout_seconds("Job", {}, {"create": "30m"}) == 1800
    assert timeout_seconds("Job", {}, {}) == 600
    assert timeout_seconds("PersistentVolumeClaim", {}, {}) == 300
    assert timeout_seconds("PersistentVolumeClaim", {}, {}, "delete") == 600


def test_go_durations() -> None:
    assert go_duration("1h30m") == 5400
    assert go_duration("90s") == 90
    with pytest.raises(ValueError):
        go_duration("30 minutes")


def test_which_objects_are_awaited() -> None:
    selected = {"spec": {"selector": {"app": "x"}, "ports": []}}
    assert awaited("Service", selected)
    assert not awaited("Service", {"spec": {**selected["spec"], "clusterIP": "None"}})
    assert not awaited("Service", {"spec": {"ports": []}})  # no selector
    assert not awaited("Service", {"metadata": {"annotations": {"pulumi.com/skipAwait": "true"}}, **selected})
    assert awaited("Deployment", {})
    assert not awaited("ConfigMap", {})
    assert awaited("MariaDB", {"metadata": {"annotations": {"pulumi.com/waitFor": "condition=Ready"}}})


def test_the_critical_path_is_the_longest_chain_of_durations() -> None:
    durations = {"db": 10.0, "sync": 30.0, "api": 5.0, "secret": 0.0, "other": 20.0}
    dependencies = {"sync": ["db", "secret"], "api": ["sync"], "other": ["db"]}
    path = critical_path(durations, dependencies, {})
    assert path.seconds == 45.0
    assert path.chain == ("db", "sync", "api")
