"""Which of a service's config files give a database connection: what makes a pod a database client.

A restore or a rollback (README, Database backups) stops every pod that writes to the databases
first. Which pods those are is read from what the program renders, not listed by hand: a workload is
a database client when a config file it mounts has oslo.db's `[database] connection` (or placement's
`[placement_database]`). That catches
the API pods and the schedulers, the cinder-volume and cinder-backup DaemonSets and the purge and
archive CronJobs alike, and leaves out nova-compute, whose node nova.conf has no database (it writes
through nova-conductor). Such workloads carry the label DATABASE_CLIENT_LABEL, which the README's
commands select.

The files are rendered once more with stand-in secrets: which sections a file has does not depend on
the passwords in it, and the labels must be known in a preview, before any password exists.
"""

from __future__ import annotations

import configparser
from collections.abc import Callable, Iterable

from components.mechanism.inifile import parse_ini
from components.mechanism.spec import RenderContext, ServiceSpec
from components.settings.model import Settings

DATABASE_CLIENT_LABEL = "openstack.org/database-client"
LABELS = {DATABASE_CLIENT_LABEL: "true"}


def _connects(text: str) -> bool:
    try:
        parsed = parse_ini(text)
    except configparser.Error:  # not an INI file (uwsgi's, nfs_shares, a policy file)
        return False
    # oslo.db's [database], and the sections projects register besides it: placement's
    # [placement_database], nova's [api_database].
    sections = [s for s in parsed.sections() if s == "database" or s.endswith("_database")]
    return any(parsed.get(section, "connection", fallback="") for section in sections)


def connecting_files(spec: ServiceSpec, settings: Settings, secret_keys: Iterable[str]) -> frozenset[str]:
    """The keys of the spec's rendered files that hold a database connection."""
    rendered = spec.render(RenderContext(settings, {key: "stand-in" for key in secret_keys}))
    return frozenset(key for key, text in rendered.items() if _connects(text))


def labels_for(config_files: Iterable[str], key_of: Callable[[str], str], connecting: frozenset[str]) -> dict[str, str]:
    """The workload's object labels: LABELS when a config file it mounts connects to a database."""
    return dict(LABELS) if any(key_of(entry) in connecting for entry in config_files) else {}
