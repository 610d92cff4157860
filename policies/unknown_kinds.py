"""Fail closed: an object of a kind the pack cannot judge must not carry a pod.

The rules know where each kind they judge keeps its pod (podspec.py). Any other kind
(a workload of another operator, a Deployment in another API group, a patch of one) may
run a pod of the same shape, and its privileges would pass every rule unjudged; so such
an object is refused until the pack learns where its pod is.
"""

from __future__ import annotations

from policies.k8s import K8sObject, get, is_list
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


def unknown_pod_kinds(obj: K8sObject, settings: PackSettings) -> list[str]:
    if not obj.type.startswith("kubernetes:") or judges(obj):
        return []
    found = []
    for shape in POD_SHAPES:
        for section in SECTIONS:
            if is_list(get(obj.props, *shape, section)):
                why = f"the pack does not know how a {obj.type} runs its pod, so it would pass unjudged"
                allowed = f"a pod only in a kind the pack judges: {judged_kinds()}"
                found.append(forbidden(obj, "pod", join("", *shape, section), allowed, why))
    return found
