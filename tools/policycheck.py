"""Check Kubernetes manifests against the policy pack's resource rules.

    python -m tools.policycheck [--stack NAME] FILE...

Each document of each (multi-document) YAML file is judged as the pulumi-kubernetes
resource it would be (apiVersion apps/v1, kind DaemonSet → kubernetes:apps/v1:DaemonSet),
with the enforcement levels and settings of policies/config/<NAME>.json, or the pack's
defaults without --stack. Stack rules need a whole stack's dependencies, so they run in
the offline plan and under `pulumi preview`, not here.

Exit status: 0 no mandatory violation, 1 a mandatory violation, 2 unreadable input.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import yaml

from policies.k8s import K8sObject, type_token
from policies.lists import LIST_SUFFIX
from policies.report import check_objects, has_mandatory, load_config
from policies.settings import ConfigError
from tools import command_line
from tools.yaml_reading import KubectlLoader, load_all


class ManifestError(ValueError):
    """A file that is not Kubernetes YAML; the message names the file and document."""


def _objects(document: Any, where: str) -> Iterator[dict[str, Any]]:
    """The objects kubectl would apply: a document, or the items of a list (policies/lists.py):
    any object with `items`, whose items without kind and apiVersion take the list's."""
    if not isinstance(document, dict):
        raise ManifestError(f"{where}: not a Kubernetes object (a YAML mapping), but {type(document).__name__}")
    if "items" in document:
        items = document["items"]
        if items is not None and not isinstance(items, list):
            raise ManifestError(f"{where}: items is not a list but {type(items).__name__}")
        for index, item in enumerate(items or []):
            if isinstance(item, dict) and "kind" not in item and "apiVersion" not in item:
                kind = str(document.get("kind", "")).removesuffix(LIST_SUFFIX)
                item = {"apiVersion": document.get("apiVersion"), "kind": kind, **item}
            yield from _objects(item, f"{where} item {index}")
        return
    missing = [key for key in ("apiVersion", "kind") if not isinstance(document.get(key), str)]
    if missing:
        raise ManifestError(f"{where}: {' and '.join(missing)} missing; cannot tell which resource this is")
    yield document


def read_objects(path: Path) -> list[K8sObject]:
    """Every object in a YAML file, each with a URN that says where it came from."""
    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError) as error:
        reason = error.strerror if isinstance(error, OSError) and error.strerror else str(error)
        raise ManifestError(f"cannot read {path}: {reason}") from None
    try:
        documents = load_all(text, KubectlLoader)  # as kubectl reads them
    except yaml.YAMLError as error:
        raise ManifestError(f"{path}: not valid YAML: {error}") from None
    objects = []
    for number, document in enumerate(documents, start=1):
        if document is None:
            continue  # an empty document between '---' separators
        for manifest in _objects(document, f"{path} document {number}"):
            token = type_token(manifest["apiVersion"], manifest["kind"])
            urn = f"urn:pulumi:policycheck::manifests::{token}::{path}#{number}"
            objects.append(K8sObject(urn, token, manifest))
    return objects


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.policycheck", description=__doc__.split("\n\n")[0])
    parser.add_argument("--stack", help="use policies/config/STACK.json (default: the pack's own defaults)")
    parser.add_argument("files", nargs="+", metavar="FILE", type=Path, help="Kubernetes YAML, one or more documents")
    args = parser.parse_args(argv)
    try:
        config = load_config(args.stack) if args.stack else {}
        objects = [obj for path in args.files for obj in read_objects(path)]
    except (ManifestError, ConfigError, FileNotFoundError) as error:
        print(f"policycheck: {error}", file=sys.stderr)
        return 2
    violations = check_objects(objects, config)
    for violation in violations:
        source = violation.urn.rsplit("::", 1)[-1]
        print(f"{violation.enforcement.upper()} {violation.policy}: {violation.message} [{source}]")
    mandatory = sum(v.enforcement == "mandatory" for v in violations)
    print(f"policycheck: {len(objects)} objects, {len(violations)} violations ({mandatory} mandatory)")
    return 1 if has_mandatory(violations) else 0


if __name__ == "__main__":
    command_line.run(main)
