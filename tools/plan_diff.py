"""`--against DIR`: what changes between an earlier plan and this one, as `pulumi up` would act.

Objects are matched by URN (less stack and project), as the engine matches them. A changed
object is *replaced* when a field pulumi-kubernetes treats as immutable changed (its
`forceNewProperties`: a Job's pod template, a selector, a PVC's spec, Secret and ConfigMap
data, the name) or one of its `replaceOnChanges`: a Job is then deleted and created again,
which re-runs it. Workloads whose pod template changed roll their pods. A change of the
resource options the engine acts on (retainOnDelete, protect, transforms, ...) is listed
apart: it changes what a later delete or replacement does, not the object. Secrets are
compared only through configs.json, where every secret value is masked, so nothing here can
show one.
"""

from __future__ import annotations

import difflib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tools.plan import Plan, resource_record
from tools.plan_configs import configs, object_key
from tools.vm_impact import vm_impact

Path_ = tuple[str, ...]
# pulumi-kubernetes' forceNewProperties (provider/pkg/provider/diff.go) for the kinds declared
# here, plus metadata.name and .namespace of every kind. Its table spells DaemonSet "Daemonset",
# so the provider would try to update a DaemonSet's selector; the API refuses that (immutable).
FORCE_NEW: dict[str, tuple[Path_, ...]] = {
    "Job": (("spec", "template"), ("spec", "selector"), ("spec", "completions"), ("spec", "parallelism")),
    "Deployment": (("spec", "selector"),),
    "DaemonSet": (("spec", "selector"),),
    "StatefulSet": (
        ("spec", "podManagementPolicy"),
        ("spec", "revisionHistoryLimit"),
        ("spec", "selector"),
        ("spec", "serviceName"),
        ("spec", "volumeClaimTemplates"),
    ),
    "PersistentVolumeClaim": (("spec",),),
    "Secret": (("type",), ("stringData",), ("data",)),
    "ConfigMap": (("data",), ("binaryData",)),
    "Service": (("spec", "clusterIP"),),
}
ALWAYS_NEW: tuple[Path_, ...] = (("metadata", "name"), ("metadata", "namespace"))
# Fields of the operators' resources that Pulumi updates but the operator does not carry to the
# volumes that exist: mariadb-operator patches only its StatefulSet's pod template, update
# strategy and replicas (pkg/controller/statefulset, v26.6.0), and its webhook, where one runs,
# refuses the change (`webhook:"inmutable"`); the RabbitMQ operator only resizes (v2.21.1,
# internal/scaling). Moving the data to another class is a backup and restore.
UNAPPLIED: dict[str, dict[Path_, str]] = {
    "MariaDB": {
        ("spec", "storage", "storageClassName"): "mariadb-operator leaves the existing volumes on their class "
        "(a cluster-wide operator's webhook refuses the change); move the data with a Backup and a Restore"
    },
    "RabbitmqCluster": {
        ("spec", "persistence", "storageClassName"): "the RabbitMQ operator leaves the existing volumes on their "
        "class (it only resizes them)"
    },
}
WORKLOADS = ("Deployment", "DaemonSet", "StatefulSet")
CHECKSUM = "openstack.org/config-checksum"


@dataclass
class PlanView:
    """What a plan's output directory says about each object, with no secret in it."""

    stack: str
    settings: dict[str, Any]
    objects: dict[str, dict[str, Any]]  # object key → kind, name, namespace, type, inputs
    configs: dict[str, dict[str, dict[str, str | None]]] | None  # None: an older plan without configs.json


def _object(record: dict[str, Any]) -> dict[str, Any]:
    inputs = dict(record["inputs"] or {})
    if record["kind"] == "Secret":
        inputs.pop("stringData", None)  # compared through configs.json only: plan.json may show them
        inputs.pop("data", None)
    name = record["k8s_name"] or record["name"]
    kind = record["kind"] or record["type"].rsplit(":", 1)[-1]
    # None: a plan.json from before options were recorded, whose options are not compared.
    options = record.get("options")
    return {
        "kind": kind,
        "name": name,
        "namespace": record["namespace"],
        "type": record["type"],
        "inputs": inputs,
        "options": options,
    }


def _view(document: dict[str, Any], found_configs: dict | None) -> PlanView:
    objects = {
        object_key(r["urn"]): _object(r)
        for r in document["resources"]
        if r["custom"] or r["type"].startswith("kubernetes:")  # charts and manifests are components
    }
    return PlanView(document["stack"], document["settings"], objects, found_configs)


def view_of(plan: Plan) -> PlanView:
    document = {
        "stack": plan.stack,
        "settings": plan.settings.model_dump(mode="json", by_alias=True),
        "resources": [resource_record(r, plan) for r in plan.registrations],
    }
    return _view(document, configs(plan))


def load(directory: Path) -> PlanView:
    document = json.loads((directory / "plan.json").read_text())
    configs_file = directory / "configs.json"
    return _view(document, json.loads(configs_file.read_text()) if configs_file.exists() else None)


def changed_paths(old: Any, new: Any, path: Path_ = ()) -> list[Path_]:
    """Leaf paths that differ; list items with a `name` are addressed by it (containers, env)."""
    if isinstance(old, dict) and isinstance(new, dict):
        return [p for k in sorted(old.keys() | new.keys()) for p in changed_paths(old.get(k), new.get(k), (*path, k))]
    if isinstance(old, list) and isinstance(new, list):
        named = all(isinstance(i, dict) and "name" in i for i in (*old, *new))
        if named and len({i["name"] for i in old}) == len(old) and len({i["name"] for i in new}) == len(new):
            return changed_paths({f"[{i['name']}]": i for i in old}, {f"[{i['name']}]": i for i in new}, path)
        if len(old) == len(new):
            return [
                p for i, (a, b) in enumerate(zip(old, new, strict=True)) for p in changed_paths(a, b, (*path, str(i)))
            ]
    return [] if old == new else [path]


def show(path: Path_) -> str:
    """spec.template.spec.containers[libvirt].image; a key with dots or slashes in brackets."""
    return ".".join(f"[{p}]" if ("." in p or "/" in p) and p[:1] != "[" else p for p in path).replace(".[", "[")


def forces_new(obj: dict[str, Any], path: Path_) -> bool:
    """Whether a change at `path` replaces the object: an immutable field, or its replaceOnChanges."""
    if any(path[: len(prefix)] == prefix for prefix in (*FORCE_NEW.get(obj["kind"], ()), *ALWAYS_NEW)):
        return True
    return any(under_property(path, declared) for declared in (obj.get("options") or {}).get("replaceOnChanges", ()))


def under_property(path: Path_, declared: str) -> bool:
    """Whether `path` lies under a replaceOnChanges property path (`spec.template`, `*`, `a[*].b`)."""
    parts = declared.replace("[", ".[").split(".")
    for index, part in enumerate(parts):
        if part in ("*", "[*]"):
            continue
        if index >= len(path) or part.strip("[]\"'") != path[index].strip("[]"):
            return False
    return True


def _option_changes(old: dict[str, Any], new: dict[str, Any]) -> list[dict[str, Any]]:
    """The resource options that change (both plans recorded them), each with before and after."""
    if old.get("options") is None or new.get("options") is None:
        return []
    before, after = old["options"], new["options"]
    return [
        {"option": name, "before": before.get(name), "after": after.get(name)}
        for name in sorted(before.keys() | after.keys())
        if before.get(name) != after.get(name)
    ]


def _config_changes(old: PlanView, new: PlanView, key: str) -> list[dict[str, Any]]:
    if old.configs is None or new.configs is None:
        return []
    before, after = old.configs.get(key, {}), new.configs.get(key, {})
    changes = []
    for data_key in sorted(before.keys() | after.keys()):
        a, b = before.get(data_key), after.get(data_key)
        if a is not None and b is not None and a["digest"] == b["digest"]:
            continue
        change: dict[str, Any] = {
            "key": data_key,
            "change": "added" if a is None else "removed" if b is None else "changed",
        }
        if (a or b or {}).get("text") is not None:
            lines = difflib.unified_diff(
                ((a or {}).get("text") or "").splitlines(keepends=True),
                ((b or {}).get("text") or "").splitlines(keepends=True),
                f"a/{data_key}",
                f"b/{data_key}",
                n=2,
            )
            change["diff"] = "".join(line if line.endswith("\n") else line + "\n" for line in lines)
        else:
            change["diff"] = None  # a bare secret value: that it changed is all there is to say
        changes.append(change)
    return changes


def _ref(view_object: dict[str, Any]) -> dict[str, Any]:
    return {k: view_object[k] for k in ("kind", "name", "namespace")}


def template_of(obj: dict[str, Any]) -> dict[str, Any]:
    """A workload's, Job's or CronJob's pod template."""
    spec = obj["inputs"].get("spec") or {}
    return (spec.get("jobTemplate") or {}).get("spec", spec).get("template") or {}


def _mounted_files(obj: dict[str, Any]) -> set[tuple[str, str]]:
    """(Secret or ConfigMap name, data key) of every file its pods mount with subPath."""
    pod = template_of(obj).get("spec") or {}
    sources = {}
    for volume in pod.get("volumes", []):
        source = (volume.get("secret") or {}).get("secretName") or (volume.get("configMap") or {}).get("name")
        if source:
            sources[volume["name"]] = source
    containers = [*pod.get("initContainers", []), *pod.get("containers", [])]
    return {
        (sources[m["name"]], m["subPath"])
        for c in containers
        for m in c.get("volumeMounts", [])
        if m["name"] in sources and m.get("subPath")
    }


def template_path(path: Path_) -> Path_ | None:
    """The part of a path inside a pod template (a CronJob's too), or None outside it."""
    for prefix in (("spec", "template"), ("spec", "jobTemplate", "spec", "template")):
        if path[: len(prefix)] == prefix:
            return path[len(prefix) :]
    return None


def _why_template(obj: dict[str, Any], paths: list[Path_], changed_files: set[tuple[str, str]]) -> list[str]:
    """What in a pod template changed, in words."""
    why = []
    if any(p[-1] == CHECKSUM for p in paths):
        files = sorted(key for _, key in _mounted_files(obj) & changed_files)
        why.append(f"config checksum ({', '.join(files)} changed)" if files else "config checksum")
    images = [p for p in paths if p[-1] == "image"]
    why += [f"image of container {p[-2].strip('[]')}" for p in images]
    rest = [show(p) for p in paths if p[-1] != CHECKSUM and p not in images]
    return why + rest[:5] + ([f"... {len(rest) - 5} more fields"] if len(rest) > 5 else [])


def diff(old: PlanView, new: PlanView) -> dict[str, Any]:
    added = [_ref(new.objects[k]) for k in sorted(new.objects.keys() - old.objects.keys())]
    removed = [_removed(old.objects[k]) for k in sorted(old.objects.keys() - new.objects.keys())]
    common = sorted(old.objects.keys() & new.objects.keys())
    data_changes = {key: _config_changes(old, new, key) for key in common}
    config_files = [{**_ref(new.objects[k]), **c} for k in common for c in data_changes[k]]
    changed_files = {(c["name"], c["key"]) for c in config_files}
    changed, replaced, rolls, jobs, options, unapplied = [], [], [], [], [], []
    for key in common:
        a, b = old.objects[key], new.objects[key]
        option_changes = _option_changes(a, b)
        if option_changes:
            options.append({**_ref(b), "changes": option_changes})
        paths = changed_paths(a["inputs"], b["inputs"])
        if b["kind"] == "Secret":  # its data is compared through configs.json only
            paths += [("stringData", c["key"]) for c in data_changes[key]]
        # The engine diffs ignoreChanges' properties with their old values: no change there.
        ignored = (b.get("options") or {}).get("ignoreChanges") or ()
        paths = [p for p in paths if not any(under_property(p, declared) for declared in ignored)]
        if not paths:
            continue
        forced = [p for p in paths if forces_new(b, p) or b["type"].startswith("random:")]
        entry = {**_ref(b), "fields": [show(p) for p in paths]}
        if forced:
            retained = bool((a.get("options") or {}).get("retainOnDelete"))
            replaced.append({**entry, "immutable": [show(p) for p in forced], "retained": retained})
        else:
            changed.append(entry)
        notes = UNAPPLIED.get(b["kind"], {})
        unapplied += [
            {**_ref(b), "field": show(p), "before": _at(a["inputs"], p), "after": _at(b["inputs"], p), "why": notes[p]}
            for p in paths
            if p in notes
        ]
        template = [p for p in paths if template_path(p) is not None]
        if b["kind"] in WORKLOADS and template:
            rolls.append({**_ref(b), **_rollout(b, bool(forced)), "why": _why_template(b, template, changed_files)})
        if b["kind"] in ("Job", "CronJob") and template:
            runs = "re-runs" if b["kind"] == "Job" else "its next runs use the new template"
            jobs.append({**_ref(b), "runs": runs, "why": _why_template(b, template, changed_files)})
    jobs += [{**j, "runs": "runs (new)", "why": []} for j in added if j["kind"] == "Job"]
    return {
        "stack": new.stack,
        "against_stack": old.stack,
        "settings": [
            {"setting": show(p), "before": _at(old.settings, p), "after": _at(new.settings, p)}
            for p in changed_paths(old.settings, new.settings)
        ],
        "added": added,
        "changed": changed,
        "replaced": replaced,
        "removed": removed,
        "options": options,
        "unapplied": unapplied,
        "options_compared": _options_recorded(old) and _options_recorded(new),
        "configs_compared": old.configs is not None,
        "config_files": config_files,
        "rolls": rolls,
        "jobs": jobs,
        "vms": vm_impact(old, new, rolls, removed),
    }


def _removed(obj: dict[str, Any]) -> dict[str, Any]:
    """A removed object, and what its options keep in the cluster: itself, or some of its children."""
    options = obj.get("options") or {}
    return {**_ref(obj), "retained": bool(options.get("retainOnDelete")), "children": options.get("transforms", [])}


def _options_recorded(view: PlanView) -> bool:
    return all(o.get("options") is not None for o in view.objects.values())


def _at(tree: Any, path: Path_) -> Any:
    for part in path:
        if isinstance(tree, dict):
            tree = tree.get(part)
        elif isinstance(tree, list) and part[:1] == "[":
            tree = next((i for i in tree if isinstance(i, dict) and i.get("name") == part[1:-1]), None)
        elif isinstance(tree, list) and part.isdigit() and int(part) < len(tree):
            tree = tree[int(part)]
        else:
            return None
    return tree


def _rollout(obj: dict[str, Any], replaced: bool) -> dict[str, Any]:
    spec = obj["inputs"].get("spec") or {}
    strategy = (spec.get("updateStrategy") or spec.get("strategy") or {}).get("type", "RollingUpdate")
    if replaced:
        return {"strategy": strategy, "restarts": True, "how": "deleted and created again: every pod at once"}
    if strategy == "OnDelete":
        return {"strategy": strategy, "restarts": False, "how": "template updated; no pod restarts until it is deleted"}
    unavailable = ((spec.get("strategy") or spec.get("updateStrategy") or {}).get("rollingUpdate") or {}).get(
        "maxUnavailable", 1
    )
    return {"strategy": strategy, "restarts": True, "how": f"rolls ({strategy}, maxUnavailable {unavailable})"}
