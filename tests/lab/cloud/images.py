"""The one table of where the Kolla images differ from this machine, and the layer that bridges it.

A pod here runs on this machine's own root filesystem (Debian 12 with the packages of
`tests/lab/realenv/install_system_packages.sh`) with the OpenStack virtualenv of the targeted
release. Which release's virtualenv and layer an image takes when a plan runs two (an upgrade's
checks run the previous release's images) is `ReleaseVenvs` and `layer_name`'s to say. What a
Kolla image adds on top of its distribution, and the plan relies on, is rebuilt as one read-only
overlay layer per image (Kolla stable/2026.1, `docker/**/Dockerfile.j2` and
`kolla/common/users.py`; stable/2025.2's are the same in all of this):

- the service virtualenv at /var/lib/kolla/venv (kolla-toolbox: /opt/ansible), first on PATH;
- the project's /etc/<project> files the image copies from its source (api-paste.ini,
  rootwrap.conf, rootwrap.d/), with Kolla's `exec_dirs` for rootwrap;
- the service users with Kolla's fixed UIDs, their /var/lib/<user> homes, the `kolla` group;
- sudo's secure_path that finds the virtualenv's privsep-helper (base/sudoers);
- Horizon's local_settings.py link to /etc/openstack-dashboard (docker/horizon/Dockerfile.j2,
  made in the virtualenv when it is built: tests/lab/realenv/openstack_venv.py);
- the en_US.UTF-8 locale the images generate (LANG), and the system users their distribution
  packages create (libvirt-daemon-system's libvirt-qemu, which libvirtd resolves at start).

Nothing else is adapted: every path, user, command and file of the plan is used as it is.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from components.settings.releases import RELEASES
from components.settings.upgrade import SERIES, kolla_tag

KOLLA_VENV = "/var/lib/kolla/venv"
TOOLBOX_VENV = "/opt/ansible"
SYSTEM_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

# Kolla's users (kolla/common/users.py, uid == gid) that the images of the plan run as or
# give files to; every Kolla image has all of them (docker/base/Dockerfile.j2).
KOLLA_USERS: dict[str, int] = {
    "kolla": 42400,
    "ansible": 42401,
    "cinder": 42407,
    "glance": 42415,
    "horizon": 42420,
    "keystone": 42425,
    "qemu": 42427,
    "mysql": 42434,
    "neutron": 42435,
    "nova": 42436,
    "rabbitmq": 42439,
    "memcached": 42457,
    "libvirt": 42473,
    "openvswitch": 42476,
    "placement": 42482,
}
# configure_user() in each image: the service user's home, and its extra groups.
_EXTRA_GROUPS = {"nova": ("qemu",)}


@dataclass(frozen=True)
class KollaImage:
    """What one Kolla image adds to the distribution, as far as the plan's pods use it."""

    venv: str | None  # where the service virtualenv lives, None for distribution-only images
    user: str | None  # the image's USER; None is root
    project: str | None = None  # /etc/<project> gets the project's shipped files
    homes: tuple[str, ...] = ()  # service users whose /var/lib/<user> the image creates
    package_users: tuple[tuple[str, int], ...] = ()  # (name, uid) that the image's packages add
    # The image's ENTRYPOINT, which runs a container's args: Kolla's base image's (docker/base/Dockerfile.j2).
    entrypoint: tuple[str, ...] = ("dumb-init", "--single-child", "--")

    @property
    def path(self) -> str:
        return f"{self.venv}/bin:{SYSTEM_PATH}" if self.venv else SYSTEM_PATH


def _service(project: str, user: str | None, homes: tuple[str, ...] | None = None) -> KollaImage:
    return KollaImage(KOLLA_VENV, user, project, homes or (project,))


# Image name (without registry and tag) → what it adds. Images run as root where Kolla
# sets no USER (the API images start uWSGI as root; the pods here set runAsUser anyway).
IMAGES: dict[str, KollaImage] = {
    "keystone": _service("keystone", None),
    "glance-api": _service("glance", "glance"),
    "placement-api": _service("placement", None),
    "nova-api": _service("nova", None),
    "nova-scheduler": _service("nova", "nova"),
    "nova-conductor": _service("nova", "nova"),
    "nova-novncproxy": _service("nova", "nova"),
    "nova-compute": _service("nova", "nova"),
    # Ubuntu's libvirt-daemon-system adds libvirt-qemu (uid 64055), libvirtd's compiled-in QEMU user.
    "nova-libvirt": KollaImage(None, None, homes=("nova",), package_users=(("libvirt-qemu", 64055),)),
    "neutron-server": _service("neutron", "neutron"),
    "neutron-openvswitch-agent": _service("neutron", "neutron"),
    "neutron-l3-agent": _service("neutron", "neutron"),
    "neutron-dhcp-agent": _service("neutron", "neutron"),
    "neutron-metadata-agent": _service("neutron", "neutron"),
    "openvswitch-db-server": KollaImage(None, None),
    "openvswitch-vswitchd": KollaImage(None, None),
    "cinder-api": _service("cinder", None),
    "cinder-scheduler": _service("cinder", "cinder"),
    "cinder-volume": _service("cinder", "cinder"),
    # prod backs volumes up to Ceph (cinder.backup: ceph); Kolla's image runs as cinder as cinder-volume's does.
    "cinder-backup": _service("cinder", "cinder"),
    "horizon": _service("openstack-dashboard", None, ("horizon",)),
    "iscsid": KollaImage(None, None),
    "memcached": KollaImage(None, "memcached"),
    "kolla-toolbox": KollaImage(TOOLBOX_VENV, "ansible", homes=("ansible", "rabbitmq")),
    # Not Kolla's: the servers that play the operators' MariaDB and RabbitMQ (tests/lab/cloud/standins.py).
    "mariadb-server": KollaImage(None, None, entrypoint=()),
    "rabbitmq-server": KollaImage(None, None, entrypoint=()),
    # mariadb-operator's image in its backup Jobs: its step played by a shell (tests/lab/cloud/backup_standin.py).
    "mariadb-operator-backup": KollaImage(None, None, entrypoint=()),
}
# Kolla's base/sudoers: root may run anything, with the virtualenv first on sudo's path.
SUDOERS = (
    "Defaults env_reset\n"
    f'Defaults secure_path="{KOLLA_VENV}/bin:{SYSTEM_PATH}"\n'
    "root ALL=(ALL) ALL\n"
    "#includedir /etc/sudoers.d\n"
)
# Kolla rewrites rootwrap's exec_dirs so that it finds the virtualenv's commands.
EXEC_DIRS = f"exec_dirs={KOLLA_VENV}/bin,/sbin,/usr/sbin,/bin,/usr/bin,/usr/local/bin,/usr/local/sbin"


LANG = "en_US.UTF-8"
_build_lock = threading.Lock()


class UnknownImageError(KeyError):
    pass


def image_name(reference: str) -> str:
    """'quay.io/openstack.kolla/nova-api:2026.1-ubuntu-noble' → 'nova-api'."""
    return reference.rsplit("/", 1)[-1].split("@")[0].split(":")[0]


# A tag as Kolla's images of a release are tagged, `<release>-<distro>-<version>` (kolla_tag).
_RELEASE_TAG = re.compile(r"^(?P<release>\d{4}\.\d)-[a-z]+-[a-z]+$")


class UnknownReleaseError(KeyError):
    pass


def image_release(reference: str, stack_release: str) -> str:
    """The release whose virtualenv a container of this image runs.

    A Kolla tag names its release (`2025.2-ubuntu-noble`): an upgrade's checks run the previous
    release's images (components/settings/model.py `image(name, release)`). Any other reference (a tag
    of the operator's, a digest) is the stack's own release: `images.tag` and `images.overrides`
    pin the stack's release.
    """
    tag = reference.rsplit("/", 1)[-1].split("@")[0].partition(":")[2]
    match = _RELEASE_TAG.match(tag)
    if match is None:
        return stack_release
    release = match["release"]
    if release in RELEASES and tag == kolla_tag(release):
        return release
    if release in SERIES and tag == kolla_tag(release):
        raise UnknownReleaseError(
            f"image {reference!r} is release {release}'s, which the program does not deploy and the lab has no "
            f"virtualenv for (components/settings/releases.py: {', '.join(RELEASES)})"
        )
    return stack_release


def layer_name(reference: str, release: str) -> str:
    """The image's layer directory: one per image and release, since the layer holds the project's
    files of that release's virtualenv (`project_files`)."""
    return f"{image_name(reference)}-{release}"


@dataclass(frozen=True)
class ReleaseVenvs:
    """The OpenStack virtualenv of each release the lab's pods run, and which one a container gets."""

    stack_release: str
    venvs: Mapping[str, Path]  # release → its virtualenv (tests/lab/realenv/openstack_venv.py)

    @classmethod
    def for_images(cls, references: Iterable[str], stack_release: str, ensure: Callable[[str], Path]) -> ReleaseVenvs:
        """The venvs of the releases of `references` and the stack's, each made by `ensure(release)`
        (tests.lab.realenv.openstack_venv.ensure_venv(release).path)."""
        releases = {stack_release, *(image_release(ref, stack_release) for ref in references)}
        return cls(stack_release, {release: ensure(release) for release in sorted(releases)})

    def running(self, release: str) -> ReleaseVenvs:
        """The same venvs for a cloud that now runs `release` (a plan of that release applied)."""
        if release not in self.venvs:
            raise UnknownReleaseError(f"release {release}: the lab made no venv for it before the first pod "
                                      f"({', '.join(self.venvs)})")  # fmt: skip
        return ReleaseVenvs(release, self.venvs)

    def release_of(self, reference: str) -> str:
        return image_release(reference, self.stack_release)

    def venv_of(self, reference: str) -> Path:
        return self.venvs[self.release_of(reference)]


def kolla_image(reference: str) -> KollaImage:
    name = image_name(reference)
    if name not in IMAGES:
        raise UnknownImageError(
            f"image {reference!r} is not in tests/lab/cloud/images.py's table; add what it provides"
        )
    return IMAGES[name]


def user_groups(uid: int) -> tuple[int, ...]:
    """The supplementary groups the image's /etc/group gives a user (a runtime adds them)."""
    names = {uid_: name for name, uid_ in KOLLA_USERS.items()}
    name = names.get(uid)
    if name is None:
        return ()
    return (KOLLA_USERS["kolla"], *(KOLLA_USERS[g] for g in _EXTRA_GROUPS.get(name, ())))


# Where a layer links the commands its image has (tools/imagecheck), and what a restricted PATH holds.
IMAGE_BIN = "/usr/local/lab-image/bin"


def restricted_path(image: KollaImage) -> str:
    """PATH with only the image's own commands: its virtualenv's, and its distribution's as links."""
    return f"{image.venv}/bin:{IMAGE_BIN}" if image.venv else IMAGE_BIN


def build_layer(image: KollaImage, venv: Path, target: Path, commands: Mapping[str, str] | None = None) -> Path:
    """Write the image's layer under `target` (once; pods of one image share it); returns it.

    `commands` (name → path in the image) gets the image's commands linked under IMAGE_BIN, to
    this machine's binary of the same path or name: a bare name then finds only what the image has.
    """
    with _build_lock:
        if not (target / ".complete").exists():
            _build_layer(image, venv, target)
            if commands is not None:
                _image_bin(image, commands, target / IMAGE_BIN.lstrip("/"))
            (target / ".complete").touch()
    return target


def _image_bin(image: KollaImage, commands: Mapping[str, str], directory: Path) -> None:
    directory.mkdir(parents=True)
    for name, path in sorted(commands.items()):
        if image.venv and path.startswith(image.venv + "/"):
            continue  # the virtualenv is mounted where the image has it
        here = path if Path(path).exists() else shutil.which(name, path=SYSTEM_PATH)
        if here:
            (directory / name).symlink_to(here)


def _build_layer(image: KollaImage, venv: Path, target: Path) -> None:
    if target.exists():
        shutil.rmtree(target)
    etc = target / "etc"
    etc.mkdir(parents=True)
    _accounts(etc, image.package_users)
    _locale(target / "usr/lib/locale" / LANG, target.parent / ".locale" / LANG)
    (etc / "sudoers").write_text(SUDOERS)
    (etc / "sudoers").chmod(0o440)
    (etc / "sudoers.d").mkdir(mode=0o750)
    # The OpenStack virtualenv's interpreter lives under /root on this machine; the service
    # users must be able to reach it, as they reach /usr/bin/python3 in the image.
    (target / "root").mkdir(mode=0o755)
    (target / "root").chmod(0o755)
    for mountpoint in (KOLLA_VENV, TOOLBOX_VENV):
        (target / mountpoint.lstrip("/")).mkdir(parents=True)
    (target / "var/log/kolla").mkdir(parents=True)
    if image.project:
        project_files(image.project, venv, etc / image.project)
    for user in image.homes:
        home = target / "var/lib" / user
        home.mkdir(parents=True, exist_ok=True)
        os.chown(home, KOLLA_USERS[user], KOLLA_USERS[user])


def _locale(target: Path, compiled: Path) -> None:
    """The image's generated locale, compiled once per run from this machine's locale sources."""
    if not compiled.exists():
        compiled.parent.mkdir(parents=True, exist_ok=True)
        command = ["localedef", "-i", "en_US", "-f", "UTF-8", str(compiled)]
        done = subprocess.run(command, capture_output=True, text=True)
        if done.returncode not in (0, 1) or not compiled.exists():  # 1: compiled with warnings
            raise RuntimeError(f"localedef {LANG} failed: {done.stderr.strip()}")
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copytree(compiled, target, copy_function=os.link)


def _accounts(etc: Path, package_users: tuple[tuple[str, int], ...]) -> None:
    passwd = Path("/etc/passwd").read_text()
    group = Path("/etc/group").read_text()
    for name, uid in package_users:
        passwd += f"{name}:x:{uid}:{uid}::/nonexistent:/usr/sbin/nologin\n"
        group += f"{name}:x:{uid}:\n"
    for name, uid in KOLLA_USERS.items():
        passwd += f"{name}:x:{uid}:{uid}::/var/lib/{name}:/usr/sbin/nologin\n"
    members: dict[str, list[str]] = {"kolla": [u for u in KOLLA_USERS if u != "kolla"]}
    for user, groups in _EXTRA_GROUPS.items():
        for name in groups:
            members.setdefault(name, []).append(user)
    for name, gid in KOLLA_USERS.items():
        group += f"{name}:x:{gid}:{','.join(members.get(name, []))}\n"
    (etc / "passwd").write_text(passwd)
    (etc / "group").write_text(group)


def project_files(project: str, venv: Path, target: Path) -> None:
    """What Kolla copies into /etc/<project>: the files the project ships (its wheel's data files)."""
    target.mkdir(parents=True)
    shipped = venv / "etc" / project
    if shipped.is_dir():
        shutil.copytree(shipped, target, dirs_exist_ok=True)
    rootwrap = target / "rootwrap.conf"
    if rootwrap.exists():
        lines = [EXEC_DIRS if line.startswith("exec_dirs") else line for line in rootwrap.read_text().splitlines()]
        rootwrap.write_text("\n".join(lines) + "\n")
    if project == "neutron":
        # The ML2 plugin's directory exists in the image (etc/neutron/plugins/ml2/).
        (target / "plugins" / "ml2").mkdir(parents=True, exist_ok=True)
