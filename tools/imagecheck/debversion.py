"""Debian version ordering, as dpkg compares versions (deb-version(7)): epoch, upstream, revision."""

from __future__ import annotations


def _order(text: str, i: int) -> int:
    if i >= len(text) or text[i].isdigit():
        return 0
    c = text[i]
    if c == "~":
        return -1
    if c.isalpha():
        return ord(c)
    return ord(c) + 256


def _compare_part(a: str, b: str) -> int:
    i = j = 0
    while i < len(a) or j < len(b):
        while (i < len(a) and not a[i].isdigit()) or (j < len(b) and not b[j].isdigit()):
            difference = _order(a, i) - _order(b, j)
            if difference:
                return difference
            i += 1
            j += 1
        start_i, start_j = i, j
        while i < len(a) and a[i].isdigit():
            i += 1
        while j < len(b) and b[j].isdigit():
            j += 1
        number_a, number_b = int(a[start_i:i] or 0), int(b[start_j:j] or 0)
        if number_a != number_b:
            return number_a - number_b
    return 0


def _split(version: str) -> tuple[int, str, str]:
    epoch, _, rest = version.partition(":") if ":" in version else ("0", "", version)
    upstream, _, revision = rest.rpartition("-") if "-" in rest else (rest, "", "")
    return int(epoch or 0), upstream, revision


def compare(a: str, b: str) -> int:
    """<0, 0 or >0 as `a` is older than, the same as or newer than `b`."""
    epoch_a, upstream_a, revision_a = _split(a)
    epoch_b, upstream_b, revision_b = _split(b)
    if epoch_a != epoch_b:
        return epoch_a - epoch_b
    return _compare_part(upstream_a, upstream_b) or _compare_part(revision_a, revision_b)


def newer(a: str, b: str) -> bool:
    return compare(a, b) > 0
