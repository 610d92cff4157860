"""A Go module's files, from the Go module proxy: a project's own release files (its CRDs, its test
fixtures) at a pinned version, cached in ~/.cache/openstack-on-k8s/go-mod like the Go tools' modules."""

from __future__ import annotations

import json
import os
import subprocess
from functools import cache
from pathlib import Path

from tools.release_pins import cache_base


@cache
def module_dir(module: str, version: str) -> Path:
    """Where `go mod download` put module@version (read-only); RuntimeError says why it could not."""
    env = {
        **os.environ,
        "GOMODCACHE": str(cache_base() / "go-mod"),
        "GOFLAGS": "-mod=mod",
        # The checksum database cannot be reached here (only the module proxy can).
        "GOSUMDB": "off",
        "GOTOOLCHAIN": "local",
    }
    done = subprocess.run(
        ["go", "mod", "download", "-json", f"{module}@{version}"], capture_output=True, text=True, env=env, timeout=600
    )
    info = json.loads(done.stdout or "{}")
    if done.returncode != 0 or "Dir" not in info:
        raise RuntimeError(f"go mod download {module}@{version}: {info.get('Error') or done.stderr[-2000:]}")
    return Path(info["Dir"])
