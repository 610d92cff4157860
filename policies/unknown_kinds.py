"""Fail closed: an object of a kind the pack cannot judge must not carry a pod.

The rules know where each kind they judge keeps its pod (podspec.py). Any other kind
(a workload of another operator, a Deployment in another API group, a patch of one) may
run a pod of the same shape, and its privileges would pass every rule unjudged; so such
an object is refused until the pack learns where its pod is. Kubernetes' own kinds keep pods
in a few shapes (POD_SHAPES); other controllers anywhere (Argo's templates[].container,
Tekton's steps, JobSet's replicatedJobs, Spark's spec.image...), so an object of a custom
kind is searched whole for a container image, a pod's host fields or a pod patch.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Mapping
from typing import Any

from policies.k8s import CHART_TYPES, K8sObject, get, is_list
from policies.layouts import SECTIONS, judged_kinds, judges
from policies.messages import forbidden
from policies.podspec import join
from policies.settings import PackSettings

# Where pods sit in the kinds Kubernetes defines, and so in the kinds modelled on them.
POD_SHAPES: tuple[tuple[str, ...], ...] = (
    ("spec", "template", "spec"),  # Deployment, StatefulSet, DaemonSet, Job...
    ("spec", "jobTemplate", "spec", "template", "spec"),  # CronJob
    ("template", "spec"),  # PodTemplate
    ("spec",),  # Pod
)


# Kubernetes' own API groups: their kinds keep pods only where POD_SHAPES look. Every other group
# is another controller's, which may keep containers anywhere (a workflow's steps, a pipeline's
# tasks, a batch job's replicas): its objects are searched whole.
KUBERNETES_GROUPS = frozenset({
    "core", "apps", "batch", "extensions", "policy", "autoscaling", "networking.k8s.io", "rbac.authorization.k8s.io",
    "storage.k8s.io", "apiextensions.k8s.io", "admissionregistration.k8s.io", "coordination.k8s.io",
    "discovery.k8s.io", "events.k8s.io", "node.k8s.io", "scheduling.k8s.io", "certificates.k8s.io",
    "flowcontrol.apiserver.k8s.io", "apiregistration.k8s.io", "resource.k8s.io", "authentication.k8s.io",
    "authorization.k8s.io", "internal.apiserver.k8s.io", "storagemigration.k8s.io",
})  # fmt: skip
# What a container or a pod says of itself, wherever another controller keeps it.
HOST_FIELDS = ("hostNetwork", "hostPID", "hostIPC", "privileged")
POD_PATCHES = ("podSpecPatch",)  # Argo Workflows: a pod spec as text, merged into every pod
MOST_SHOWN = 5


def carried(value: Any, path: str = "") -> Iterator[str]:
    """Paths in an object of another controller where a container or pod is: a container image,
    a host field set true, a hostPath, a pod patch. Metadata and status are not searched."""
    if isinstance(value, Mapping):
        for key, inner in value.items():
            at = join(path, str(key))
            if not path and key in ("metadata", "status"):
                continue
            image = key == "image" and isinstance(inner, str)
            host = (key in HOST_FIELDS and inner is True) or (key == "hostPath" and isinstance(inner, Mapping))
            if image or host or key in POD_PATCHES:
                yield at
            else:
                yield from carried(inner, at)
    elif is_list(value):
        for index, inner in enumerate(value):
            yield from carried(inner, join(path, index))


def unknown_pod_kinds(obj: K8sObject, settings: PackSettings) -> list[str]:
    # A Chart or ConfigFile is no object of the cluster: the engine judges each object it renders.
    if not obj.type.startswith("kubernetes:") or obj.type in CHART_TYPES or judges(obj):
        return []
    why = f"the pack does not know how a {obj.type} runs its pod, so it would pass unjudged"
    allowed = f"a pod only in a kind the pack judges: {judged_kinds()}"
    found = []
    for shape in POD_SHAPES:
        for section in SECTIONS:
            if is_list(get(obj.props, *shape, section)):
                found.append(forbidden(obj, "pod", join("", *shape, section), allowed, why))
    if not found and obj.group not in KUBERNETES_GROUPS:
        paths = list(itertools.islice(carried(obj.props), MOST_SHOWN))
        found += [forbidden(obj, "pod", path, allowed, why) for path in paths]
    return found
