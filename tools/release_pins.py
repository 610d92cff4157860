"""What each OpenStack release the program deploys takes from PyPI, and where its builds are cached.

The user's image-contents check (tools/imagecheck) resolves the same pins as Kolla's images would,
and the test lab builds its OpenStack virtualenvs from them (tests/lab/realenv/openstack_venv.py), so
both read them here: no tool a user runs imports the lab.
"""

import os
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class ReleasePins:
    """What one release's venv takes from PyPI: its projects' versions, and the instant that
    stands in for openstack/requirements' upper-constraints.txt of its stable branch."""

    codename: str
    pinned: dict[str, str]  # taken at these versions even when newer than the cutoff
    cutoff: str  # every other package as PyPI stood at this instant
    extra: tuple[str, ...] = ()  # requirements of this release's alone, resolved within the cutoff


# How these were determined (2026-11-22, PyPI JSON API and `pip index versions`):
# - keystone 29.0.0, glance 32.0.0, openstack-placement 15.0.0, nova 33.0.0,
#   neutron 28.0.0 and cinder 28.0.0 were all uploaded on 2026-04-01, the 2026.1
#   release day (their rc1s in mid-March); the next majors (keystone 30, nova 34,
#   neutron 29, glance 33, placement 16, cinder 29) came on 2026-09-30 with 2026.2
#   and Requires-Python >= 3.11. Within each 2026.1 series, the newest stable point
#   release is taken.
# - python-openstackclient 9.0, openstacksdk 4.10 and oslo.config 10.3 were released
#   together at the 2026.1 library freeze (2026-02-17); the next releases are after
#   2026.1 shipped. 9.0.1 is osc's stable/2026.1 point release.
# - horizon keeps one major across releases: its stable/2026.1 branch descends from the
#   25.7.x tags (25.7.3 on 2026-05-05 is its newest point release); 26.0.0 (2026-07-03)
#   is the first 2026.2 release.
# Every other package is resolved as PyPI stood the day after the release: newer oslo
# libraries belong to 2026.2 and drop things 2026.1 services still use.
GAZPACHO = ReleasePins(
    "Gazpacho",
    {
        "keystone": "29.1.0",
        "glance": "32.0.0",
        "openstack-placement": "15.0.0",
        "nova": "33.0.2",
        "neutron": "28.0.2",
        "cinder": "28.0.0",
        "horizon": "25.7.3",
        "python-openstackclient": "9.0.1",
        "openstacksdk": "4.10.0",
        "oslo.config": "10.3.0",
    },
    "2026-04-02T00:00:00Z",
)
# How these were determined (2026-11-27, PyPI JSON API; openstack/releases
# deliverables/flamingo/*.yaml and openstack/requirements stable/2025.2 upper-constraints.txt):
# - keystone 28.0.0, glance 31.0.0, openstack-placement 14.0.0, nova 32.0.0, neutron 27.0.0
#   and cinder 27.0.0 were uploaded on 2025-10-01, the 2025.2 release day; their next majors
#   are 2026.1's. The newest point release of each 2025.2 series: keystone 28.1.0
#   (2026-09-03), glance 31.1.0 (2026-03-23), nova 32.2.1 (2026-07-01), neutron 27.0.4
#   (2026-09-11); placement and cinder have none after 14.0.0 and 27.0.0.
# - python-openstackclient 8.2.0, openstacksdk 4.7.x and oslo.config 10.0.0 are the 2025.2
#   libraries (the deliverables' last 2025.2 versions, and upper-constraints' pins);
#   openstacksdk 4.7.2 (2025-11-20) is its stable/2025.2 point release.
# - horizon's stable/2025.2 releases are 25.4.0 to 25.5.x; 25.5.2 (2026-03-19) is the newest
#   (upper-constraints pins it too); 25.6.0 and later are 2026.1's.
# - XStatic-Font-Awesome 4.7.0.0, as upper-constraints pins it: horizon 25.5 asks for >=4.7.0.0
#   but imports Font Awesome 4's SCSS (openstack_dashboard/static/dashboard/scss/horizon.scss,
#   font-awesome.scss); 6.2.1.1, which the cutoff would take, has none, and `django compress`
#   fails. Horizon moved to Font Awesome 6 in 2026.1 (its requirements: >=6.2.1.2).
# - setuptools 80.9.0, the newest on the cutoff (upper-constraints has none), and held to it: cinder
#   27 lists its options through its Windows drivers (cinder/opts.py), whose os-win imports
#   pkg_resources, which the setuptools `uv venv --seed` brings (84.x) no longer has. Not exempt
#   from the cutoff (a pin would be, and sdists' isolated builds would then take 84.x as well).
#   cinder 28 dropped those drivers.
FLAMINGO = ReleasePins(
    "Flamingo",
    {
        "keystone": "28.1.0",
        "glance": "31.1.0",
        "openstack-placement": "14.0.0",
        "nova": "32.2.1",
        "neutron": "27.0.4",
        "cinder": "27.0.0",
        "horizon": "25.5.2",
        "python-openstackclient": "8.2.0",
        "openstacksdk": "4.7.2",
        "oslo.config": "10.0.0",
        "XStatic-Font-Awesome": "4.7.0.0",
    },
    "2025-10-02T00:00:00Z",
    ("setuptools==80.9.0",),
)
# The releases the program deploys (components/settings/releases.py; tests/real/test_machinery.py checks they agree).
RELEASES: dict[str, ReleasePins] = {"2025.2": FLAMINGO, "2026.1": GAZPACHO}

# uv honours a per-package exception to the date cutoff, which pip cannot express.
UV_VERSION = "0.13.9"

# The checkout (this file is tools/release_pins.py).
REPO_ROOT = Path(__file__).resolve().parents[1]


def cache_base() -> Path:
    """The cache of the OpenStack venvs, uv's downloads, the image contents and the lab's guest.

    Outside the checkout, so that every clone of the machine (CI's among them) reuses what one built:
    each entry is keyed by what decides it (a venv by its recipe's hash, a download by its address).
    OPENSTACK_VENV_CACHE moves it. As root, /var/cache/openstack-on-k8s: the tests run the venvs as the
    services' own users too (setpriv), who cannot enter /root; otherwise `$XDG_CACHE_HOME/openstack-on-k8s`.
    """
    if os.environ.get("OPENSTACK_VENV_CACHE"):
        return Path(os.environ["OPENSTACK_VENV_CACHE"])
    if os.geteuid() == 0:
        return Path("/var/cache/openstack-on-k8s")
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "openstack-on-k8s"
