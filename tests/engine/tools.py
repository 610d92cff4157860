"""The Go programs a user runs (the Pulumi CLI, the Kubernetes provider, kube-apiserver), from
tests/engine/build_go_tools.sh: built once per machine into ~/.cache/openstack-on-k8s/go-tools."""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Mapping
from functools import cache
from pathlib import Path

SCRIPT = Path(__file__).parent / "build_go_tools.sh"


class ToolsMissingError(RuntimeError):
    pass


@cache
def tool_dirs() -> tuple[Path, ...]:
    """The directories of the built tools, in the PATH order the script prints; builds what is missing."""
    done = subprocess.run(["bash", str(SCRIPT)], capture_output=True, text=True, timeout=3 * 3600)
    if done.returncode != 0:
        raise ToolsMissingError(f"{SCRIPT} failed ({done.returncode}):\n{done.stdout[-4000:]}\n{done.stderr[-2000:]}")
    found = re.search(r'export PATH="(.*):\$PATH"', done.stdout)
    if found is None:
        raise ToolsMissingError(f"{SCRIPT} printed no PATH line:\n{done.stdout[-2000:]}")
    return tuple(Path(part) for part in found.group(1).split(":"))


def engine_env(home: Path, kubeconfig: Path, passphrase: str) -> dict[str, str]:
    """The environment of a user's shell for these tools: the CLI, provider and API server on PATH."""
    path = ":".join([*(str(d) for d in tool_dirs()), os.environ.get("PATH", "")])
    return {
        **os.environ,
        "PATH": path,
        "PULUMI_HOME": str(home),
        "PULUMI_SKIP_UPDATE_CHECK": "true",
        "PULUMI_CONFIG_PASSPHRASE": passphrase,
        "KUBECONFIG": str(kubeconfig),
        "PULUMI_DISABLE_CI_DETECTION": "true",
    }


def kubernetes_bin() -> Path:
    return next(d for d in tool_dirs() if d.name.startswith("kubernetes-"))


def pulumi(cwd: Path, env: Mapping[str, str], *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    """`pulumi ARGS --non-interactive` as a user's shell runs it in `cwd`; with `check`, a failure
    raises with the command's output."""
    done = subprocess.run(
        ["pulumi", *args, "--non-interactive"], cwd=cwd, env=dict(env), capture_output=True, text=True, timeout=900
    )
    if check and done.returncode != 0:
        raise AssertionError(f"pulumi {' '.join(args)}: exit {done.returncode}\n{done.stdout[-6000:]}\n{done.stderr}")
    return done
