"""Kubernetes quantities, and how much of its container's limit a server may fill.

A buffer pool or cache sized on its own, apart from the container's memory limit, gets
the container OOM-killed once it fills up. So each server's memory setting is a share of
its limit, and a limit too small for a useful setting is a settings error.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from decimal import Decimal

MIB = 2**20
# Kubernetes quantity suffixes (k8s.io/apimachinery resource.Quantity), in bytes.
_UNITS: dict[str, Decimal] = {
    "": Decimal(1),
    "m": Decimal("0.001"),
    "k": Decimal(10**3),
    "M": Decimal(10**6),
    "G": Decimal(10**9),
    "T": Decimal(10**12),
    "P": Decimal(10**15),
    "E": Decimal(10**18),
    "Ki": Decimal(2**10),
    "Mi": Decimal(2**20),
    "Gi": Decimal(2**30),
    "Ti": Decimal(2**40),
    "Pi": Decimal(2**50),
    "Ei": Decimal(2**60),
}
_QUANTITY = re.compile(r"^([0-9]+(?:\.[0-9]+)?)([A-Za-z]*)$")


def parse_quantity(quantity: str) -> tuple[Decimal, str]:
    """A Kubernetes quantity's number and suffix: '1.5Gi' → (1.5, 'Gi'), '500m' → (500, 'm')."""
    match = _QUANTITY.match(str(quantity).strip())
    if not match or match[2] not in _UNITS:
        raise ValueError(f"{quantity!r} is not a Kubernetes quantity such as '512Mi', '1Gi', '500M' or '134217728'")
    return Decimal(match[1]), match[2]


def value_of(quantity: str) -> Decimal:
    """A quantity's value in its base unit: bytes, or CPU cores ('500m' → 0.5)."""
    number, suffix = parse_quantity(quantity)
    return number * _UNITS[suffix]


def bytes_of(quantity: str) -> int:
    """Bytes of a memory quantity: '512Mi', '1Gi', '500M', '1.5G' or plain bytes ('134217728')."""
    return int(value_of(quantity))  # a fraction of a byte rounds down


@dataclass(frozen=True)
class MemoryShare:
    """The part of a container's memory limit a server's own memory setting takes."""

    setting: str
    percent: int
    minimum_mib: int  # below this the server is of little use
    rest: str  # what the remainder of the limit is for

    def mib(self, limit: str) -> int:
        return bytes_of(limit) * self.percent // 100 // MIB

    def smallest_limit_mib(self) -> int:
        return -(-self.minimum_mib * 100 // self.percent)  # rounded up


SHARES: dict[str, MemoryShare] = {
    # 128MiB is MariaDB's own default buffer pool.
    "mariadb": MemoryShare(
        "innodb_buffer_pool_size", 50, 128, "connections, per-query sort and join buffers, and the server itself"
    ),
    # 64MB is memcached's own default.
    "memcached": MemoryShare("-m", 80, 64, "the hash table and the buffers of up to 8192 connections"),
}
