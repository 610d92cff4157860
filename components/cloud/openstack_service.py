"""Turns the nodes of a service's part of the deploy graph into Kubernetes objects.

The one mechanism every service uses. For a service it creates, as `components.cloud.build` walks
the graph: a Secret with its rendered config files and one with its passwords, a ConfigMap
with the scripts its Jobs run (`components.mechanism.service_configs` names them), the bootstrap Jobs
(standard and its own) and its processes with Services and disruption budgets. Each waits
for exactly the graph's needs of its node, resolved to the resources created before it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from importlib import resources
from typing import Any

import pulumi

from components.cloud.graph import Node, steps_of
from components.infrastructure import ca_rotation
from components.infrastructure.credentials import Credentials
from components.mechanism import database_clients, internal_tls, kube, oslo
from components.mechanism.api import probe_on_stack
from components.mechanism.created import DeployGraph
from components.mechanism.images import profile
from components.mechanism.meta import checksum
from components.mechanism.service_configs import (
    OWN_PASSWORDS,
    ConfigObject,
    Holds,
    config_path,
    node_etc,
    node_keys,
    scripts_of,
)
from components.mechanism.spec import Process, RenderContext, ServiceSpec, Step
from components.mechanism.workload import (
    Container,
    Mount,
    PodSpec,
    config_map_volume,
    control_plane_pod,
    secret_volume,
)
from components.nodes.nodepod import avoid, container_security, host_path_mounts, host_path_volumes, pod_overrides
from components.settings import scheduling
from components.settings.model import Settings
from components.tables.roles import NodeKind, NodePod

CHECKSUM_ANNOTATION = "openstack.org/config-checksum"
SCRIPTS_DIR = "/scripts"


@dataclass(frozen=True)
class BuildContext:
    settings: Settings
    credentials: Credentials
    graph: DeployGraph  # what is created so far, by name
    # The service components by spec name (a moved Job's alias names its former parent).
    services: Mapping[str, pulumi.Resource] = field(default_factory=dict)


def script_text(name: str) -> str:
    return resources.files("components.scripts").joinpath(name).read_text()


class OpenStackService(pulumi.ComponentResource):
    def __init__(self, spec: ServiceSpec, ctx: BuildContext, opts: pulumi.ResourceOptions | None = None):
        if spec.former_type:
            moved = pulumi.ResourceOptions(aliases=[pulumi.Alias(type_=spec.former_type)])
            opts = pulumi.ResourceOptions.merge(opts, moved)
        super().__init__(f"openstack:service:{spec.name.capitalize()}", spec.name, None, opts)
        self.spec, self.ctx = spec, ctx
        settings = ctx.settings
        self.secrets = self._secrets()
        self.connecting = database_clients.connecting_files(spec, settings, self.secrets)
        self.files: pulumi.Output[dict[str, str]] = pulumi.Output.secret(
            pulumi.Output.all(**self.secrets).apply(lambda resolved: spec.render(RenderContext(settings, resolved)))
        )

    def emit(self, node: Node) -> pulumi.Resource:
        """Create the node's object, waiting for what the graph says it needs."""
        source = node.source
        if isinstance(source, ConfigObject):
            resource = self._config_object(source)
        elif isinstance(source, Step):
            resource = self._job(source, self.ctx.graph.resolve((n.name for n in node.needs), waiter=node.key))
        elif isinstance(source, Process):
            resource = self._process(source, self.ctx.graph.resolve((n.name for n in node.needs), waiter=node.key))
        else:
            raise TypeError(f"{node.kind} {node.name}: service {self.spec.name} cannot build {source!r}")
        return self.ctx.graph.add(node.name, resource) if node.waitable else resource

    def finish(self) -> None:
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

    def _config_object(self, config: ConfigObject) -> pulumi.Resource:
        settings, name, ns = self.ctx.settings, self.spec.name, self.ctx.settings.namespace
        if config.holds is Holds.FILES:
            return kube.secret(config.name, ns, name, self.files, self)
        if config.holds is Holds.PASSWORDS:
            own = {k: v for k, v in self.secrets.items() if k in OWN_PASSWORDS}
            return kube.secret(config.name, ns, name, own, self)
        if config.holds is Holds.OWNED:
            keys = self.spec.extra_secrets[config.name]
            values = {key: self.ctx.credentials.shared(shared) for key, shared in keys.items()}
            initial_only = config.name in self.spec.cluster_owned_data
            return kube.secret(config.name, ns, name, values, self, initial_data_only=initial_only)
        if config.holds is Holds.NODE_FILES:
            mounted = node_keys(self.spec)
            node_files: pulumi.Output[dict[str, str]] = pulumi.Output.secret(
                self.files.apply(lambda f: {k: f[k] for k in mounted})
            )
            return kube.secret(config.name, ns, name, node_files, self)
        data = {script: script_text(script) for script in scripts_of(self.spec, steps_of(self.spec, settings))}
        return kube.config_map(config.name, ns, name, data, self)

    def _database_client(self, config_files: tuple[str, ...]) -> dict[str, str]:
        """Labels that mark a workload whose config connects to a database (a restore stops it)."""
        return database_clients.labels_for(config_files, lambda entry: self._config_path(entry)[0], self.connecting)

    def _config_path(self, entry: str) -> tuple[str, str]:
        return config_path(self.spec, entry)

    def _mounts(self, config_files: tuple[str, ...], scripts: tuple[str, ...], ca: bool = True) -> tuple[Mount, ...]:
        config = tuple(Mount("etc", path, sub_path=key) for key, path in map(self._config_path, config_files))
        scripts_mounted = tuple(Mount("bin", f"{SCRIPTS_DIR}/{s}", sub_path=s) for s in scripts)
        return config + scripts_mounted + (self._ca_mount() if ca else ())

    def _ca_mount(self) -> tuple[Mount, ...]:
        """Every container of the service verifies the internal APIs with the internal CA."""
        return (internal_tls.CA_MOUNT,) if self.ctx.settings.tls.internal_enabled else ()

    def _ca_volume(self, ca: bool = True) -> tuple[dict[str, Any], ...]:
        return (internal_tls.ca_volume(),) if ca and self.ctx.settings.tls.internal_enabled else ()

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

    def _job(self, step: Step, waits: list[pulumi.Resource]) -> pulumi.Resource:
        settings = self.ctx.settings
        container = Container(
            name=step.name,
            image=settings.image(step.image, step.release),
            command=step.command,
            env=step.env,
            mounts=self._mounts(step.config_files, step.scripts, step.trusts_internal_ca) + step.extra_mounts,
            resources=settings.resources_of(step.name),
        )
        service = step.service or self.spec.name
        component = step.name.removeprefix(f"{service}-")
        account: list[pulumi.Resource] = []
        if step.api_access:
            rules = [access.rule() for access in step.api_access]
            narrowing = (
                kube.admission_policy(f"{settings.namespace}-{step.name}", service, component, step.admission, self)
                if step.admission is not None
                else []
            )
            account = kube.service_account(step.name, settings.namespace, service, component, rules, self, narrowing)
        pod = control_plane_pod(
            settings,
            service=service,
            component=component,
            containers=(container,),
            volumes=self._volumes(step.config_files, step.scripts)
            + step.extra_volumes
            + self._ca_volume(step.trusts_internal_ca),
            uid=profile(step.image).uid,
            # A failed run keeps its pod and its logs; the Job controller starts a new pod
            # per retry (backoffLimit), where OnFailure would restart the same one in place.
            restart_policy="Never",
            object_labels=self._database_client(step.config_files),
            annotations={CHECKSUM_ANNOTATION: self._checksum(step.config_files, step.scripts)},
            service_account=step.name if step.api_access else None,
        )
        waits = waits + account
        if step.schedule:
            return kube.cron_job(step.name, settings.namespace, pod, step.schedule, self, waits)
        moved = [pulumi.Alias(parent=self.ctx.services[step.moved_from])] if step.moved_from else []
        return kube.job(step.name, settings.namespace, pod, self, waits, aliases=moved)

    def _container(self, process: Process, node_pod: NodePod | None) -> Container:
        settings = self.ctx.settings
        mounts = self._mounts(process.config_files, process.scripts) + process.extra_mounts
        mounts += tuple(Mount(c.name, c.mount_path, read_only=False) for c in process.claims)
        probe = probe_on_stack(process.probe, settings)
        if internal_tls.serves_tls(settings, process.name):
            # The API's own certificate, in its own container only; its probe speaks TLS too.
            mounts += (internal_tls.SERVER_MOUNT,)
            probe = dataclasses.replace(probe, https=True) if probe and probe.http_path else probe
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
            probe=probe,
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
        # Containers of one pod may declare the same volume (libvirt and nova-compute in one pod
        # both mount a Ceph keyring): a pod lists each name once.
        extra = {v["name"]: v for p in everything for v in p.extra_volumes}
        volumes = self._volumes(config_files, scripts, node) + tuple(extra.values()) + self._ca_volume()
        volumes += tuple(
            internal_tls.server_volume(p.name) for p in everything if internal_tls.serves_tls(settings, p.name)
        )
        volumes += tuple(
            {"name": c.name, "persistentVolumeClaim": {"claimName": c.name}} for p in everything for c in p.claims
        )
        node_pod = process.node_pod
        service = process.service or name
        # What node and control-plane pods share; each kind adds its own below.
        common: dict[str, Any] = dict(
            object_labels=self._database_client(config_files),
            service=node_pod.service if node_pod else service,
            component=node_pod.name if node_pod else process.component_in(name),
            containers=tuple(self._container(p, node_pod) for p in (process, *process.sidecars)),
            init_containers=tuple(self._container(p, node_pod) for p in process.init_containers),
            # Nothing to checksum (memcached), nothing to roll the pods for.
            annotations={
                **({CHECKSUM_ANNOTATION: self._checksum(config_files, scripts)} if config_files or scripts else {}),
                **process.pod_annotations,
                # A process that reads the CA file once restarts when the trusted CAs change.
                **ca_rotation.restart_annotation(settings, self.spec, process),
            },
            extra_labels=dict(process.extra_labels),
            termination_grace=process.termination_grace,
        )
        if node_pod is None:
            return control_plane_pod(
                settings,
                volumes=volumes,
                uid=profile(process.image).uid,
                service_account=process.service_account,
                priority_class=settings.priority_classes.data_stores if process.data_store else None,
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
        tolerations = {
            NodeKind.COMPUTE: settings.tolerations.compute,
            NodeKind.NETWORK: settings.tolerations.network,
            NodeKind.STORAGE: settings.tolerations.storage,
        }[node_pod.node]
        return PodSpec(
            volumes=volumes + host_path_volumes(node_pod.roles),
            node_selector={**base, **process.node_selector},
            tolerations=(*scheduling.manifests(tolerations), *process.tolerations),
            priority_class=settings.priority_classes.node_agents,
            pod_overrides=overrides,
            service_account=process.service_account,
            **common,
        )

    def _process(self, process: Process, waits: list[pulumi.Resource]) -> pulumi.Resource:
        settings, name, ns = self.ctx.settings, self.spec.name, self.ctx.settings.namespace
        pod = self._pod(process)
        for claim in process.claims:
            storage_class = settings.storage.class_for(claim.use)
            kube.volume_claim(claim.name, ns, name, claim.size, storage_class, claim.shared, self)
        if process.node_pod is not None:
            workload = kube.daemonset(
                process.object_name,
                ns,
                pod,
                self,
                waits,
                on_delete=process.on_delete,
                max_unavailable=process.max_unavailable,
            )
            return workload
        replicas = 1 if process.singleton else settings.replicas_of(process.name)
        if process.stateful:
            workload = kube.statefulset(process.name, ns, pod, replicas, self, waits)
        else:
            workload = kube.deployment(process.name, ns, pod, replicas, self, waits, recreate=process.singleton)
        if process.port:
            ports = {process.port_name: process.port}
            kube.service(process.name, ns, pod.service, pod.component, ports, self, headless=process.stateful)
        if settings.ha and replicas > 1:
            kube.disruption_budget(process.name, ns, pod.service, pod.component, self)
        return workload
