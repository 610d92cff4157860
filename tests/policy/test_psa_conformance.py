"""The Kubernetes project's Pod Security Admission fixtures, run through tools.policycheck.

For every control the pack enforces on unprivileged workloads, every `fail` fixture of
that control must be rejected (a mandatory violation from the rule that owns the control,
naming the control's field) and every `pass` fixture of the level accepted (no violation
of any privilege or pod-security rule; hygiene advice only).

Baseline controls apply to any pod; the restricted controls apply to the program's own
control-plane pods, so the restricted fixtures are checked as such: the test adds the
label app.kubernetes.io/part-of=openstack to each (metadata only; the pod spec is the
fixture's). The fixtures are the project's own, from its Go module (k8s.io/pod-security-admission
test/testdata, at the release of Kubernetes 1.37's), or from PSA_FIXTURES when set.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
import yaml

from tests.go_module import module_dir
from tools.policycheck import main

VERSION = "v1.37"
MODULE = ("k8s.io/pod-security-admission", "v0.37.2")  # its release with Kubernetes 1.37.2


def _fixtures() -> Path:
    if os.environ.get("PSA_FIXTURES"):
        return Path(os.environ["PSA_FIXTURES"])
    return module_dir(*MODULE) / "test" / "testdata"


FIXTURES = _fixtures()

# Each control the pack enforces: the rule that owns it and what its messages name.
CONTROLS: dict[str, tuple[str, str]] = {
    "hostnamespaces": ("host-namespaces", r"spec\.host(Network|PID|IPC)=true"),
    "privileged": ("privileged-containers", r"securityContext\.privileged=true"),
    "capabilities_baseline": ("added-capabilities", r"securityContext\.capabilities\.add\[\d+\]="),
    "hostpathvolumes": ("host-path-volumes", r"hostPath\.path="),
    "hostports": ("host-ports", r"\.hostPort="),
    "apparmorprofile": ("pod-security-baseline", r"container\.apparmor\.security\.beta\.kubernetes\.io/"),
    "selinuxoptions": ("pod-security-baseline", r"seLinuxOptions\.(type|user|role)="),
    "procmount": ("pod-security-baseline", r"securityContext\.procMount="),
    "seccompprofile_baseline": ("pod-security-baseline", r"seccompProfile\.type=\"Unconfined\""),
    "sysctls": ("pod-security-baseline", r"securityContext\.sysctls\[\d+\]\.name="),
    "windowshostprocess": ("pod-security-baseline", r"windowsOptions\.hostProcess=true"),
    "hostprobesandhostlifecycle": ("pod-security-baseline", r"\.(httpGet|tcpSocket)\.host="),
    "allowprivilegeescalation": ("control-plane-restricted", r"allowPrivilegeEscalation"),
    "capabilities_restricted": ("control-plane-restricted", r"capabilities\.(drop|add)"),
    "runasnonroot": ("control-plane-restricted", r"runAsNonRoot"),
    "runasuser": ("control-plane-restricted", r"runAsUser=0"),
    "seccompprofile_restricted": ("control-plane-restricted", r"seccompProfile\.type"),
    "restrictedvolumes": ("control-plane-restricted", r"spec\.volumes\[\d+\]\.\w+ is not allowed"),
    "procmount_restricted": ("control-plane-restricted", r"securityContext\.procMount="),
}
HYGIENE = ("resource-requests-limits", "readiness-probes", "image-pinned")
LINE = re.compile(r"^(MANDATORY|ADVISORY) (\S+): (.*) \[.*\]$")


def fixtures(level: str, outcome: str) -> list[Path]:
    return sorted((FIXTURES / level / VERSION / outcome).glob("*.yaml"))


def control_of(fixture: Path) -> str:
    return re.sub(r"\d+$", "", fixture.stem)


def check(
    fixture: Path, level: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> tuple[int, list[tuple[str, str, str]]]:
    path = fixture
    if level == "restricted":
        pod = yaml.safe_load(fixture.read_text())
        pod["metadata"].setdefault("labels", {})["app.kubernetes.io/part-of"] = "openstack"
        path = tmp_path / fixture.name
        path.write_text(yaml.safe_dump(pod))
    status = main([str(path)])
    lines = capsys.readouterr().out.splitlines()
    violations = [(m[1], m[2], m[3]) for line in lines if (m := LINE.match(line))]
    assert len(violations) == len(lines) - 1, lines  # every line but the summary is a violation
    return status, violations


def test_the_fixtures_are_there() -> None:
    for level in ("baseline", "restricted"):
        assert fixtures(level, "fail"), f"no PSA fixtures at {FIXTURES / level / VERSION}; set PSA_FIXTURES"
        assert (FIXTURES / level / VERSION / "pass" / "base.yaml").is_file()


def test_every_control_of_the_fixtures_is_enforced() -> None:
    """No control is silently left out: each fail fixture's control is one the pack owns."""
    seen = {control_of(f) for level in ("baseline", "restricted") for f in fixtures(level, "fail")}
    assert seen == set(CONTROLS)


FAIL = [(level, f) for level in ("baseline", "restricted") for f in fixtures(level, "fail")]
PASS = [(level, f) for level in ("baseline", "restricted") for f in fixtures(level, "pass")]


@pytest.mark.parametrize(("level", "fixture"), FAIL, ids=[f"{lv}-{f.stem}" for lv, f in FAIL])
def test_fail_fixture_is_rejected(
    level: str, fixture: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    status, violations = check(fixture, level, tmp_path, capsys)
    policy, field = CONTROLS[control_of(fixture)]
    assert status == 1
    owned = [message for enforcement, rule, message in violations if rule == policy and enforcement == "MANDATORY"]
    assert any(re.search(field, message) for message in owned), violations


@pytest.mark.parametrize(("level", "fixture"), PASS, ids=[f"{lv}-{f.stem}" for lv, f in PASS])
def test_pass_fixture_is_accepted(
    level: str, fixture: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    status, violations = check(fixture, level, tmp_path, capsys)
    assert status == 0
    assert [v for v in violations if v[1] not in HYGIENE] == []
