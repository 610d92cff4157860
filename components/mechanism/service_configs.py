"""The config objects of a service, by name: which Secrets and ConfigMaps it has and what they hold.

Pure data (no Pulumi): the deploy graph names them as what every Job and process of the
service waits for, and the emitter (`components.cloud.openstack_service`) creates them from it.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from enum import StrEnum

from components.mechanism.bootstrap import passwords_secret
from components.mechanism.spec import Process, ServiceSpec, Step

# The keys of a service's passwords Secret: the credentials of its own users.
OWN_PASSWORDS = ("database", "rabbitmq", "keystone")


class Holds(StrEnum):
    FILES = "files"  # every rendered config file: `<service>-etc`
    PASSWORDS = "passwords"  # its own users' passwords, for the Jobs that create those users
    NODE_FILES = "node files"  # only the files its node pods mount
    SCRIPTS = "scripts"  # the scripts its Jobs and containers run (a ConfigMap)
    OWNED = "owned"  # a further Secret of the service (ServiceSpec.extra_secrets)


# Why a Job or process waits for each: its pods start with the current content.
REASONS = {
    Holds.FILES: "holds its service's rendered config files ({name})",
    Holds.PASSWORDS: "holds the passwords of its service's own users ({name})",
    Holds.NODE_FILES: "holds the config files of its service that node pods mount ({name})",
    Holds.SCRIPTS: "holds the scripts its service's Jobs and containers run ({name})",
    Holds.OWNED: "a Secret its service owns ({name})",
}


@dataclass(frozen=True)
class ConfigObject:
    name: str
    kind: str  # Secret or ConfigMap
    holds: Holds

    @property
    def reason(self) -> str:
        return REASONS[self.holds].format(name=self.name)


def node_etc(service: str) -> str:
    """The Secret of a service's files that its node pods mount (and nothing else)."""
    return f"{service}-node-etc"


def config_path(spec: ServiceSpec, entry: str) -> tuple[str, str]:
    """A config entry is a rendered file's name, or 'name=/absolute/path' to mount it elsewhere."""
    key, _, path = entry.partition("=")
    return key, path or f"{spec.config_dir}/{key}"


def containers(process: Process) -> tuple[Process, ...]:
    return (process, *process.sidecars, *process.init_containers)


def node_keys(spec: ServiceSpec) -> list[str]:
    """The rendered files that the service's node pods mount."""
    node = [p for top in spec.processes if top.node_pod for p in containers(top)]
    return sorted({config_path(spec, entry)[0] for p in node for entry in p.config_files})


def scripts_of(spec: ServiceSpec, steps: tuple[Step, ...]) -> list[str]:
    """Every script its Jobs and containers run, mounted from its `<service>-bin` ConfigMap."""
    processes = [p for top in spec.processes for p in containers(top)]
    return sorted({s for step in steps for s in step.scripts} | {s for p in processes for s in p.scripts})


def has_own_passwords(spec: ServiceSpec) -> bool:
    return bool(spec.databases or spec.messaging or spec.catalog)


def config_objects(spec: ServiceSpec, steps: tuple[Step, ...]) -> tuple[ConfigObject, ...]:
    """In the order the service creates them; every Job and process of it waits for all of them."""
    return tuple(_objects(spec, steps))


def _objects(spec: ServiceSpec, steps: tuple[Step, ...]) -> Iterator[ConfigObject]:
    name = spec.name
    if spec.config_dir:
        yield ConfigObject(f"{name}-etc", "Secret", Holds.FILES)
    if has_own_passwords(spec):
        yield ConfigObject(passwords_secret(name), "Secret", Holds.PASSWORDS)
    for secret_name in spec.extra_secrets:
        yield ConfigObject(secret_name, "Secret", Holds.OWNED)
    if node_keys(spec):
        # Node pods get a Secret of their own with only the files they mount: the kubelet of a
        # node may read every Secret its pods reference, whole, and a compromised hypervisor
        # must not learn what the control plane's files hold (database passwords).
        yield ConfigObject(node_etc(name), "Secret", Holds.NODE_FILES)
    if scripts_of(spec, steps):
        yield ConfigObject(f"{name}-bin", "ConfigMap", Holds.SCRIPTS)
