"""Declares Kubernetes objects from manifests, with the resource options each kind needs."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from components.mechanism.meta import labelled, labels, metadata, selector
from components.mechanism.workload import Manifest, PodSpec
from components.settings.cron import TIME_ZONE

SKIP_AWAIT = "pulumi.com/skipAwait"
# Nova and Neutron schema migrations on a large database take longer than the default 10m.
JOB_TIMEOUT_MINUTES = 30
JOB_TIMEOUT = f"{JOB_TIMEOUT_MINUTES}m"
# A Job's run ends five minutes before Pulumi stops waiting for it. A run that hangs (a
# db-sync with `[database] max_retries = -1` waits for an unreachable database forever)
# then fails as DeadlineExceeded, which `pulumi up` reports as the Job's failure instead
# of a bare timeout; being unready, it is replaced by the next `pulumi up` (below).
JOB_DEADLINE_SECONDS = (JOB_TIMEOUT_MINUTES - 5) * 60
# pulumi-kubernetes waits again for a Job that failed before, and never re-runs it, unless
# the Job asks to be replaced when it is found unready (provider.go, Diff, Jobs only).
REPLACE_UNREADY = {"pulumi.com/replaceUnready": "true"}
# A periodic run that could not start within two minutes of its time is skipped, not
# started late next to the following one (the controller checks every 10 seconds).
CRON_STARTING_DEADLINE_SECONDS = 120


def _opts(parent: pulumi.Resource, depends_on: Sequence[pulumi.Resource] = (), **extra: Any) -> pulumi.ResourceOptions:
    return pulumi.ResourceOptions(parent=parent, depends_on=list(depends_on), **extra)


def deployment(
    name: str,
    namespace: str,
    pod: PodSpec,
    replicas: int,
    parent: pulumi.Resource,
    depends_on: Sequence[pulumi.Resource],
    *,
    recreate: bool = False,
) -> k8s.apps.v1.Deployment:
    # Never take more than one replica away during a rollout; a singleton stops before its
    # successor starts (Recreate), so two never act at once.
    strategy: Manifest = (
        {"type": "Recreate"}
        if recreate
        else {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1 if replicas > 1 else 0, "maxSurge": 1}}
    )
    return k8s.apps.v1.Deployment(
        name,
        metadata=labelled(metadata(name, namespace, pod.service, pod.component), pod.object_labels),
        spec={
            "replicas": replicas,
            "selector": {"matchLabels": pod.selector()},
            "strategy": strategy,
            "template": pod.template(),
        },
        opts=_opts(parent, depends_on),
    )


def statefulset(
    name: str,
    namespace: str,
    pod: PodSpec,
    replicas: int,
    parent: pulumi.Resource,
    depends_on: Sequence[pulumi.Resource],
) -> k8s.apps.v1.StatefulSet:
    """Pods with stable names, <name>-0, <name>-1, ..., each found in DNS as <pod>.<name>
    through the headless Service of the same name (`service(..., headless=True)`)."""
    return k8s.apps.v1.StatefulSet(
        name,
        metadata=labelled(metadata(name, namespace, pod.service, pod.component), pod.object_labels),
        spec={
            "replicas": replicas,
            "serviceName": name,
            "selector": {"matchLabels": pod.selector()},
            # The replicas do not depend on each other: create them all at once, not one after
            # the other (Pulumi waits until every one is ready). Updates still roll one by one.
            "podManagementPolicy": "Parallel",
            "updateStrategy": {"type": "RollingUpdate"},
            "template": pod.template(),
        },
        opts=_opts(parent, depends_on),
    )


def daemonset(
    name: str,
    namespace: str,
    pod: PodSpec,
    parent: pulumi.Resource,
    depends_on: Sequence[pulumi.Resource],
    *,
    on_delete: bool = False,
    max_unavailable: int | str = 1,
) -> k8s.apps.v1.DaemonSet:
    strategy: Manifest = (
        {"type": "OnDelete"}
        if on_delete
        else {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": max_unavailable}}
    )
    # pulumi-kubernetes awaits a DaemonSet until every pod runs its template (kstatus), which
    # under OnDelete happens only when an operator deletes the pods: any template change would
    # hang `pulumi up` until its timeout (provider/pkg/await/daemonset.go). So OnDelete pods
    # (libvirt, OVS) are not awaited, on create either; nothing starts too early for it:
    # - their clients wait for their sockets at every start (wait_for_sockets.sh): nova-compute
    #   for /run/libvirt/libvirt-sock, the OVS agent for /run/openvswitch/db.sock. The agent
    #   needs no socket of vswitchd: it programs the switch through OVSDB, and neutron's agent
    #   waits for vswitchd to connect to its OpenFlow controller (setup_integration_br) before
    #   it connects to RabbitMQ (setup_rpc);
    # - those clients are awaited, and ready only once they hold their own RabbitMQ connection
    #   (health_probe.py), so what waits for them (host discovery) waits for libvirt and OVS.
    # Under all-in-one the clients share the OnDelete pod; host discovery then may run before
    # nova-compute registers, and its CronJob maps the host minutes later.
    # tests/test_node_ordering.py checks all of this on the plans.
    awaiting = {SKIP_AWAIT: "true"} if on_delete else {}
    return k8s.apps.v1.DaemonSet(
        name,
        metadata=labelled(metadata(name, namespace, pod.service, pod.component, **awaiting), pod.object_labels),
        spec={
            "selector": {"matchLabels": pod.selector()},
            "updateStrategy": strategy,
            "template": pod.template(),
        },
        opts=_opts(parent, depends_on),
    )


def job(
    name: str,
    namespace: str,
    pod: PodSpec,
    parent: pulumi.Resource,
    depends_on: Sequence[pulumi.Resource],
    aliases: Sequence[pulumi.Alias] = (),
) -> k8s.batch.v1.Job:
    return k8s.batch.v1.Job(
        name,
        metadata=labelled(metadata(name, namespace, pod.service, pod.component, **REPLACE_UNREADY), pod.object_labels),
        spec={"backoffLimit": 6, "activeDeadlineSeconds": JOB_DEADLINE_SECONDS, "template": pod.template()},
        # A Job's template is immutable: a changed script or image replaces the Job, which
        # re-runs it. Its fixed name means the old one must go first.
        opts=_opts(
            parent,
            depends_on,
            delete_before_replace=True,
            custom_timeouts=pulumi.CustomTimeouts(create=JOB_TIMEOUT, update=JOB_TIMEOUT),
            aliases=list(aliases) or None,
        ),
    )


def cron_job(
    name: str,
    namespace: str,
    pod: PodSpec,
    schedule: str,
    parent: pulumi.Resource,
    depends_on: Sequence[pulumi.Resource],
) -> k8s.batch.v1.CronJob:
    return k8s.batch.v1.CronJob(
        name,
        metadata=labelled(metadata(name, namespace, pod.service, pod.component), pod.object_labels),
        spec={
            "schedule": schedule,
            # A slow run must not pile up behind itself.
            "concurrencyPolicy": "Forbid",
            "successfulJobsHistoryLimit": 1,
            "failedJobsHistoryLimit": 3,
            "startingDeadlineSeconds": CRON_STARTING_DEADLINE_SECONDS,
            # Schedules are UTC whatever the controller's local time, as the settings check them
            # (components/settings/cron.py; spec.timeZone, beta and on by default from 1.25, GA in 1.27).
            "timeZone": TIME_ZONE,
            # With Forbid, one run that hangs would block every later one: it gets the
            # deadline of a one-off run of the same step.
            "jobTemplate": {
                "spec": {"backoffLimit": 2, "activeDeadlineSeconds": JOB_DEADLINE_SECONDS, "template": pod.template()}
            },
        },
        opts=_opts(parent, depends_on),
    )


def volume_claim(
    name: str,
    namespace: str,
    service_name: str,
    size: str,
    storage_class: str | None,
    shared: bool,
    parent: pulumi.Resource,
) -> k8s.core.v1.PersistentVolumeClaim:
    spec: Manifest = {
        # Several replicas on several nodes need a volume they can all mount.
        "accessModes": ["ReadWriteMany" if shared else "ReadWriteOnce"],
        "resources": {"requests": {"storage": size}},
    }
    if storage_class:
        spec["storageClassName"] = storage_class
    return k8s.core.v1.PersistentVolumeClaim(
        name,
        metadata=metadata(name, namespace, service_name, "storage"),
        spec=spec,
        # Deleting the claim would delete every image or volume in it.
        opts=_opts(parent, protect=False, retain_on_delete=True),
    )


def service(
    name: str,
    namespace: str,
    service_name: str,
    component: str,
    ports: Mapping[str, int],
    parent: pulumi.Resource,
    *,
    headless: bool = False,
) -> k8s.core.v1.Service:
    spec: Manifest = {
        "type": "ClusterIP",
        "selector": selector(service_name, component),
        "ports": [{"name": port_name, "port": port, "targetPort": port} for port_name, port in ports.items()],
    }
    annotations = {}
    if headless:
        # No virtual IP: DNS names each ready pod (<pod>.<name>), so clients address each one.
        spec.update(clusterIP="None", publishNotReadyAddresses=False)
    else:
        # pulumi-kubernetes waits up to 10 minutes for a Service with a selector to have Ready
        # endpoints, from the moment it creates it. The Service depends on nothing, so it is
        # created at the start of a first deploy, while its pods wait for the database, schema
        # and registration Jobs; an API created later than 10 minutes in failed `pulumi up`
        # (found by the lab). Readiness is awaited on the workload itself.
        annotations[SKIP_AWAIT] = "true"
    return k8s.core.v1.Service(
        name,
        metadata=metadata(name, namespace, service_name, component, **annotations),
        spec=spec,
        opts=_opts(parent),
    )


def disruption_budget(
    name: str, namespace: str, service_name: str, component: str, parent: pulumi.Resource
) -> k8s.policy.v1.PodDisruptionBudget:
    return k8s.policy.v1.PodDisruptionBudget(
        name,
        metadata=metadata(name, namespace, service_name, component),
        spec={"maxUnavailable": 1, "selector": {"matchLabels": selector(service_name, component)}},
        opts=_opts(parent),
    )


def secret(
    name: str,
    namespace: str,
    service_name: str,
    data: Mapping[str, pulumi.Input[str]] | pulumi.Output[Mapping[str, str]],
    parent: pulumi.Resource,
    *,
    initial_data_only: bool = False,
    depends_on: Sequence[pulumi.Resource] = (),
) -> k8s.core.v1.Secret:
    """A Secret of generated or rendered content.

    `initial_data_only`: Pulumi creates the data and the cluster owns it from then on (keys that
    a CronJob rotates in place). The provider turns stringData into data when it checks the
    inputs (clients/unstructured.go normalizeSecret), so both are ignored; on an update for
    another reason it sends the live value of an ignored field (await.go handleSSAIgnoreFields).
    """
    ignored = ["data", "stringData"] if initial_data_only else []
    return k8s.core.v1.Secret(
        name,
        metadata=metadata(name, namespace, service_name, "config"),
        type="Opaque",
        string_data=data,
        opts=_opts(parent, depends_on, ignore_changes=ignored),
    )


def service_account(
    name: str,
    namespace: str,
    service_name: str,
    component: str,
    rules: Sequence[Manifest],
    parent: pulumi.Resource,
    narrowed_by: Sequence[pulumi.Resource] = (),
) -> list[pulumi.Resource]:
    """A ServiceAccount bound to a Role of exactly `rules` in the namespace; its pods get its token. The
    binding waits for `narrowed_by` (an admission policy that narrows the rules: admission_policy)."""
    meta = metadata(name, namespace, service_name, component)
    account = k8s.core.v1.ServiceAccount(
        name,
        metadata=meta,
        # Only pods that ask for it (automountServiceAccountToken in their spec) get a token.
        automount_service_account_token=False,
        opts=_opts(parent),
    )
    role = k8s.rbac.v1.Role(name, metadata=meta, rules=list(rules), opts=_opts(parent))
    binding = k8s.rbac.v1.RoleBinding(
        name,
        metadata=meta,
        role_ref={"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
        subjects=[{"kind": "ServiceAccount", "name": name, "namespace": namespace}],
        opts=_opts(parent, [account, role, *narrowed_by]),
    )
    return [account, role, binding]


def config_map(
    name: str, namespace: str, service_name: str, data: Mapping[str, str], parent: pulumi.Resource
) -> k8s.core.v1.ConfigMap:
    """For content without secrets only (scripts); configs with passwords go in `secret`."""
    return k8s.core.v1.ConfigMap(
        name,
        metadata=metadata(name, namespace, service_name, "scripts"),
        data=dict(data),
        opts=_opts(parent),
    )


def admission_policy(
    name: str, service_name: str, component: str, spec: Manifest, parent: pulumi.Resource
) -> list[pulumi.Resource]:
    """A ValidatingAdmissionPolicy and its binding, which denies what the policy refuses; cluster-scoped,
    so `name` carries the stack's namespace. Bind the rights it narrows only after both exist."""
    meta = {"name": name, "labels": labels(service_name, component)}
    policy = k8s.admissionregistration.v1.ValidatingAdmissionPolicy(name, metadata=meta, spec=spec, opts=_opts(parent))
    binding = k8s.admissionregistration.v1.ValidatingAdmissionPolicyBinding(
        name, metadata=meta, spec={"policyName": name, "validationActions": ["Deny"]}, opts=_opts(parent, [policy])
    )
    return [policy, binding]
