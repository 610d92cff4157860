"""The control plane of issue 3: every service's objects, its start-up edges and its configs."""

from __future__ import annotations

import re
from unittest.mock import call
from urllib.parse import urlsplit

import pytest

from components.mechanism import internal_tls
from components.mechanism.inifile import parse_ini
from tests.conftest import plan_of
from tests.helpers import ancestors, bundle_job, containers, horizon_settings, objects, waits_for
from tools.plan import Plan

KEYSTONE_READY = {"keystone-api", "keystone-bootstrap"}


def _registered(service: str) -> dict[str, set[str]]:
    """The standard chain of a service with a database and a Keystone catalog entry."""
    return {
        f"{service}-db-init": {"mariadb"},
        f"{service}-db-sync": {f"{service}-db-init"},
        f"{service}-ks-user": KEYSTONE_READY,
        f"{service}-ks-service": KEYSTONE_READY,
        f"{service}-ks-endpoints": {f"{service}-ks-service"},
    }


def _api(service: str, *extra: str) -> set[str]:
    return {f"{service}-db-sync", f"{service}-ks-user", f"{service}-ks-endpoints", *extra}


# Each edge derived from what the process needs when it starts (see the issue's examples).
EDGES: dict[str, dict[str, set[str]]] = {
    "glance": {
        **_registered("glance"),
        # Glance's metadata definitions need its schema (kolla-ansible: db_load_metadefs after db_sync).
        "glance-metadefs-load": {"glance-db-sync"},
        "glance-api": _api("glance", "glance-metadefs-load"),
    },
    "placement": {**_registered("placement"), "placement-api": _api("placement")},
    "nova": {
        **_registered("nova"),
        "nova-rabbit-init": {"rabbitmq"},
        "nova-api": _api("nova", "nova-rabbit-init"),
        "nova-metadata": _api("nova", "nova-rabbit-init"),
        "nova-scheduler": {"nova-db-sync", "nova-rabbit-init"},
        "nova-conductor": {"nova-db-sync", "nova-rabbit-init"},
        "nova-novncproxy": {"nova-db-sync"},
    },
    "neutron": {
        **_registered("neutron"),
        "neutron-rabbit-init": {"rabbitmq"},
        "neutron-server": _api("neutron", "neutron-rabbit-init"),
        "neutron-l3-agent": {"neutron-server", "neutron-rabbit-init"},
        "neutron-dhcp-agent": {"neutron-server", "neutron-rabbit-init"},
        "neutron-metadata-agent": {"neutron-server", "neutron-rabbit-init"},
    },
    "cinder": {
        **_registered("cinder"),
        "cinder-rabbit-init": {"rabbitmq"},
        "cinder-api": _api("cinder", "cinder-rabbit-init"),
        "cinder-scheduler": {"cinder-db-sync", "cinder-rabbit-init"},
        "cinder-volume": {"cinder-db-sync", "cinder-rabbit-init"},
    },
    "horizon": {"horizon": set()},
}
WORKLOADS = {
    "glance": {"Deployment": {"glance-api"}},
    "placement": {"Deployment": {"placement-api"}},
    "nova": {"Deployment": {"nova-api", "nova-metadata", "nova-scheduler", "nova-conductor", "nova-novncproxy"}},
    "neutron": {
        "Deployment": {"neutron-server"},
        "DaemonSet": {"neutron-l3-agent", "neutron-dhcp-agent", "neutron-metadata-agent"},
    },
    "cinder": {"Deployment": {"cinder-api", "cinder-scheduler"}, "DaemonSet": {"cinder-volume"}},
    "horizon": {"Deployment": {"horizon"}},
}
APIS = {
    "glance-api": 9292,
    "placement-api": 8778,
    "nova-api": 8774,
    "nova-metadata": 8775,
    "nova-novncproxy": 6080,
    "neutron-server": 9696,
    "cinder-api": 8776,
    "horizon": 8080,
}
# (stack, service) for every service a stack enables: cinder is off in dev.
ENABLED = [(stack, s) for stack in ("dev", "staging", "prod") for s in EDGES if not (stack == "dev" and s == "cinder")]


def _enabled(plan: Plan) -> list[str]:
    return list(plan.settings.services.enabled())


@pytest.mark.parametrize("stack", ["staging", "prod"])
def test_staging_and_prod_declare_every_service(stack: str) -> None:
    assert _enabled(plan_of(stack)) == ["glance", "placement", "nova", "neutron", "cinder", "horizon"]


def test_cinder_is_off_in_dev() -> None:
    dev = plan_of("dev")
    assert "cinder" not in _enabled(dev)
    assert not [r for r in dev.custom if (r.k8s_name or "").startswith("cinder")]


def test_every_service_has_its_jobs_workloads_and_services(stack_plan: Plan) -> None:
    jobs, services = set(objects(stack_plan, "Job")), set(objects(stack_plan, "Service"))
    for service in _enabled(stack_plan):
        for kind, names in WORKLOADS[service].items():
            assert names <= set(objects(stack_plan, kind)), (service, kind)
        assert {n for n in EDGES[service] if "-db-" in n or "-ks-" in n or "-rabbit-" in n} <= jobs
        assert {api for api in APIS if api.startswith(service)} <= services


def test_nova_has_cell_setup_once_and_periodically(stack_plan: Plan) -> None:
    assert "nova-cell-setup" in objects(stack_plan, "Job")
    cron = objects(stack_plan, "CronJob")["nova-cell-setup"].inputs["spec"]
    assert cron["concurrencyPolicy"] == "Forbid"
    assert "discover_hosts" in str(stack_plan.by_name("nova-bin", "ConfigMap").inputs["data"]["nova_cell_setup.sh"])
    # The Job is declared with the compute nodes it waits for, but belongs to Nova.
    for kind in ("Job", "CronJob"):
        labels = stack_plan.by_name("nova-cell-setup", kind).inputs["metadata"]["labels"]
        assert (labels["app.kubernetes.io/name"], labels["app.kubernetes.io/component"]) == ("nova", "cell-setup")


def test_enabled_services_are_what_the_tests_expect() -> None:
    assert [(st, s) for st in ("dev", "staging", "prod") for s in _enabled(plan_of(st))] == ENABLED


@pytest.mark.parametrize(("stack", "service"), ENABLED)
def test_dependency_edges(stack: str, service: str) -> None:
    plan = plan_of(stack)
    for name, expected in EDGES[service].items():
        assert waits_for(plan, name) == expected | bundle_job(plan), name


@pytest.mark.parametrize(("stack", "service"), ENABLED)
def test_no_unrelated_service_is_an_ancestor(stack: str, service: str) -> None:
    stack_plan = plan_of(stack)
    shared = {"mariadb", "rabbitmq", "memcached", "keystone-api", "keystone-bootstrap"}
    shared |= {f"keystone-{j}" for j in ("db-init", "db-sync", "fernet-setup", "credential-setup")}
    shared |= bundle_job(stack_plan)
    for names in WORKLOADS[service].values():
        for name in names:
            foreign = {a for a in ancestors(stack_plan, name) if a not in shared and not a.startswith(service)}
            assert foreign == set(), f"{name} waits for {foreign}"


def test_apis_are_hardened_probed_and_spread_under_ha() -> None:
    prod = plan_of("prod")
    budgets = objects(prod, "PodDisruptionBudget")
    for name, port in APIS.items():
        deployment = prod.by_name(name, "Deployment")
        spec = deployment.inputs["spec"]
        assert spec["replicas"] >= 3, name
        assert "podAntiAffinity" in spec["template"]["spec"]["affinity"], name
        assert name in budgets, name
        [main] = [c for c in containers(deployment) if c["name"] == name]
        probe = main["readinessProbe"]
        assert probe.get("httpGet", probe.get("tcpSocket"))["port"] == port, name
        service = prod.by_name(name, "Service").inputs["spec"]
        assert service["ports"][0]["port"] == port


def test_daemons_without_a_port_are_ready_only_when_connected(stack_plan: Plan) -> None:
    for name in ("nova-scheduler", "nova-conductor", "neutron-l3-agent"):
        [workload] = [r for r in stack_plan.custom if r.k8s_name == name and r.kind in ("Deployment", "DaemonSet")]
        [container] = [c for c in containers(workload) if c["name"] == name]
        command = container["readinessProbe"]["exec"]["command"]
        amqp = "5671" if stack_plan.settings.tls.internal_enabled else "5672"  # amqps under internal TLS
        assert command[1] == "/scripts/health_probe.py" and amqp in command


def test_network_agents_run_on_network_nodes_only(stack_plan: Plan) -> None:
    for name in ("neutron-l3-agent", "neutron-dhcp-agent", "neutron-metadata-agent"):
        pod = stack_plan.by_name(name, "DaemonSet").inputs["spec"]["template"]["spec"]
        assert pod["nodeSelector"] == stack_plan.settings.node_selectors.network


def _files(plan: Plan, service: str) -> dict[str, str]:
    return plan.by_name(f"{service}-etc", "Secret").revealed["stringData"]


def _host(url: str) -> str:
    return urlsplit(url).hostname or ""


def _scheme(plan: Plan) -> str:
    """The internal endpoints' scheme: https where tls.internal names a CA (staging)."""
    return "https" if plan.settings.tls.internal_enabled else "http"


def test_every_rendered_config_parses_and_points_at_this_stack(stack_plan: Plan) -> None:
    settings = stack_plan.settings
    suffix = f".{settings.namespace}.svc.{settings.endpoints.cluster_domain}"
    for service in ("glance", "placement", "nova", "neutron", "cinder"):
        if service not in _enabled(stack_plan):
            continue
        for name, text in _files(stack_plan, service).items():
            if not name.endswith((".conf", ".ini")):
                continue
            conf = parse_ini(text)
            for section in conf.sections():
                for option, value in conf[section].items():
                    if option in ("connection", "transport_url"):
                        assert _host(value).endswith(suffix), (service, name, section, option)
                    if option == "auth_url":
                        assert value == f"{_scheme(stack_plan)}://keystone-api{suffix}:5000", (service, name, section)
                    if option in ("region_name", "os_region_name"):
                        assert value == settings.region, (service, name, section)


def test_nova_conf_holds_its_three_databases_and_its_peers(stack_plan: Plan) -> None:
    nova = parse_ini(_files(stack_plan, "nova")["nova.conf"])
    # Under internal TLS the client verifies MariaDB with the internal CA.
    tls = "&ssl_ca=/etc/openstack-ca/ca.crt" if stack_plan.settings.tls.internal_enabled else ""
    assert nova["api_database"]["connection"].endswith(f"/nova_api?charset=utf8{tls}")
    assert nova["database"]["connection"].endswith(f"/nova?charset=utf8{tls}")
    assert urlsplit(nova["DEFAULT"]["transport_url"]).path == "/nova"
    assert nova["neutron"]["username"] == nova["placement"]["username"] == "nova"
    assert nova["vnc"]["novncproxy_base_url"].startswith(f"{stack_plan.settings.endpoints.scheme}://novncproxy.")


def test_metadata_secret_is_shared_and_the_agent_finds_nova(stack_plan: Plan) -> None:
    nova = parse_ini(_files(stack_plan, "nova")["nova.conf"])
    agent = parse_ini(_files(stack_plan, "neutron")["metadata_agent.ini"])
    assert agent["DEFAULT"]["metadata_proxy_shared_secret"] == nova["neutron"]["metadata_proxy_shared_secret"]
    assert agent["DEFAULT"]["nova_metadata_host"].startswith("nova-metadata.")


def test_each_service_has_its_own_credentials(stack_plan: Plan) -> None:
    users, passwords = {}, {}
    for service in _enabled(stack_plan):
        if service == "horizon":
            continue
        conf_name = {"glance": "glance-api.conf"}.get(service, f"{service}.conf")
        conf = parse_ini(_files(stack_plan, service)[conf_name])
        database = next(conf[s]["connection"] for s in ("database", "placement_database") if s in conf)
        users[service] = urlsplit(database).username
        passwords[service] = (urlsplit(database).password, conf["keystone_authtoken"]["password"])
        if "transport_url" in conf["DEFAULT"]:
            assert urlsplit(conf["DEFAULT"]["transport_url"]).username == service
    assert users == {s: s for s in users}
    flat = [p for pair in passwords.values() for p in pair]
    assert len(flat) == len(set(flat)), "a password is shared between services"


def test_catalog_has_public_and_internal_endpoints_in_the_region(stack_plan: Plan) -> None:
    settings = stack_plan.settings
    for service in _enabled(stack_plan):
        if service == "horizon":
            continue
        [container] = containers(stack_plan.by_name(f"{service}-ks-endpoints", "Job"))
        env = {e["name"]: e.get("value") for e in container["env"]}
        assert env["OS_REGION_NAME"] == settings.region
        for entry in env["CATALOG"].split(";"):
            _, _, public, internal, _ = entry.split(",")
            domain = re.escape(settings.endpoints.domain)
            assert re.match(rf"^{settings.endpoints.scheme}://[a-z0-9-]+\.{domain}", public)
            assert _host(internal).endswith(f".{settings.namespace}.svc.{settings.endpoints.cluster_domain}")


def test_horizon_uses_memcached_sessions_and_keystone_internally(stack_plan: Plan) -> None:
    namespace = horizon_settings(_files(stack_plan, "horizon")["local_settings.py"])
    assert namespace["SESSION_ENGINE"] == "django.contrib.sessions.backends.cache"
    assert "memcached-0.memcached." in str(namespace["CACHES"])
    # Under internal TLS the cache's client verifies memcached with the internal CA (tests/test_memcached_tls.py).
    tls = stack_plan.settings.tls.internal_enabled
    assert namespace["_contexts"] == ([call(cafile=internal_tls.CA_FILE)] if tls else [])
    assert str(namespace["OPENSTACK_KEYSTONE_URL"]).startswith(f"{_scheme(stack_plan)}://keystone-api.")


def test_horizon_answers_the_kubelet_and_serves_its_static_files(stack_plan: Plan) -> None:
    """The kubelet's probes send the pod IP as Host; without DEBUG only uWSGI serves /static."""
    files = _files(stack_plan, "horizon")
    horizon = stack_plan.by_name("horizon", "Deployment").inputs["spec"]["template"]["spec"]
    [server] = horizon["containers"]
    pod_ip = next(e for e in server["env"] if e["name"] == "POD_IP")
    assert pod_ip["valueFrom"] == {"fieldRef": {"fieldPath": "status.podIP"}}
    namespace = horizon_settings(files["local_settings.py"])
    assert "10.244.0.9" in namespace["ALLOWED_HOSTS"]  # type: ignore[operator]
    assert "*" not in namespace["ALLOWED_HOSTS"]  # type: ignore[operator]
    static_root = str(namespace["STATIC_ROOT"])
    assert parse_ini(files["horizon-uwsgi.ini"])["uwsgi"]["static-map"] == f"/static={static_root}"
    steps = [c["args"][-3:] for c in horizon["initContainers"]]
    assert steps == [["collectstatic", "--noinput", "--clear"], ["django", "compress", "--force"]]
    mounts = {m["mountPath"] for c in (*horizon["initContainers"], server) for m in c["volumeMounts"]}
    assert static_root in mounts


def test_glance_backend_is_a_setting() -> None:
    on_claim = plan_of("staging")
    on_cinder = plan_of("staging", glance={"backend": "cinder"})
    assert "glance-images" in objects(on_claim, "PersistentVolumeClaim")
    assert "glance-images" not in objects(on_cinder, "PersistentVolumeClaim")
    conf = parse_ini(_files(on_cinder, "glance")["glance-api.conf"])
    assert conf["glance_store"]["default_backend"] == "cinder"
    assert conf["cinder"]["cinder_store_user_name"] == "glance"


@pytest.mark.parametrize("stack", ["staging", "prod"])
def test_a_busy_http_server_is_taken_out_of_its_service_but_not_restarted(stack: str) -> None:
    """Readiness asks HTTP (a free worker must answer); liveness only that the port accepts
    connections (components/mechanism/workload.py Probe.liveness: the lab saw nova-api restarted while its
    workers waited on RPC calls)."""
    checked = []
    plan = plan_of(stack)
    workloads = [*objects(plan, "Deployment").values(), *objects(plan, "StatefulSet").values()]
    # nova-compute-maintenance's /healthz reports its own loop: its liveness asks it (tests/maintenance).
    for workload in [w for w in workloads if w.name != "nova-compute-maintenance"]:
        for container in containers(workload):
            ready = container.get("readinessProbe", {})
            if "httpGet" not in ready:
                continue
            live = container["livenessProbe"]
            assert live["tcpSocket"] == {"port": ready["httpGet"]["port"]}, (workload.name, live)
            assert "httpGet" not in live
            assert live["periodSeconds"] > ready["periodSeconds"]
            checked.append(container["name"])
    assert {"keystone-api", "nova-api", "neutron-server", "horizon"} <= set(checked), checked
