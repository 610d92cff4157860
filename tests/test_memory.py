"""Servers size their memory from their container's limit, never past it."""

from __future__ import annotations

import re

import pytest

from components.settings.memory import bytes_of
from tests.conftest import STACKS, plan_of

MIB = 2**20


@pytest.mark.parametrize(
    ("quantity", "expected"),
    [
        ("512Mi", 512 * MIB),
        ("1Gi", 2**30),
        ("1.5Gi", 3 * 2**29),
        ("64Ki", 65536),
        ("500M", 500_000_000),
        ("2G", 2_000_000_000),
        ("1k", 1000),
        ("134217728", 134217728),
        ("1500m", 1),  # a milli-byte quantity: a fraction of a byte rounds down
    ],
)
def test_memory_quantities_in_bytes(quantity: str, expected: int) -> None:
    assert bytes_of(quantity) == expected


@pytest.mark.parametrize("quantity", ["", "Mi", "512MB", "1e9", "-1Gi", "one"])
def test_what_is_no_quantity_is_refused(quantity: str) -> None:
    with pytest.raises(ValueError, match="not a Kubernetes quantity"):
        bytes_of(quantity)


@pytest.mark.parametrize("stack", STACKS)
def test_buffer_pool_and_cache_are_shares_of_the_memory_limit(stack: str) -> None:
    plan = plan_of(stack)
    mariadb = plan.by_name("mariadb", "MariaDB").inputs["spec"]
    [pool] = re.findall(r"^innodb_buffer_pool_size=(\d+)M$", mariadb["myCnf"], re.MULTILINE)
    limit = bytes_of(mariadb["resources"]["limits"]["memory"])
    assert int(pool) * MIB == limit // 2 // MIB * MIB
    [memcached] = plan.by_name("memcached", "StatefulSet").inputs["spec"]["template"]["spec"]["containers"]
    command = memcached["args"]
    item_memory = int(command[command.index("-m") + 1]) * MIB
    limit = bytes_of(memcached["resources"]["limits"]["memory"])
    assert limit * 0.79 < item_memory <= limit * 0.8


def test_dev_fits_its_small_limits() -> None:
    """dev's 512Mi limit: a 512M buffer pool or cache would fill the whole container."""
    plan = plan_of("dev")
    assert "innodb_buffer_pool_size=256M\n" in plan.by_name("mariadb", "MariaDB").inputs["spec"]["myCnf"]
    [memcached] = plan.by_name("memcached", "StatefulSet").inputs["spec"]["template"]["spec"]["containers"]
    assert memcached["args"][memcached["args"].index("-m") + 1] == "409"
