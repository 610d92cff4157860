"""The internal CA bundle and its rotation: the Job that writes `internal-ca-bundle`, and the pods it restarts.

Which CAs are trusted in a phase is components/mechanism/internal_ca.py's. Two things follow from it here:

- **The bundle.** The Job `internal-ca-bundle` reads `ca.crt` of each trusted CA's trust Secret
  (written by cert-manager, no key of any CA in it), waits until each one is issued by the issuer
  it expects, concatenates them (the CA being replaced first) and writes them as `ca.crt` of the
  Secret `internal-ca-bundle`, which every pod mounts, RabbitMQ and MariaDB name as their CA and
  the gateway verifies backends with. Its pod template lists the trusted CAs, so a phase that
  changes them replaces the Job, which runs again; every workload and data store that mounts the
  bundle waits for it in the deploy graph. It writes nothing when the content is the same.
  Why a Job and not trust-manager's Bundle: trust-manager reads its sources from one namespace
  of the cluster (its trust namespace, `cert-manager` by default) and writes a Secret only when
  installed with secret targets, which gives it read access to every Secret of the cluster; the
  program's CAs and the stack's issuer live in the stack's namespace (README, "Rotating the
  internal CA"). openstack-k8s-operators' openstack-operator assembles its `combined-ca-bundle`
  the same way, in its controller (internal/openstack/ca.go), keeping each CA until it expires.
- **What reads the CA once.** Most clients read the bundle per connection (keystoneauth and
  requests, kombu, PyMySQL) and take a new one hot. memcached's clients build their SSLContext
  once, when the process starts (oslo.cache's `[cache] tls_cafile`, keystonemiddleware's
  `memcache_tls_cafile` in an API, Horizon's `tls_context`), so a process that reads them gets the
  trusted CAs on its pod template (TRUSTED_CAS): the phase that adds a CA and the one that drops
  one restart them (a rolling update), after the Job has written the bundle. Which processes they
  are is read from their own rendered config files (`reads_ca_once`).
"""

from __future__ import annotations

import configparser
import json
import re
from collections import defaultdict

from components.mechanism import internal_tls
from components.mechanism.bootstrap import TOOLBOX
from components.mechanism.inifile import parse_ini
from components.mechanism.internal_ca import CaPhase, ca_phase
from components.mechanism.meta import labels
from components.mechanism.service_configs import config_path, containers
from components.mechanism.spec import CA_BUNDLE_SPEC, KUBE_API, ApiAccess, Process, RenderContext, ServiceSpec, Step
from components.mechanism.workload import env
from components.settings.model import Settings

BUNDLE_JOB = internal_tls.CA_BUNDLE  # the Job is named after the Secret it writes
SCRIPT = "write_ca_bundle.py"
TRUSTED_CAS = "openstack.org/trusted-cas"  # on the pod templates of what reads the CA once
# Horizon's local_settings.py builds memcached's context at import (components/services/horizon.py).
_CONTEXT_AT_IMPORT = re.compile(r"create_default_context\(cafile=['\"]" + re.escape(internal_tls.CA_FILE))


def phase_of(settings: Settings) -> CaPhase | None:
    internal = settings.tls.internal
    return ca_phase(internal) if internal is not None and internal.enabled else None


def bundle_step(settings: Settings) -> Step:
    """The Job that writes internal-ca-bundle from the trusted CAs' trust Secrets."""
    cas = phase_of(settings)
    assert cas is not None, "internal TLS only"
    trusts = tuple(ca.trust for ca in cas.trusted)
    expected = " ".join(f"{ca.trust}={ca.issuer['kind']}/{ca.issuer['name']}" for ca in cas.trusted)
    bundle_labels = {**labels(internal_tls.OWNER, "ca-bundle"), **internal_tls.MARIADB_OPERATOR_WATCH}
    return Step(
        name=BUNDLE_JOB,
        image=TOOLBOX,
        command=("python3", f"/scripts/{SCRIPT}"),
        needs=(),
        scripts=(SCRIPT, KUBE_API),
        env=(
            env("BUNDLE_NAME", internal_tls.CA_BUNDLE),
            env("TRUSTED_CAS", expected),
            env("CA_BUNDLE_LABELS", json.dumps(bundle_labels, sort_keys=True)),
        ),
        service=internal_tls.OWNER,
        # Reads the trust Secrets (a certificate each, no CA key); replaces the bundle, or creates it on a
        # new stack: a create cannot be limited to a name (RBAC checks resourceNames on no create), so a
        # ValidatingAdmissionPolicy admits the bundle's name only (bundle_policy_spec).
        # It also writes each CA alone into a ConfigMap of its trust Secret's name, for the gateway.
        api_access=(
            ApiAccess("secrets", trusts, ("get",)),
            ApiAccess("secrets", (internal_tls.CA_BUNDLE,), ("get", "update")),
            ApiAccess("secrets", (), ("create",)),
            ApiAccess("configmaps", trusts, ("get", "update")),
            ApiAccess("configmaps", (), ("create",)),
        ),
        admission=bundle_policy_spec(settings),
        purpose=f"waits for the CAs it trusts: the Secret {internal_tls.CA_BUNDLE} this Job writes",
        trusts_internal_ca=False,  # it writes the bundle: it cannot wait for it
    )


def bundle_account(settings: Settings) -> str:
    return f"system:serviceaccount:{settings.namespace}:{BUNDLE_JOB}"


def trust_config_maps(settings: Settings) -> tuple[str, ...]:
    """The ConfigMaps the bundle Job writes, one per trusted CA, named as its trust Secret."""
    cas = phase_of(settings)
    return tuple(ca.trust for ca in cas.trusted) if cas is not None else ()


def bundle_policy_spec(settings: Settings) -> dict[str, object]:
    """What the bundle Job's account may create or update: the Secret internal-ca-bundle and the trusted
    CAs' ConfigMaps, nothing else. Its Role grants `create` on every Secret and ConfigMap of the namespace
    (RBAC cannot name what is created); the policy, bound with Deny (components/mechanism/kube.py
    admission_policy), refuses any other name before it is stored. From Kubernetes' ValidatingAdmissionPolicy
    docs: `request.name` is the object's name (on CREATE, as the client sent it), `request.resource.resource`
    the resource, `request.userInfo.username` the ServiceAccount's `system:serviceaccount:<ns>:<name>`."""
    namespace = settings.namespace
    maps = ", ".join(f"'{name}'" for name in trust_config_maps(settings))
    rules = [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE", "UPDATE"],
              "resources": ["secrets", "configmaps"]}]  # fmt: skip
    return {
        "failurePolicy": "Fail",
        "matchConstraints": {"resourceRules": rules},
        "matchConditions": [
            {"name": BUNDLE_JOB, "expression": f"request.userInfo.username == '{bundle_account(settings)}'"}
        ],
        "validations": [
            {
                "expression": f"request.namespace == '{namespace}' && (request.resource.resource == 'secrets' ? "
                f"request.name == '{internal_tls.CA_BUNDLE}' : request.name in [{maps}])",
                "message": f"{BUNDLE_JOB} may create or update only the Secret {internal_tls.CA_BUNDLE} and the "
                f"ConfigMaps of the trusted CAs ({', '.join(trust_config_maps(settings))})",
            }
        ],
    }


def bundle_spec(settings: Settings) -> ServiceSpec:
    """The bundle Job's spec, built like a service's Jobs (components/cloud/openstack_service.py)."""
    return ServiceSpec(name=CA_BUNDLE_SPEC, config_dir="", render=lambda ctx: {}, steps=(bundle_step(settings),))


def _placeholder_files(settings: Settings, spec: ServiceSpec) -> dict[str, str]:
    """The service's config files with a placeholder for every password: only options are read here."""
    return spec.render(RenderContext(settings, defaultdict(lambda: "placeholder")))


def _reads_once(process: str, name: str, text: str) -> bool:
    if name.endswith(".py"):
        return bool(_CONTEXT_AT_IMPORT.search(text))
    if not name.endswith((".conf", ".ini")):
        return False
    try:
        ini = parse_ini(text)
    except configparser.Error:
        return False  # no OpenStack options: libvirtd.conf and qemu.conf have no sections
    cache = ini["cache"] if ini.has_section("cache") else {}
    if cache.get("tls_enabled", "").lower() == "true" and cache.get("tls_cafile") == internal_tls.CA_FILE:
        return True  # oslo.cache's region, made once per process (oslo_cache/core.py _build_cache_config)
    authtoken = ini["keystone_authtoken"] if ini.has_section("keystone_authtoken") else {}
    # keystonemiddleware's token cache, made once when the API's pipeline loads (auth_token/__init__.py).
    return process in internal_tls.ALL_APIS and authtoken.get("memcache_tls_cafile") == internal_tls.CA_FILE


def reads_ca_once(settings: Settings, spec: ServiceSpec, process: Process) -> bool:
    """Whether a container of the process builds a TLS context from the CA file when it starts, from the
    config files it mounts: only a restart gives it a new bundle."""
    if not settings.tls.internal_enabled:
        return False
    files = _placeholder_files(settings, spec)
    for container in containers(process):
        for entry in container.config_files:
            name = config_path(spec, entry)[0]
            if name in files and _reads_once(container.name, name, files[name]):
                return True
    return False


def restart_annotation(settings: Settings, spec: ServiceSpec, process: Process) -> dict[str, str]:
    """TRUSTED_CAS on the pod template of a process that reads the CA once; none where nothing was rotated."""
    cas = phase_of(settings)
    marker = cas.trusted_marker() if cas is not None else None
    if marker is None or not reads_ca_once(settings, spec, process):
        return {}
    return {TRUSTED_CAS: marker}
