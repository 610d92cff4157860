"""libvirtd's own configuration on compute nodes: its daemon and QEMU driver files, and SASL.

Live migration: the source's libvirtd connects to the destination's over TCP on the node's
address (libvirt_start.sh adds listen_addr at start), authenticated with SASL as
kolla-ansible does (DIGEST-MD5, which encrypts the session; SCRAM only with TLS), with a
generated password held in the Secret `libvirt-sasl`. The local socket is for nova-compute,
on the same node, without authentication. Under `tls.libvirt` the listener is TLS alone, with
SASL SCRAM-SHA-256 over it, and QEMU's migrations and VNC are on TLS (components/nodes/libvirt_tls.py).
"""

from __future__ import annotations

from collections.abc import Mapping

from components.mechanism.workload import Manifest, env, secret_env
from components.nodes import libvirt_tls
from components.settings.model import NodeGroup

TCP_PORT = 16509
# QEMU runs as nova, not root (kolla-ansible's qemu.conf): a guest that escapes QEMU is an
# unprivileged user on the hypervisor. Kolla's nova-libvirt image makes nova a member of its
# qemu group (configure_user(name='nova', groups='qemu')), which libvirt gives QEMU as well.
QEMU_USER = QEMU_GROUP = "nova"
# Kolla's qemu group (kolla/common/users.py). kolla-ansible's udev rule (99-kolla-kvm.rules)
# gives /dev/kvm to it, mode 0660; libvirt_start.sh does the same where the host's /dev/kvm
# grants no other group (see there).
KOLLA_QEMU_GID = 42427
# kolla-ansible's values. libvirt's default of 5 requests per client is the binding limit for
# nova-compute, libvirtd's one busy client: concurrent builds and the periodic tasks starve its
# keepalive replies and libvirtd drops the connection; more workers so that the raised cap
# does not starve migrations and probes.
LIBVIRTD_LIMITS = {"max_client_requests": 20, "max_workers": 50}
SASL_USER = "nova"
SASL_MECH = "DIGEST-MD5"
SASLDB = "/etc/libvirt/passwd.db"
SASL_PASSWORD = "libvirt-sasl"  # the generated password's name (Credentials.shared)
SASL_SECRET = "libvirt-sasl"  # the Kubernetes Secret holding it
# libvirt's clients (a migrating libvirtd, nova-compute) read their credentials here: both run as root.
AUTH_MOUNT = "libvirt-auth.conf=/root/.config/libvirt/auth.conf"
SASL_MOUNTS = ("libvirt-sasl.conf=/etc/sasl2/libvirt.conf", AUTH_MOUNT)


def _key_values(values: Mapping[str, object]) -> str:
    """libvirt's plain `key = value` files (not INI): written line by line."""
    return "".join(f"{k} = {v}\n" for k, v in values.items())


def config_files(group: NodeGroup, tls: bool = False) -> dict[str, str]:
    """libvirtd.conf and qemu.conf of a node group; `tls`: on libvirt's CA (components/nodes/libvirt_tls.py)."""
    libvirtd = {
        "listen_tls": 0,
        "listen_tcp": 1,
        "tcp_port": f'"{TCP_PORT}"',
        "auth_tcp": '"sasl"',
        "unix_sock_group": '"root"',
        "unix_sock_rw_perms": '"0770"',
        "auth_unix_rw": '"none"',
        "log_outputs": '"3:stderr"',
        **LIBVIRTD_LIMITS,
    }
    if tls:
        del libvirtd["tcp_port"], libvirtd["auth_tcp"]
        libvirtd.update(libvirt_tls.libvirtd_options())
    qemu = {
        "user": f'"{QEMU_USER}"',
        "group": f'"{QEMU_GROUP}"',
        # nova-compute runs as root here (Kolla's as nova), so what it writes for a guest is
        # root's: libvirt hands each domain's files (disks, their _base backing files, kernel,
        # ramdisk, config drive, console.log) to QEMU's user when it starts it. libvirt's
        # default, set because QEMU as nova relies on it (nova's driver does too).
        "dynamic_ownership": 1,
        # QEMU writes its own output through libvirtd (openstack-helm's choice; kolla-ansible runs
        # virtlogd for "logd"); the guest's console log it opens itself, chowned as above.
        "stdio_handler": '"file"',
        # QEMU's open files and processes (RLIMIT_NOFILE, RLIMIT_NPROC): as nova, RLIMIT_NPROC
        # counts every QEMU thread of the node (root was exempt); kolla-ansible's values by default.
        "max_files": group.qemu_max_files,
        "max_processes": group.qemu_max_processes,
    }
    if tls:
        qemu.update(libvirt_tls.qemu_options())
    if group.virt_type == "lxc":
        qemu = {}
    return {f"libvirtd-{group.name}.conf": _key_values(libvirtd), f"qemu-{group.name}.conf": _key_values(qemu)}


def sasl_files(password: str, tls: bool = False) -> dict[str, str]:
    """The SASL server config of libvirtd, and the credentials a migrating libvirtd presents."""
    sasl = f"mech_list: {libvirt_tls.SASL_MECH if tls else SASL_MECH}\nsasldb_path: {SASLDB}\n"
    auth = (
        f"[credentials-default]\nauthname={SASL_USER}\npassword={password}\n\n"
        "[auth-libvirt-default]\ncredentials=default\n"
    )
    return {"libvirt-sasl.conf": sasl, "libvirt-auth.conf": auth}


def qemu_env(group: NodeGroup) -> tuple[Manifest, ...]:
    """What libvirt_start.sh gives QEMU's user access to /dev/kvm from, for virtType kvm."""
    return (
        env("VIRT_TYPE", group.virt_type),
        env("QEMU_USER", QEMU_USER),
        env("KOLLA_QEMU_GID", str(KOLLA_QEMU_GID)),
    )


def sasl_env() -> tuple[Manifest, ...]:
    """What libvirt_start.sh creates libvirtd's SASL user from."""
    return (env("LIBVIRT_SASL_USER", SASL_USER), secret_env("LIBVIRT_SASL_PASSWORD", SASL_SECRET, "password"))
