"""Host paths compared by path segment, after normalisation.

'/run/openvswitch-evil' is not inside '/run/openvswitch', and '/run/openvswitch/../../etc'
is '/etc': a plain string prefix test would get both wrong.
"""

from __future__ import annotations

import posixpath
from collections.abc import Iterable

from components.tables.roles import HostPath


def normalize(path: str) -> str | None:
    """The absolute, normalised form of a host path, or None for a relative one."""
    if not path.startswith("/"):
        return None
    normal = posixpath.normpath(path)
    # POSIX keeps a leading '//' as is; the kubelet does not give it a meaning.
    return "/" + normal.lstrip("/")


def segments(path: str) -> tuple[str, ...]:
    return tuple(part for part in path.split("/") if part)


def within(path: str, prefix: str) -> bool:
    """Whether normalised `path` is `prefix` or below it, segment by segment."""
    inner, outer = segments(path), segments(prefix)
    return inner[: len(outer)] == outer


def grant_for(path: str, grants: Iterable[HostPath]) -> HostPath | None:
    """The most specific allowed host path that contains `path`, if any."""
    matching = [g for g in grants if within(path, g.path)]
    return max(matching, key=lambda g: len(segments(g.path)), default=None)


def describe(grants: Iterable[HostPath]) -> str:
    listed = [f"{g.path} ({'read-only' if g.read_only else 'read-write'})" for g in grants]
    return ", ".join(dict.fromkeys(listed)) or "none"
