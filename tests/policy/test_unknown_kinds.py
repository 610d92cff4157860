"""Fail closed: an object of a kind the pack does not judge may not carry a pod, since its
privileges would pass every rule unjudged."""

from __future__ import annotations

from typing import Any

import pytest

from components.tables.roles import Topology
from policies.report import check_objects

from .builders import k8s_object, run_policy, stack_config

STAGING = stack_config(Topology.POD_PER_SERVICE)
CHART = "openstack:infra:X$kubernetes:helm.sh/v4:Chart"
SHELL = {"name": "shell", "image": "docker.io/library/busybox:1.37", "securityContext": {"privileged": True}}


def custom(api_version: str, kind: str, body: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": api_version, "kind": kind, "metadata": {"name": "x", "namespace": "openstack"}, **body}


def refused(kind: str, field: str, resource_type: str) -> str:
    return (
        f"{kind} openstack/x: pod: {field} is not allowed; allowed: a pod only in a kind the pack judges: "
        "Pod, Deployment, StatefulSet, DaemonSet, ReplicaSet, ReplicationController, Job, CronJob, PodTemplate "
        "(core, apps, extensions, batch); RabbitmqCluster (rabbitmq.com); MariaDB, MaxScale, Backup, PhysicalBackup, "
        "Restore, SqlJob (k8s.mariadb.com); and their *Patch types (the pack does not know how a "
        f"{resource_type} runs its pod, so it would pass unjudged)"
    )


@pytest.mark.parametrize(
    ("api_version", "kind", "body", "field"),
    [
        # An Argo Rollout: a Deployment's pod template in another operator's kind.
        ("argoproj.io/v1alpha1", "Rollout", {"spec": {"template": {"spec": {"containers": [SHELL]}}}},
         "spec.template.spec.containers"),
        # A well-known kind in another API group is another kind.
        ("apps.example.com/v1", "Deployment", {"spec": {"template": {"spec": {"containers": [SHELL]}}}},
         "spec.template.spec.containers"),
        ("v1", "PodGroup", {"spec": {"containers": [SHELL]}}, "spec.containers"),  # core-looking, unknown kind
        ("batch.example.com/v1", "ScheduledJob",
         {"spec": {"jobTemplate": {"spec": {"template": {"spec": {"containers": [SHELL]}}}}}},
         "spec.jobTemplate.spec.template.spec.containers"),
        ("example.com/v1", "Sandbox", {"spec": {"containers": [SHELL]}}, "spec.containers"),
        ("example.com/v1", "Recipe", {"template": {"spec": {"containers": [SHELL]}}}, "template.spec.containers"),
        ("example.com/v1", "Runner", {"spec": {"template": {"spec": {"initContainers": [SHELL]}}}},
         "spec.template.spec.initContainers"),
        ("example.com/v1", "Debugger", {"spec": {"ephemeralContainers": [SHELL]}}, "spec.ephemeralContainers"),
    ],
)  # fmt: skip
def test_an_unknown_kind_with_a_pod_is_refused(api_version: str, kind: str, body: dict, field: str) -> None:
    obj = k8s_object(custom(api_version, kind, body))
    assert run_policy("unknown-pod-kinds", custom(api_version, kind, body), STAGING) == [refused(kind, field, obj.type)]


def test_a_patch_of_an_unknown_kind_with_a_pod_is_refused() -> None:
    rollout = custom("argoproj.io/v1alpha1", "Rollout", {"spec": {"template": {"spec": {"containers": [SHELL]}}}})
    resource_type = "kubernetes:argoproj.io/v1alpha1:RolloutPatch"  # a CustomResourcePatch
    assert run_policy("unknown-pod-kinds", rollout, STAGING, resource_type=resource_type) == [
        refused("RolloutPatch", "spec.template.spec.containers", resource_type)
    ]


def test_an_unknown_kind_from_a_chart_is_refused_as_a_mandatory_violation() -> None:
    rollout = custom("argoproj.io/v1alpha1", "Rollout", {"spec": {"template": {"spec": {"containers": [SHELL]}}}})
    violations = check_objects([k8s_object(rollout, CHART)], STAGING)
    assert [(v.policy, v.enforcement) for v in violations] == [("unknown-pod-kinds", "mandatory")]


# Other controllers' kinds keep their containers where no Kubernetes kind does: a workflow's
# steps, a CI pipeline's tasks, a batch job's replicas. Anything of a custom kind that names a
# container image (or sets a pod's host fields) is a container the pack cannot place.
ROOT = {"image": "docker.io/library/busybox:1.37", "securityContext": {"privileged": True}}
ARGO_WORKFLOW = {"spec": {"entrypoint": "main", "templates": [{"name": "main", "container": ROOT}]}}
ARGO_SCRIPT = {"spec": {"templates": [{"name": "s", "script": {"image": "python:3.12", "source": "print(1)"}}]}}
ARGO_POD_PATCH = {"spec": {"podSpecPatch": '{"hostNetwork": true}', "templates": [{"name": "x", "suspend": {}}]}}
TEKTON_TASK = {
    "spec": {
        "steps": [
            {
                "name": "build",
                "image": "gcr.io/kaniko-project/executor:v1.23.0",
                "securityContext": {"privileged": True},
            }
        ]
    }
}
TEKTON_PIPELINE_RUN = {
    "spec": {
        "pipelineSpec": {
            "tasks": [{"name": "t", "taskSpec": {"steps": [{"name": "s", "image": "alpine:3.20", "script": "id"}]}}]
        }
    }
}
JOBSET = {
    "spec": {"replicatedJobs": [{"name": "w", "template": {"spec": {"template": {"spec": {"containers": [SHELL]}}}}}]}
}
RAY_CLUSTER = {"spec": {"headGroupSpec": {"template": {"spec": {"containers": [SHELL], "hostNetwork": True}}}}}
SPARK = {"spec": {"type": "Python", "image": "spark:3.5.1", "driver": {"cores": 1}, "executor": {"instances": 2}}}
GITHUB_RUNNER = {"spec": {"template": {"spec": {"dockerEnabled": True, "image": "summerwind/actions-runner:v2"}}}}


@pytest.mark.parametrize(
    ("api_version", "kind", "body", "field"),
    [
        ("argoproj.io/v1alpha1", "Workflow", ARGO_WORKFLOW, "spec.templates[0].container.image"),
        ("argoproj.io/v1alpha1", "WorkflowTemplate", ARGO_SCRIPT, "spec.templates[0].script.image"),
        ("argoproj.io/v1alpha1", "CronWorkflow", {"spec": {"workflowSpec": ARGO_WORKFLOW["spec"]}},
         "spec.workflowSpec.templates[0].container.image"),
        ("argoproj.io/v1alpha1", "Workflow", ARGO_POD_PATCH, "spec.podSpecPatch"),
        ("tekton.dev/v1", "Task", TEKTON_TASK, "spec.steps[0].image"),
        ("tekton.dev/v1", "PipelineRun", TEKTON_PIPELINE_RUN, "spec.pipelineSpec.tasks[0].taskSpec.steps[0].image"),
        ("jobset.x-k8s.io/v1alpha2", "JobSet", JOBSET,
         "spec.replicatedJobs[0].template.spec.template.spec.containers[0].image"),
        ("ray.io/v1", "RayCluster", RAY_CLUSTER, "spec.headGroupSpec.template.spec.containers[0].image"),
        ("sparkoperator.k8s.io/v1beta2", "SparkApplication", SPARK, "spec.image"),
        ("actions.summerwind.dev/v1alpha1", "RunnerDeployment", GITHUB_RUNNER, "spec.template.spec.image"),
    ],
)  # fmt: skip
def test_a_pod_carrying_kind_of_another_controller_is_refused(
    api_version: str, kind: str, body: dict, field: str
) -> None:
    found = run_policy("unknown-pod-kinds", custom(api_version, kind, body), STAGING)
    assert found, "passed unjudged"
    assert any(f": {field}" in message or f" {field} " in message for message in found), found


@pytest.mark.parametrize(
    ("api_version", "kind", "body"),
    [
        # Custom resources that run no container: the program's own, a certificate, a route.
        ("k8s.mariadb.com/v1alpha1", "Database", {"spec": {"mariaDbRef": {"name": "mariadb"}, "name": "nova"}}),
        ("cert-manager.io/v1", "Certificate", {"spec": {"secretName": "x", "issuerRef": {"name": "ca"}}}),
        ("gateway.networking.k8s.io/v1", "HTTPRoute", {"spec": {"rules": [{"backendRefs": [{"name": "s"}]}]}}),
        # A CustomResourceDefinition describes an image field; it runs nothing.
        ("apiextensions.k8s.io/v1", "CustomResourceDefinition", {"spec": {"versions": [{"schema": {
            "openAPIV3Schema": {"properties": {"image": {"type": "string"}, "containers": {"type": "array"}}}}}]}}),
        # Kubernetes' own kinds that hold text named image, never a pod.
        ("v1", "ConfigMap", {"data": {"image": "quay.io/x:1"}}),
        # A chart's values: the engine judges each object the chart renders.
        ("helm.sh/v4", "Chart", {"chart": "oci://x/y", "values": {"image": "quay.io/x:1"}}),
    ],
)  # fmt: skip
def test_kinds_that_run_no_container_pass(api_version: str, kind: str, body: dict) -> None:
    assert run_policy("unknown-pod-kinds", custom(api_version, kind, body), STAGING) == []
