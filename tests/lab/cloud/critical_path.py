"""How long the deploy would take if nothing waited but the plan's own edges: its critical path.

Each object of the plan took, in this run, from its creation to the moment `pulumi up` stopped
waiting for it. Along the plan's dependency edges, the longest chain of those durations is the
shortest the deploy could be with every object started the moment its dependencies were done;
the measured makespan over it says what the ordering itself cost (1.0: nothing).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class CriticalPath:
    seconds: float
    chain: tuple[str, ...]  # the objects on it, first to last


def critical_path(
    durations: Mapping[str, float], dependencies: Mapping[str, Sequence[str]], names: Mapping[str, str]
) -> CriticalPath:
    """The longest chain of durations along `dependencies` (urn → the urns it waits for)."""
    finish: dict[str, tuple[float, tuple[str, ...]]] = {}

    def visit(urn: str, trail: frozenset[str]) -> tuple[float, tuple[str, ...]]:
        if urn in finish:
            return finish[urn]
        if urn in trail:
            raise ValueError(f"a dependency cycle through {names.get(urn, urn)}")
        before = [visit(d, trail | {urn}) for d in dependencies.get(urn, ()) if d in durations]
        start, chain = max(before, default=(0.0, ()))
        finish[urn] = (start + durations[urn], (*chain, names.get(urn, urn)))
        return finish[urn]

    seconds, chain = max((visit(urn, frozenset()) for urn in durations), default=(0.0, ()))
    return CriticalPath(round(seconds, 1), chain)
