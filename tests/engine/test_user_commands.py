"""The README's `pulumi preview` with the policy pack, for every stack, against a real API server.

Real: the Pulumi CLI, the pulumi-kubernetes provider, kube-apiserver with etcd (tests/engine/cluster.py),
the policy pack run by the engine. Stand-ins, because the Go module proxy does not serve them: the Python
language host and the pulumi-random provider (tests/engine/gotools; each says what it leaves out); the
provider is 4.25.0-alpha where the SDK asks for 4.34.2 (README, "The user's commands in `make test`").

What differs from a user's stack, and why: the operators and Envoy Gateway are the cluster's own
(`install: false`), since no chart repository, OCI registry or release URL is reachable here to fetch
their charts and manifests; their CustomResourceDefinitions are applied as a cluster that runs them has
them (tests/engine/crds.py). The namespace exists first, as the README has the user create it for the
Ceph keyrings: without it every server-side dry run of a namespaced object fails with NotFound, which
the provider's preview takes silently for a client-side one, and the API server judges nothing.

Not run yet: `pulumi up`, refresh and destroy, which wait for pods that nothing here runs (no kubelet).
"""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.engine.cluster import ApiServer, api_server
from tests.engine.crds import crd_files
from tests.engine.tools import engine_env, kubernetes_bin, pulumi
from tools.plan import build_plan
from tools.runtime import REPO

pytestmark = pytest.mark.real

STACKS = ("dev", "staging", "prod")
PACK = "openstack-on-k8s@"  # the pack's name in the CLI's "Policies:" report (policies/__main__.py)
OPERATORS = ("mariadb", "mariadbCrds", "rabbitmq", "rook")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ApiServer]:
    with api_server(tmp_path_factory.mktemp("k8s"), kubernetes_bin()) as server:
        server.apply_crds(crd_files())
        server.request(
            "POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "openstack"}}
        )
        yield server


def installs_off(config: dict[str, Any]) -> dict[str, Any]:
    """The stack's `openstack:` settings changed to the cluster's own operators and Envoy Gateway."""
    operators = dict(config.get("openstack:operators") or {})
    for name in OPERATORS:
        operators[name] = {**(operators.get(name) or {}), "install": False}
    changed: dict[str, Any] = {"operators": operators}
    gateway = config.get("openstack:gateway")
    if gateway and gateway.get("envoyGateway"):
        # The cluster's own Envoy Gateway, its proxies where it runs them (the settings want that said).
        off = {**gateway["envoyGateway"], "install": False}
        changed["gateway"] = {**gateway, "envoyGateway": off, "proxies": {"namespace": "envoy-gateway-system"}}
    return changed


class Project:
    """A user's checkout, as the README has them work in it: the program, its stack files, the
    virtualenv `pulumi install` made (`venv`; None: this project's `pulumi install` makes it)."""

    def __init__(
        self, root: Path, stack: str, server: ApiServer, venv: Path | None, components: Path = REPO / "components"
    ):
        self.root, self.stack = root, stack
        self.dir = root / "project"
        self.dir.mkdir(parents=True)
        for name in ("Pulumi.yaml", "__main__.py", "requirements.txt"):
            shutil.copy(REPO / name, self.dir)
        shutil.copytree(REPO / "policies", self.dir / "policies", ignore=shutil.ignore_patterns("__pycache__"))
        if venv is not None:
            (self.dir / ".venv").symlink_to(venv)
        (self.dir / "components").symlink_to(components)
        shutil.copytree(REPO / "stacks", self.dir / "stacks")
        stack_file = self.dir / "stacks" / f"Pulumi.{stack}.yaml"
        document = yaml.safe_load(stack_file.read_text())
        self.overrides = installs_off(document["config"])
        document["config"].update({f"openstack:{key}": value for key, value in self.overrides.items()})
        stack_file.write_text(yaml.safe_dump(document, sort_keys=False))
        self.env = {**engine_env(root / "home", server.kubeconfig, "engine-test"), "HOME": str(root / "home")}
        # The README's first commands, as written there.
        self.pulumi("login", "--local")
        self.pulumi("stack", "select", "--create", stack)
        if venv is None:
            # The README's `pulumi install`, less the plugin downloads: get.pulumi.com is not
            # reachable here, and the engine takes the plugins built from the proxy from PATH.
            self.pulumi("install", "--no-plugins")

    def pulumi(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        return pulumi(self.dir, self.env, *args, check=check)

    def preview(self, *extra: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        """The README's command: the pack and the stack's generated policy config."""
        pack = ("--policy-pack", "policies", "--policy-pack-config", f"policies/config/{self.stack}.json")
        return self.pulumi("preview", *pack, *extra, check=check)


@pytest.fixture(scope="module")
def installed(cluster: ApiServer, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The virtualenv the README's `pulumi install` makes from requirements.txt (the pack's included)."""
    project = Project(tmp_path_factory.mktemp("install"), "dev", cluster, venv=None)
    venv = project.dir / ".venv"
    done = subprocess.run([str(venv / "bin" / "python"), "-c", "import pulumi_policy, pulumi_kubernetes, pydantic"])
    assert done.returncode == 0, "pulumi install left out what the program or its policy pack imports"
    return venv


@pytest.mark.parametrize("stack", STACKS)
def test_preview_with_the_policy_pack_passes_and_declares_what_the_offline_plan_does(
    cluster: ApiServer, installed: Path, stack: str, tmp_path: Path
) -> None:
    project = Project(tmp_path, stack, cluster, installed)
    text = project.preview().stdout
    # The CLI's own report: the pack ran, and no mandatory policy failed (that fails the command).
    assert f"✅ {PACK}" in text, text[-3000:]
    steps = json.loads(project.preview("--json").stdout)["steps"]
    real = {step["urn"] for step in steps if step["op"] == "create"}
    # The offline plan (the SDK's mock runtime) of the same settings declares the same resources. Its
    # URNs carry the root Stack's type in their parent chain, which the engine's leave out.
    offline = {r.urn.replace("pulumi:pulumi:Stack$", "") for r in build_plan(stack, project.overrides).registrations}
    assert real == offline | {f"urn:pulumi:{stack}::openstack::pulumi:pulumi:Stack::openstack-{stack}"}


def test_an_object_the_api_server_refuses_fails_the_preview(
    cluster: ApiServer, installed: Path, tmp_path: Path
) -> None:
    """A Service port name that is no RFC 1123 label passes the mock runtime; the API server refuses it."""
    components = tmp_path / "components"
    shutil.copytree(REPO / "components", components, ignore=shutil.ignore_patterns("__pycache__"))
    kube = components / "mechanism" / "kube.py"
    named = '"ports": [{"name": port_name, "port": port'
    assert named in kube.read_text()
    kube.write_text(kube.read_text().replace(named, '"ports": [{"name": port_name.upper() + "_X", "port": port'))
    done = Project(tmp_path / "run", "dev", cluster, installed, components).preview(check=False)
    assert done.returncode != 0
    assert "spec.ports[0].name: Invalid value" in done.stdout + done.stderr
