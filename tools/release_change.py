"""`--against`: a change of `release` is an upgrade, or the plan is refused.

A stack file whose `release` differs from the plan it is compared with (the release deployed now) must
say so with `upgrade.from` naming that release: then the program plans the ordered upgrade (preflight,
backup, service by service, components/cloud/upgrade.py). Without it every image would change at once,
with no check, no backup and no order. A jump the projects do not support is refused with the path
they do (components/settings/upgrade.py: the release before, and SLURP to SLURP).
"""

from __future__ import annotations

from components.settings import upgrade as upgrade_settings
from components.settings.model import Settings


def problem(deployed: str | None, settings: Settings, against: str) -> str | None:
    """Why the plan of `settings` may not follow one of release `deployed` (the plan in `against`)."""
    target = settings.release
    if deployed is None or deployed == target:
        return None
    given = settings.upgrade.from_release if settings.upgrade is not None else None
    series = upgrade_settings.SERIES
    if deployed in series and target in series and series.index(target) < series.index(deployed):
        return (
            f"release goes back from {deployed} (the plan in {against}) to {target}: that is a rollback, which "
            "restores the databases of before the upgrade first (README, Upgrading to a new release, Rollback); "
            "plan it without --against"
        )
    supported = upgrade_settings.sources(target)
    if deployed not in supported:
        path = ", ".join(supported) or "none"
        return (
            f"release changes from {deployed} (the plan in {against}) to {target}, which is no supported upgrade: "
            f"{target} upgrades from {path} (the release before it; into a SLURP release also from the SLURP "
            f"release before): upgrade through those first"
        )
    if given is None:
        return (
            f"release changes from {deployed} (the plan in {against}) to {target} without upgrade.from: a release "
            f"change is an upgrade; set upgrade: {{from: '{deployed}'}} so that the program plans it in order "
            "(preflight checks, a backup, service by service), and remove it once it has completed"
        )
    if given != deployed:
        return f"upgrade.from is {given}, but the plan in {against} deployed {deployed}: set upgrade.from to {deployed}"
    return None
