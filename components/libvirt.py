"""libvirtd's own configuration on compute nodes: its daemon and QEMU driver files, and SASL.

Live migration: the source's libvirtd connects to the destination's over TCP on the node's
address (libvirt_start.sh adds listen_addr at start), authenticated with SASL as
kolla-ansible does (DIGEST-MD5, which encrypts the session; SCRAM only with TLS), with a
generated password held in the Secret `libvirt-sasl`. The local socket is for nova-compute,
on the same node, without authentication.
"""

from __future__ import annotations

from collections.abc import Mapping

from components.settings import NodeGroup
from components.workload import Manifest, env, secret_env

TCP_PORT = 16509
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


def config_files(group: NodeGroup) -> dict[str, str]:
    """libvirtd.conf and qemu.conf of a node group."""
    libvirtd = {
        "listen_tls": 0,
        "listen_tcp": 1,
        "tcp_port": f'"{TCP_PORT}"',
        "auth_tcp": '"sasl"',
        "unix_sock_group": '"root"',
        "unix_sock_rw_perms": '"0770"',
        "auth_unix_rw": '"none"',
        "log_outputs": '"3:stderr"',
    }
    qemu = {"user": '"root"', "group": '"root"', "stdio_handler": '"file"'}
    if group.virt_type == "lxc":
        qemu = {}
    return {f"libvirtd-{group.name}.conf": _key_values(libvirtd), f"qemu-{group.name}.conf": _key_values(qemu)}


def sasl_files(password: str) -> dict[str, str]:
    """The SASL server config of libvirtd, and the credentials a migrating libvirtd presents."""
    sasl = f"mech_list: {SASL_MECH}\nsasldb_path: {SASLDB}\n"
    auth = (
        f"[credentials-default]\nauthname={SASL_USER}\npassword={password}\n\n"
        "[auth-libvirt-default]\ncredentials=default\n"
    )
    return {"libvirt-sasl.conf": sasl, "libvirt-auth.conf": auth}


def sasl_env() -> tuple[Manifest, ...]:
    """What libvirt_start.sh creates libvirtd's SASL user from."""
    return (env("LIBVIRT_SASL_USER", SASL_USER), secret_env("LIBVIRT_SASL_PASSWORD", SASL_SECRET, "password"))
