"""`upgrade`: the release a `pulumi up` upgrades from, and which jumps between releases are supported.

The program learns the release it upgrades from from the stack file (`upgrade.from`), set by the
operator for the run that changes `release`, and not from the cluster: a plan (`tools.plan`,
`pulumi preview` under the mock runtime, the policy pack) must say what the upgrade will do
without a cluster to ask, and the stack file is what review sees. The preflight Jobs then check
that the databases really are at that release's state (components/cloud/upgrade.py).

Supported jumps follow OpenStack's release cadence (governance resolution 20220210, quoted in
each nova release's prelude, e.g. nova releasenotes/notes/epoxy-prelude-*.yaml): from the release
before, and into a SLURP release (the .1 releases) also from the SLURP release before it,
skipping the one in between (2025.1 → 2026.1).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

from pydantic import Field, field_validator, model_validator

from components.settings.base import Model
from components.settings.problems import Problem, problem
from components.settings.value_types import Text

if TYPE_CHECKING:
    from components.settings.model import Settings

# OpenStack's series in order; the .1 releases are SLURP (skip-level upgrade release process).
SERIES = ("2024.1", "2024.2", "2025.1", "2025.2", "2026.1")
SLURP = frozenset({"2024.1", "2025.1", "2026.1"})
# Kolla's tag of each release's images: Ubuntu noble from 2025.1 (kolla's supported distributions).
KOLLA_DISTRIBUTION = {"2024.1": "ubuntu-jammy", "2024.2": "ubuntu-jammy"}


def kolla_tag(release: str) -> str:
    return f"{release}-{KOLLA_DISTRIBUTION.get(release, 'ubuntu-noble')}"


EXAMPLE = "upgrade: {from: '2025.2'}"


class Upgrade(Model):
    """`upgrade`: set for the `pulumi up` that changes `release`, removed once it has completed."""

    from_release: Text = Field(alias="from", description="the release the cloud runs now, e.g. 2025.2")

    # What pydantic alone would say here ("Field required", "Input should be a valid string")
    # names neither what `from` means nor why a release that looks right is refused.
    @model_validator(mode="before")
    @classmethod
    def _an_object_with_from(cls, data: Any) -> Any:
        if not isinstance(data, Mapping):
            raise ValueError(f"an object whose `from` names the release the cloud runs, e.g. {EXAMPLE}")
        if "from" not in data:  # a misspelt key is shown with the value
            raise ValueError(f"needs `from`, the release the cloud runs, e.g. {EXAMPLE}")
        return data

    @field_validator("from_release", mode="before")
    @classmethod
    def _quoted(cls, value: Any) -> Any:
        if isinstance(value, int | float):
            raise ValueError(f"a release in quotes, e.g. '{value}': unquoted, YAML reads {value} as a number")
        if not isinstance(value, str):
            raise ValueError(f"the release the cloud runs, in quotes, e.g. {EXAMPLE}")
        return value


def sources(target: str) -> tuple[str, ...]:
    """The releases an upgrade to `target` may start from: N-1, and N-2 when both are SLURP."""
    if target not in SERIES:
        return ()
    index = SERIES.index(target)
    found = [SERIES[index - 1]] if index >= 1 else []
    if index >= 2 and target in SLURP and SERIES[index - 2] in SLURP:
        found.append(SERIES[index - 2])
    return tuple(found)


def problems(settings: Settings) -> Iterator[Problem]:
    upgrade = settings.upgrade
    if upgrade is None:
        return
    allowed = sources(settings.release)
    if upgrade.from_release not in allowed:
        skip = " (N-1, or the SLURP release before it: a skip-level upgrade)" if len(allowed) > 1 else " (N-1)"
        yield problem(
            ("upgrade", "from"),
            upgrade.from_release,
            f"an upgrade to release {settings.release} starts from {' or '.join(allowed) or 'no release'}{skip}; "
            "a longer jump goes through the releases between, one `pulumi up` each",
        )
    if not settings.backup.enabled:
        yield problem(
            ("backup", "enabled"),
            False,
            "upgrade.from needs backup.enabled: the backup taken before the first migration is the rollback",
        )
