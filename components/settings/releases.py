"""The OpenStack releases this program deploys, and where what it renders differs between them.

A release is in RELEASES only once every config file, command and WSGI module the program renders
for it has been checked against that release's code: tests/real/test_configs.py and
test_commands.py run for each release here, each with a virtualenv of that release's projects
(tests/lab/realenv/openstack_venv.py, pinned in tools/release_pins.py). Where two releases
differ, the difference is a field of `Release`, with the source it was read from; the services read
it through `of(release)`.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from enum import Enum
from typing import TYPE_CHECKING

from components.settings.problems import Problem, problem
from components.settings.upgrade import kolla_tag

if TYPE_CHECKING:
    from components.settings.model import Settings


class GlanceServer(Enum):
    """What serves Glance's API.

    UWSGI: uWSGI loads the module glance.wsgi.api (glance-api-uwsgi.ini), as kolla-ansible's
    stable/2026.1 glance role does. Glance documents that mode as supported from 2026.1 on
    (doc/source/admin/apache-httpd.rst of stable/2026.1), after fixing its reads of chunked uploads
    under uWSGI (commit e01a5f8e7, bug 2127521: a read could return more than asked and load a
    whole image into memory), which stable/2025.2 does not have.

    OWN: Glance's own eventlet server, the `glance-api` command, listening where glance-api.conf's
    [DEFAULT] bind_host and bind_port say, with `workers` processes: what kolla-ansible's
    stable/2025.2 runs (roles/glance/templates/glance-api.json.j2, glance-api.conf.j2), and what
    stable/2025.2's apache-httpd.rst asks for ("uWSGI Server HTTP Mode ... just don't do it").
    That server speaks no TLS (glance/common/wsgi.py of stable/2025.2 has no certificate
    options): kolla-ansible puts an haproxy in front of it for TLS (glance-tls-proxy), which this
    program does not have, so settings refuse `tls.internal` on such a release.
    """

    UWSGI = "uwsgi"
    OWN = "own"


@dataclass(frozen=True)
class Release:
    """One release the program deploys: its name, and what it renders differently for it."""

    name: str
    codename: str
    # The [ml2] option listing the types of project networks: `tenant_network_types` until
    # neutron renamed it `project_network_types` in 2026.1 (commit dd8d87b2cb,
    # neutron/conf/plugins/ml2/config.py), keeping the old name as a deprecated alias.
    ml2_network_types_option: str
    glance_server: GlanceServer
    # Earlier names of that option this release still reads (its `deprecated_name`).
    ml2_network_types_aliases: tuple[str, ...] = ()

    @property
    def kolla_tag(self) -> str:
        """The tag of Kolla's images of this release (components/settings/upgrade.py)."""
        return kolla_tag(self.name)


FLAMINGO = Release("2025.2", "Flamingo", "tenant_network_types", GlanceServer.OWN)
GAZPACHO = Release("2026.1", "Gazpacho", "project_network_types", GlanceServer.UWSGI, ("tenant_network_types",))
RELEASES: dict[str, Release] = {release.name: release for release in (FLAMINGO, GAZPACHO)}
# The release the stack files name and a stack without `release` gets.
DEFAULT_RELEASE = GAZPACHO.name


def of(release: str) -> Release:
    """The release of that name; settings only ever hold one of RELEASES."""
    return RELEASES[release]


def ml2_network_types_option(settings: Settings) -> str:
    """The [ml2] option naming the project networks' types, as the stack's release spells it.

    During an upgrade, the previous release's spelling where the new release still reads it: until
    neutron-server has rolled, its pods of the previous release read the same Secret (a container
    that restarts may mount the new file), and under a name it does not know the option takes its
    default, `local`, which no type driver here serves: that neutron-server exits ("No type driver
    for tenant network_type", neutron/plugins/ml2/managers.py). The `pulumi up` that removes
    `upgrade.from` then spells it the new way (respelt_after_upgrade).
    """
    target = of(settings.release)
    previous = RELEASES.get(settings.upgrade.from_release) if settings.upgrade is not None else None
    if previous is not None and previous.ml2_network_types_option in target.ml2_network_types_aliases:
        return previous.ml2_network_types_option
    return target.ml2_network_types_option


def respelt_after_upgrade(settings: Settings) -> tuple[str, ...]:
    """The services whose control plane reads an option spelt the previous release's way during the
    upgrade: the `pulumi up` that removes `upgrade.from` changes their files, which rolls them."""
    return ("neutron",) if ml2_network_types_option(settings) != of(settings.release).ml2_network_types_option else ()


def problems(settings: Settings) -> Iterator[Problem]:
    """What the stack's release cannot deploy as the stack asks."""
    release = of(settings.release)
    if release.glance_server is GlanceServer.OWN and settings.tls.internal_enabled and settings.services.on("glance"):
        internal = settings.tls.internal
        yield problem(
            ("tls", "internal"),
            internal.model_dump(by_alias=True, exclude_defaults=True) if internal is not None else None,
            f"release {release.name}'s glance-api serves no TLS itself (its own server, not uWSGI: "
            "components/settings/releases.py), so not every API can serve HTTPS inside the cluster: set "
            f"tls.internal to {{plainText: true}} for release {release.name}, or deploy {DEFAULT_RELEASE}",
        )
