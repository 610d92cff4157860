"""Services as the lab's kube-proxy and DNS serve them: cluster addresses, Ready endpoints, named ports."""

from __future__ import annotations

from tests.lab.cloud.services import DNS_ADDRESS, Endpoint, Service, ServiceTable, resolv_conf


def service(name: str, selector: dict[str, str], port: int, target: int | str, headless: bool = False) -> Service:
    spec: dict = {"selector": selector, "ports": [{"name": "p", "port": port, "targetPort": target}]}
    if headless:
        spec["clusterIP"] = "None"
    return Service.from_manifest({"metadata": {"name": name}, "spec": spec}, "openstack")


def pod(name: str, ip: str, ready: bool, labels: dict[str, str], **extra: str) -> Endpoint:
    return Endpoint(name, ip, ready, tuple(sorted(labels.items())), (("api", 5000),), **extra)


def table() -> ServiceTable:
    return ServiceTable(
        [service("keystone-api", {"app": "keystone"}, 5000, "api"), service("memcached", {"app": "mc"}, 11211, 11211,
                                                                             headless=True)],
        "cluster.local",
    )  # fmt: skip


def test_only_ready_pods_are_endpoints_and_a_change_is_noticed() -> None:
    services = table()
    assert services.update([pod("k-1", "10.244.1.5", False, {"app": "keystone"})])
    assert services.endpoints["keystone-api"] == ()
    assert "-j KUBE-SVC" not in services.nat_rules()
    assert "REJECT" in services.filter_rules()  # no endpoint: kube-proxy rejects
    assert services.update([pod("k-1", "10.244.1.5", True, {"app": "keystone"})])
    assert not services.update([pod("k-1", "10.244.1.5", True, {"app": "keystone"})])
    nat = services.nat_rules()
    address = services.address("keystone-api")
    assert f"-d {address}/32 -p tcp --dport 5000" in nat
    # A named targetPort resolves to the container's port of that name.
    assert "DNAT --to-destination 10.244.1.5:5000" in nat
    # A pod that reaches itself through its Service is masqueraded (hairpin).
    assert "-s 10.244.1.5/32 -j MARK" in nat
    assert "REJECT" not in services.filter_rules()


def test_load_is_spread_over_every_ready_endpoint() -> None:
    services = table()
    services.update([pod(f"k-{i}", f"10.244.1.{i}", True, {"app": "keystone"}) for i in (5, 6, 7)])
    nat = services.nat_rules()
    assert nat.count("--probability 0.33333") == 1 and nat.count("--probability 0.50000") == 1
    assert sum(f"--to-destination 10.244.1.{i}:5000" in nat for i in (5, 6, 7)) == 3


def test_dns_names_services_and_the_pods_of_headless_ones() -> None:
    services = table()
    services.update([
        pod("memcached-0", "10.244.1.9", True, {"app": "mc"}, hostname="memcached-0", subdomain="memcached"),
        pod("memcached-1", "10.244.2.9", False, {"app": "mc"}, hostname="memcached-1", subdomain="memcached"),
    ])  # fmt: skip
    hosts = services.dns_hosts()
    assert f"{services.address('keystone-api')}\tkeystone-api.openstack.svc.cluster.local" in hosts
    assert "10.244.1.9\tmemcached.openstack.svc.cluster.local" in hosts
    assert "10.244.1.9\tmemcached-0.memcached.openstack.svc.cluster.local" in hosts
    assert "memcached-1" not in hosts  # not Ready: not an endpoint, no name
    assert "10.244.2.9" not in hosts


def test_addresses_are_stable_and_distinct() -> None:
    first, second = table(), table()
    assert first.address("keystone-api") == second.address("keystone-api")
    assert first.address("keystone-api") not in ("10.96.0.1", DNS_ADDRESS)


def test_pods_search_their_namespace_first() -> None:
    text = resolv_conf("openstack", "cluster.local")
    assert text.splitlines()[0] == "search openstack.svc.cluster.local svc.cluster.local cluster.local"
    assert f"nameserver {DNS_ADDRESS}" in text and "ndots:5" in text


def test_an_applied_plan_changes_a_service_in_place_adds_one_and_removes_one() -> None:
    """tests/lab/cloud/apply.py: a Service keeps its cluster address through an update (spec.clusterIP is
    immutable); a new one gets an address no other has; a deleted one leaves the table, endpoints too."""
    services = table()
    address = services.address("keystone-api")
    services.update([pod("k-1", "10.244.1.5", True, {"app": "keystone"})])
    services.put(service("keystone-api", {"app": "keystone"}, 5001, "api"))
    assert services.address("keystone-api") == address
    assert services.service("keystone-api").ports[0].port == 5001
    services.put(service("glance-api", {"app": "glance"}, 9292, 9292))
    assert services.address("glance-api") not in {address, DNS_ADDRESS}
    services.remove("openstack", "keystone-api")
    assert [s.name for s in services.services] == ["memcached", "glance-api"]
    assert "keystone-api" not in services.endpoints and "keystone-api" not in services.dns_hosts()
