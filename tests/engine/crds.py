"""The CustomResourceDefinitions a cluster that runs the operators and cert-manager has.

From each project's own release files where the Go module proxy serves the pinned version (`go mod
download` gives the repository's files): Gateway API, cert-manager, Rook. mariadb-operator v26.6.0
and the RabbitMQ Cluster Operator v2.21.1 are not served at those versions (403), so theirs come from
tests/fixtures, copied from those releases (their headers say what each kept). The versions are the
ones the program pins or the README names as prerequisites.
"""

from __future__ import annotations

from pathlib import Path

from tests.go_module import module_dir

MODULES: dict[str, tuple[str, str]] = {
    # module: (version, the CRD files in it)
    "sigs.k8s.io/gateway-api": ("v1.4.1", "config/crd/standard/*.yaml"),
    "github.com/cert-manager/cert-manager": ("v1.21.1", "deploy/crds/*.yaml"),
    "github.com/rook/rook": ("v1.20.6", "deploy/examples/crds.yaml"),
}
FIXTURES = Path(__file__).parents[1] / "fixtures"
FROM_FIXTURES = ("mariadb-operator", "rabbitmq-cluster-operator")


def crd_files() -> list[Path]:
    files: list[Path] = []
    for module, (version, pattern) in MODULES.items():
        files += sorted(module_dir(module, version).glob(pattern))
    for project in FROM_FIXTURES:
        files += sorted((FIXTURES / project).glob("*.yaml"))
    return files
