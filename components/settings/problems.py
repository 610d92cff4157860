"""A problem of a stack's settings, and the error that lists them all.

Apart from the model (components/settings/model.py) so that the settings' own modules
(gateway.py, releases.py, upgrade.py) can report problems at module level without
importing the model that imports them.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

# The Pulumi project: its settings are the `openstack:` keys of a stack.
PROJECT = "openstack"
SECRET_MARK = "[secret]"  # how a secret value is shown in a problem


@dataclass(frozen=True)
class Problem:
    """One invalid setting: its full key (`<namespace>:<name>[.<field>...]`), value and what is allowed."""

    key: str
    value: Any
    message: str
    path: tuple[str, ...] = ()  # below `openstack:`, to relate problems to values set aside
    shown: bool = True  # False when there is no value to show (a missing one)

    def __str__(self) -> str:
        return f"{self.key}: {self.message}" + (f" (got {excerpt(self.value)})" if self.shown else "")

    def hidden(self) -> Problem:
        return dataclasses.replace(self, value=SECRET_MARK)


EXCERPT = 120  # characters of a value a problem quotes: a huge value would bury every other line


def excerpt(value: Any) -> str:
    """A value as a problem quotes it: whole when short, else its start and how long it is."""
    shown = repr(value)
    if len(shown) <= EXCERPT:
        return shown
    return f"{shown[:EXCERPT]}... ({len(value) if isinstance(value, str) else len(shown)} characters)"


def problem(path: tuple[str | int, ...], value: Any, message: str) -> Problem:
    """A problem found across settings, reported at the one setting that fixes it (path below openstack:)."""
    parts = tuple(map(str, path))
    return Problem(f"{PROJECT}:{'.'.join(parts)}", value, message, parts)


class SettingsError(ValueError):
    """Every problem in a stack's settings, one per line, each naming its key."""

    def __init__(self, found: list[Problem]):
        unique = {str(p): p for p in found}  # one line per problem, in the order found
        self.found = list(unique.values())
        self.problems = list(unique)
        super().__init__(
            f"{len(self.problems)} invalid stack setting(s):\n" + "\n".join(f"  - {p}" for p in self.problems)
        )
