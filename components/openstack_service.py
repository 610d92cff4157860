"""Turns a `ServiceSpec` into Kubernetes objects: the one mechanism every service uses.

For a service it declares: a Secret with its rendered config files and one with its
passwords, a ConfigMap with the scripts its Jobs run, the bootstrap Jobs (standard and
its own) and its processes with Services and disruption budgets. Each Job and process
waits for exactly what its `needs` name, resolved through the deploy graph.
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib import resources
from typing import Any

import pulumi

from components import kube, oslo
from components.bootstrap import passwords_secret, standard_steps
from components.credentials import Credentials
from components.graph import DeployGraph
from components.images import profile
from components.meta import checksum
from components.nodepod import avoid, container_security, host_path_mounts, host_path_volumes, pod_overrides
from components.roles import NodeKind, NodePod
from components.settings import Settings
from components.spec import Process, RenderContext, ServiceSpec, Step
from components.workload import (
    Container,
    Mount,
    PodSpec,
    config_map_volume,
    control_plane_pod,
    secret_volume,
)

CHECKSUM_ANNOTATION = "openstack.org/config-checksum"
SCRIPTS_DIR = "/scripts"


@dataclass(frozen=True)
class BuildContext:
    settings: Settings
    credentials: Credentials
    graph: DeployGraph


def node_etc(service: str) -> str:
    """The Secret of a service's files that its node pods mount (and nothing else)."""
    return f"{service}-node-etc"


def script_text(name: str) -> str:
    return resources.files("components.scripts").joinpath(name).read_text()


class OpenStackService(pulumi.ComponentResource):
    def __init__(self, spec: ServiceSpec, ctx: BuildContext, opts: pulumi.ResourceOptions | None = None):
        super().__init__(f"openstack:service:{spec.name.capitalize()}", spec.name, None, opts)
        self.spec, self.ctx = spec, ctx
        settings = ctx.settings
        secrets = self._secrets()
        self.files: pulumi.Output[dict[str, str]] = pulumi.Output.secret(
            pulumi.Output.all(**secrets).apply(lambda resolved: spec.render(RenderContext(settings, resolved)))
        )
        steps = standard_steps(spec, settings) + spec.steps
        self.config_objects = self._config_objects(steps, secrets)
        # A step that waits for this service's own processes (host discovery waits for the
        # compute DaemonSets) is declared after them; every other step before.
        own = {p.object_name for p in spec.processes}
        later = [step for step in steps if own & set(step.needs)]
        self.jobs = {step.name: self._job(step) for step in steps if step not in later}
        self.workloads = {process.object_name: self._process(process) for process in spec.processes}
        self.jobs |= {step.name: self._job(step) for step in later}
        self.register_outputs({})

    def _secrets(self) -> dict[str, pulumi.Output[str]]:
        creds, name = self.ctx.credentials, self.spec.name
        own: dict[str, pulumi.Output[str]] = {}
        if self.spec.databases:
            own["database"] = creds.database(name)
        if self.spec.messaging:
            own["rabbitmq"] = creds.messaging(name)
        if self.spec.catalog:
            own["keystone"] = creds.keystone_user(name)
            own[oslo.MEMCACHE_KEY] = creds.shared(f"{name}-memcache")
        for shared in self.spec.shared_secrets:
            own[shared] = creds.shared(shared)
        return own

    def _config_objects(self, steps: tuple[Step, ...], secrets: dict[str, pulumi.Output[str]]) -> list[pulumi.Resource]:
        settings, name = self.ctx.settings, self.spec.name
        objects: list[pulumi.Resource] = [kube.secret(f"{name}-etc", settings.namespace, name, self.files, self)]
        own_passwords = {k: v for k, v in secrets.items() if k in ("database", "rabbitmq", "keystone")}
        if own_passwords:
            objects.append(kube.secret(passwords_secret(name), settings.namespace, name, own_passwords, self))
        for secret_name, keys in self.spec.extra_secrets.items():
            values = {key: self.ctx.credentials.shared(shared) for key, shared in keys.items()}
            initial_only = secret_name in self.spec.cluster_owned_data
            objects.append(
                kube.secret(secret_name, settings.namespace, name, values, self, initial_data_only=initial_only)
            )
        processes = [p for top in self.spec.processes for p in (top, *top.sidecars, *top.init_containers)]
        node_keys = self._node_keys()
        if node_keys:
            # Node pods get a Secret of their own with only the files they mount: the kubelet of a
            # node may read every Secret its pods reference, whole, and a compromised hypervisor
            # must not learn what the control plane's files hold (database passwords).
            node_files = pulumi.Output.secret(self.files.apply(lambda f: {k: f[k] for k in node_keys}))
            objects.append(kube.secret(node_etc(name), settings.namespace, name, node_files, self))
        self.scripts = sorted({s for step in steps for s in step.scripts} | {s for p in processes for s in p.scripts})
        if self.scripts:
            data = {script: script_text(script) for script in self.scripts}
            objects.append(kube.config_map(f"{name}-bin", settings.namespace, name, data, self))
        return objects

    def _node_keys(self) -> list[str]:
        node = [p for top in self.spec.processes if top.node_pod for p in (top, *top.sidecars, *top.init_containers)]
        return sorted({self._config_path(entry)[0] for p in node for entry in p.config_files})

    def _config_path(self, entry: str) -> tuple[str, str]:
        """A config entry is a rendered file's name, or 'name=/absolute/path' to mount it elsewhere."""
        key, _, path = entry.partition("=")
        return key, path or f"{self.spec.config_dir}/{key}"

    def _mounts(self, config_files: tuple[str, ...], scripts: tuple[str, ...]) -> tuple[Mount, ...]:
        config = tuple(Mount("etc", path, sub_path=key) for key, path in map(self._config_path, config_files))
        return config + tuple(Mount("bin", f"{SCRIPTS_DIR}/{s}", sub_path=s) for s in scripts)

    def _volumes(
        self, config_files: tuple[str, ...], scripts: tuple[str, ...], node: bool = False
    ) -> tuple[dict[str, Any], ...]:
        volumes: tuple[dict[str, Any], ...] = ()
        if config_files:
            etc = node_etc(self.spec.name) if node else f"{self.spec.name}-etc"
            volumes += (secret_volume("etc", etc),)
        if scripts:
            volumes += (config_map_volume("bin", f"{self.spec.name}-bin"),)
        return volumes

    def _checksum(self, config_files: tuple[str, ...], scripts: tuple[str, ...]) -> pulumi.Output[str]:
        # A digest of secret content reveals nothing usable, so it may be shown in plain text.
        texts = {s: script_text(s) for s in scripts}
        keys = [self._config_path(entry)[0] for entry in config_files]
        return pulumi.Output.unsecret(self.files.apply(lambda f: checksum({k: f[k] for k in keys}, texts)))

    def _waits_for(self, waiter: str, needs: tuple[str, ...]) -> list[pulumi.Resource]:
        return [*self.ctx.graph.resolve(needs, waiter=waiter), *self.config_objects]

    def _component(self, name: str, service: str | None = None) -> str:
        return name.removeprefix(f"{service or self.spec.name}-") or name

    def _job(self, step: Step) -> pulumi.Resource:
        settings = self.ctx.settings
        container = Container(
            name=step.name,
            image=settings.image(step.image),
            command=step.command,
            env=step.env,
            mounts=self._mounts(step.config_files, step.scripts) + step.extra_mounts,
            resources=settings.resources_of(step.name),
        )
        service = step.service or self.spec.name
        component = step.name.removeprefix(f"{service}-")
        account: list[pulumi.Resource] = []
        if step.api_access:
            rules = [access.rule() for access in step.api_access]
            account = kube.service_account(step.name, settings.namespace, service, component, rules, self)
        pod = control_plane_pod(
            settings,
            service=service,
            component=component,
            containers=(container,),
            volumes=self._volumes(step.config_files, step.scripts) + step.extra_volumes,
            uid=profile(step.image).uid,
            # A failed run keeps its pod and its logs; the Job controller starts a new pod
            # per retry (backoffLimit), where OnFailure would restart the same one in place.
            restart_policy="Never",
            annotations={CHECKSUM_ANNOTATION: self._checksum(step.config_files, step.scripts)},
            service_account=step.name if step.api_access else None,
        )
        waits = self._waits_for(step.name, step.needs) + account
        if step.schedule:
            # A repeating step is nothing anything waits for, so it stays out of the graph.
            return kube.cron_job(step.name, settings.namespace, pod, step.schedule, self, waits)
        job = kube.job(step.name, settings.namespace, pod, self, waits)
        return self.ctx.graph.add(step.name, job)

    def _container(self, process: Process, node_pod: NodePod | None) -> Container:
        settings = self.ctx.settings
        mounts = self._mounts(process.config_files, process.scripts) + process.extra_mounts
        mounts += tuple(Mount(c.name, c.mount_path, read_only=False) for c in process.claims)
        security, limited = None, True
        if node_pod is not None:
            role = node_pod.role(process.name)
            security = container_security(role)
            mounts += host_path_mounts(role)
            limited = not role.hosts_guests
        return Container(
            name=process.name,
            image=settings.image(process.image),
            command=process.command,
            env=process.env,
            mounts=mounts,
            probe=process.probe,
            ports=(process.port,) if process.port else (),
            resources=settings.resources_of(process.name),
            security_context=security,
            lifecycle=process.lifecycle,
            limited=limited,
        )

    def _pod(self, process: Process) -> PodSpec:
        settings, name = self.ctx.settings, self.spec.name
        everything = (process, *process.sidecars, *process.init_containers)
        config_files = tuple(dict.fromkeys(f for p in everything for f in p.config_files))
        scripts = tuple(dict.fromkeys(s for p in everything for s in p.scripts))
        node = process.node_pod is not None
        volumes = self._volumes(config_files, scripts, node) + tuple(v for p in everything for v in p.extra_volumes)
        volumes += tuple(
            {"name": c.name, "persistentVolumeClaim": {"claimName": c.name}} for p in everything for c in p.claims
        )
        node_pod = process.node_pod
        service = process.service or name
        common = dict(
            service=node_pod.service if node_pod else service,
            component=node_pod.name if node_pod else self._component(process.name, service),
            containers=tuple(self._container(p, node_pod) for p in (process, *process.sidecars)),
            init_containers=tuple(self._container(p, node_pod) for p in process.init_containers),
            annotations={CHECKSUM_ANNOTATION: self._checksum(config_files, scripts)},
            extra_labels=dict(process.extra_labels),
            termination_grace=process.termination_grace,
        )
        if node_pod is None:
            return control_plane_pod(
                settings,
                volumes=volumes,
                uid=profile(process.image).uid,
                service_account=process.service_account,
                **common,
            )
        selectors = settings.node_selectors
        base = {
            NodeKind.COMPUTE: selectors.compute,
            NodeKind.NETWORK: selectors.network,
            NodeKind.STORAGE: selectors.storage,
        }[node_pod.node]
        overrides = pod_overrides(node_pod)
        if process.avoid_nodes:
            overrides["affinity"] = avoid(process.avoid_nodes)
        return PodSpec(
            volumes=volumes + host_path_volumes(node_pod.roles),
            node_selector={**base, **process.node_selector},
            pod_overrides=overrides,
            **common,
        )

    def _process(self, process: Process) -> pulumi.Resource:
        settings, name, ns = self.ctx.settings, self.spec.name, self.ctx.settings.namespace
        pod = self._pod(process)
        for claim in process.claims:
            storage = settings.storage
            kube.volume_claim(claim.name, ns, name, claim.size, storage.storage_class, claim.shared, self)
        waits = self._waits_for(process.object_name, process.needs)
        if process.node_pod is not None:
            workload = kube.daemonset(process.object_name, ns, pod, self, waits, on_delete=process.on_delete)
            return self.ctx.graph.add(process.object_name, workload)
        replicas = 1 if process.singleton else settings.replicas_of(process.name)
        workload = kube.deployment(process.name, ns, pod, replicas, self, waits, recreate=process.singleton)
        if process.port:
            kube.service(process.name, ns, pod.service, pod.component, {"api": process.port}, self)
        if settings.ha and replicas > 1:
            kube.disruption_budget(process.name, ns, pod.service, pod.component, self)
        return self.ctx.graph.add(process.name, workload)
