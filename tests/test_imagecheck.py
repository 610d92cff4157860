"""The image-contents check on small, made-up images and containers (no network).

tests/real/test_image_contents.py runs it on the real plans against the images as Kolla builds them.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from tools.imagecheck.check import Miss, Result, check_container
from tools.imagecheck.contents import ImageContents, canonical, from_record
from tools.imagecheck.pods import Container, Mount

VENV = "/var/lib/kolla/venv"
SYSTEM_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
PACKAGES = {
    "bash": ["bin/bash"],
    "dash": ["bin/sh", "usr/bin/dash"],
    "coreutils": ["bin/mkdir", "bin/cat", "usr/bin/sleep"],
    "mawk": ["usr/bin/mawk"],
    "python3.12": ["usr/bin/python3.12"],
    "python3-minimal": ["usr/bin/python3"],
    "libpython3.12-minimal": ["usr/lib/python3.12/os.py", "usr/lib/python3.12/json/__init__.py"],
    "openvswitch-switch": ["usr/bin/ovs-vsctl", "usr/share/openvswitch/vswitch.ovsschema"],
    "python3-libvirt": ["usr/lib/python3/dist-packages/libvirt.py"],
    "dumb-init": ["usr/bin/dumb-init"],
}
DISTS = {
    "nova": (["nova", "nova.cmd", "nova.cmd.compute"], ["nova-compute", "nova-manage"]),
    "openstacksdk": (["openstack", "openstack.exceptions"], ["openstack-inventory"]),
    "pymysql": (["pymysql"], []),
}


def image(debs: list[str], dists: list[str] = (), system_site: bool = True, files: list[str] = ()) -> ImageContents:  # type: ignore[assignment]
    """A made-up image: Debian packages from PACKAGES and, with `dists`, a venv first on PATH."""
    record: dict[str, Any] = {
        "packages": {name: {"version": "1", "files": files_} for name, files_ in PACKAGES.items()},
        "alternatives": {"mawk": [["/usr/bin/awk", "/usr/bin/mawk"]]},
        "dists": {
            f"{name}==1": {
                "name": name,
                "version": "1",
                "modules": modules,
                "scripts": scripts,
                "data": [],
                "partial": False,
                "origin": "wheel",
            }
            for name, (modules, scripts) in DISTS.items()
        },
        "images": {
            "test-image": {
                "chain": ["base", "test-image"],
                "env": {"PATH": (f"{VENV}/bin:" if dists else "") + SYSTEM_PATH},
                "user": None,
                "entrypoint": ["dumb-init", "--single-child", "--"],
                "cmd": ["kolla_start"],
                "debs": debs,
                "venvs": {VENV: {"system_site_packages": system_site, "dists": [f"{d}==1" for d in dists]}}
                if dists
                else {},
                "files": list(files),
                "dirs": ["/var/lib/nova", "/run", "/tmp"],
                "removed": [],
                "notes": [],
            }
        },
    }
    return from_record(record)["test-image"]


def container(
    command: list[str] | None,
    mounts: list[Mount] = (),  # type: ignore[assignment]
    env: dict[str, str | None] | None = None,
    execs: tuple[tuple[str, tuple[str, ...]], ...] = (),
) -> Container:
    return Container(
        "prod",
        "DaemonSet/test/main",
        "quay.io/openstack.kolla/test-image:x",
        tuple(command) if command else None,
        None,
        execs,
        env or {},
        tuple(mounts),
    )


def script(path: str, text: str, mode: int = 0o555) -> Mount:
    """A file of a ConfigMap mounted by subPath."""
    return Mount(path, "configMap", "test-bin", {"": text}, mode)


def check(c: Container, img: ImageContents) -> Result:
    return check_container(c, "test-image", img)


def names(misses: list[Miss], kind: str) -> set[str]:
    return {m.name for m in misses if m.kind == kind}


BASE = ["bash", "dash", "coreutils", "mawk", "python3.12", "python3-minimal", "libpython3.12-minimal"]


def test_a_command_missing_from_its_image_names_the_container_the_command_and_the_image() -> None:
    conf = Mount("/etc/nova/nova.conf", "secret", "nova-etc", {"": "[DEFAULT]\n"}, 0o440)
    c = container(["nova-compute", "--config-file", "/etc/nova/nova.conf"], [conf])
    result = check(c, image(BASE, ["openstacksdk"]))
    assert [str(m) for m in result.misses] == [
        f"prod DaemonSet/test/main (test-image): command nova-compute — command: not on PATH ({VENV}/bin:{SYSTEM_PATH})"
    ]
    assert check(c, image(BASE, ["nova"])).misses == []


def test_a_module_missing_from_the_venv_is_a_miss_and_one_it_has_is_not() -> None:
    source = "import os\nimport json\nimport pymysql\nfrom openstack import exceptions\n"
    c = container(["python3", "/scripts/db_init.py"], [script("/scripts/db_init.py", source)])
    result = check(c, image(BASE, ["openstacksdk"]))
    assert names(result.misses, "module") == {"pymysql"}
    assert result.modules == {"os", "json", "pymysql", "openstack"}
    assert check(c, image(BASE, ["openstacksdk", "pymysql"])).misses == []


def test_the_venv_sees_the_distributions_python_packages_only_with_system_site_packages() -> None:
    c = container(["python3", "-c", "import libvirt"])
    assert check(c, image([*BASE, "python3-libvirt"], ["nova"], system_site=True)).misses == []
    isolated = check(c, image([*BASE, "python3-libvirt"], ["nova"], system_site=False))
    assert names(isolated.misses, "module") == {"libvirt"}


def test_a_script_calling_a_binary_through_sh_c_is_followed() -> None:
    c = container(["sh", "-c", "ovs-vsctl --no-wait init && exec /usr/bin/ovs-vswitchd --pidfile"])
    result = check(c, image(BASE))
    assert names(result.misses, "command") == {"ovs-vsctl", "/usr/bin/ovs-vswitchd"}
    with_ovs = check(c, image([*BASE, "openvswitch-switch"]))
    assert names(with_ovs.misses, "command") == {"/usr/bin/ovs-vswitchd"}


def test_a_mounted_script_runs_by_its_shebang_and_hands_its_arguments_on() -> None:
    wait = '#!/bin/bash\nt=$1; shift\nwhile [ "$1" != "--" ]; do shift; done\nshift\nexec "$@"\n'
    start = "#!/bin/bash\nexec /scripts/wait.sh 60 /run/x.sock -- nova-compute --config-file /tmp/x\n"
    c = container(["bash", "/scripts/start.sh"], [script("/scripts/wait.sh", wait), script("/scripts/start.sh", start)])
    assert names(check(c, image(BASE)).misses, "command") == {"nova-compute"}
    assert check(c, image(BASE, ["nova"])).misses == [
        Miss(
            "prod",
            "DaemonSet/test/main",
            "test-image",
            "file",
            "/tmp/x",
            "/scripts/wait.sh:5 (nova-compute): not in the image",
        )
    ]


def test_a_script_mounted_without_exec_bits_cannot_be_run() -> None:
    c = container(["/scripts/start.sh"], [script("/scripts/start.sh", "#!/bin/bash\ntrue\n", mode=0o444)])
    assert [m.why for m in check(c, image(BASE)).misses] == ["command: mounted with mode 444, not executable"]


def test_functions_arrays_and_alternatives_resolve_as_bash_would() -> None:
    text = (
        'manage() { nova-manage --config-file /etc/nova/nova.conf "$@"; }\n'
        "cmd=(sleep 1)\n"
        "manage db sync | awk '{print $1}'\n\"${cmd[@]}\"\n"
    )
    conf = Mount("/etc/nova", "secret", "nova-etc", {"nova.conf": ""}, 0o440)
    result = check(container(["bash", "-c", text], [conf]), image(BASE, ["nova"]))
    assert result.misses == []
    assert {"nova-manage", "awk", "sleep"} <= result.commands
    assert "manage" not in result.commands  # a function, not a program


def test_a_command_only_known_at_run_time_is_unresolved_not_passed() -> None:
    c = container(["bash", "-c", "$TOOL --version"])
    assert names(check(c, image(BASE)).misses, "unresolved") == {"command"}
    resolved = check(container(["bash", "-c", "$TOOL --version"], env={"TOOL": "ovs-vsctl"}), image(BASE))
    assert names(resolved.misses, "command") == {"ovs-vsctl"}
    from_api = check(container(["bash", "-c", "$TOOL --version"], env={"TOOL": None}), image(BASE))
    assert names(from_api.misses, "unresolved") == {"command"}


def test_a_command_the_script_asks_for_first_is_a_note_not_a_miss() -> None:
    text = "if command -v systemd-run >/dev/null; then exec systemd-run --scope sleep 1; fi\nexec sleep 1\n"
    result = check(container(["bash", "-c", text]), image(BASE))
    assert result.misses == []
    assert any("systemd-run" in note for note in result.notes)
    unguarded = check(container(["bash", "-c", "exec systemd-run --scope sleep 1"]), image(BASE))
    assert names(unguarded.misses, "command") == {"systemd-run"}


def test_builtins_count_only_inside_a_shell() -> None:
    assert check(container(["bash", "-c", "echo hi; test -e /x; exec true"]), image(BASE)).misses == []
    probe = (("readinessProbe", ("echo", "ok")),)
    result = check(container(["sleep", "1"], execs=probe), image(BASE))
    assert [(m.name, m.why.split(":")[0]) for m in result.misses] == [("echo", "readinessProbe")]


def test_probes_and_hooks_are_checked_like_the_command() -> None:
    execs = (("readinessProbe", ("ovs-vsctl", "show")), ("preStop", ("python3", "-m", "nova.cmd.compute")))
    result = check(container(["sleep", "1"], execs=execs), image(BASE))
    assert {(m.name, m.why.split(":")[0]) for m in result.misses} == {
        ("ovs-vsctl", "readinessProbe"),
        ("nova.cmd.compute", "preStop (-m)"),
    }


def test_files_read_must_be_in_the_image_or_the_mount_and_written_ones_count_as_made() -> None:
    conf = "[DEFAULT]\nlock_path = /var/lib/nova/tmp\nstate_path = /srv/nowhere/state\n"
    mounts = [Mount("/etc/nova/nova.conf", "secret", "nova-etc", {"": conf}, 0o440)]
    text = (
        "printf x > /tmp/node.conf\n"
        "exec nova-compute --config-file /etc/nova/nova.conf --config-file /tmp/node.conf "
        "--config-file /etc/nova/missing.conf\n"
    )
    result = check(container(["bash", "-c", text], mounts), image(BASE, ["nova"]))
    assert names(result.misses, "file") == {"/etc/nova/missing.conf", "/srv/nowhere/state"}
    assert {"/var/lib/nova/tmp", "/tmp/node.conf", "/etc/nova/nova.conf"} <= result.files


def test_a_path_on_a_mounted_configmap_must_be_one_of_its_files() -> None:
    mounts = [Mount("/scripts", "configMap", "nova-bin", {"a.sh": "true\n"}, 0o555)]
    result = check(container(["bash", "/scripts/b.sh"], mounts), image(BASE))
    assert [(m.kind, m.name, m.why) for m in result.misses] == [
        ("file", "/scripts/b.sh", "command: not in the mounted configMap nova-bin")
    ]


def test_a_python_script_may_import_its_mounted_neighbours() -> None:
    mounts = [
        script("/scripts/main.py", "import helper\n"),
        script("/scripts/helper.py", "import pymysql\n"),
    ]
    result = check(container(["python3", "/scripts/main.py"], mounts), image(BASE, ["nova"]))
    assert [(m.name, m.why.split(":")[0]) for m in result.misses] == [("pymysql", "/scripts/helper.py")]


def test_without_a_command_the_image_entrypoint_and_cmd_run() -> None:
    result = check(container(None), image(BASE))
    assert names(result.misses, "command") == {"dumb-init"}


def test_args_alone_run_through_the_images_entrypoint_which_runs_them() -> None:
    """The program's containers give only args: Kolla's dumb-init is PID 1 and runs them."""
    img = image([*BASE, "dumb-init"], ["nova"])
    only_args = dataclasses.replace(container(None), args=("nova-compute", "--config-file", "/etc/nova/nova.conf"))
    assert [(m.kind, m.name) for m in check(only_args, img).misses] == [("file", "/etc/nova/nova.conf")]
    missing = dataclasses.replace(container(None), args=("ovs-vsctl", "show"))
    assert names(check(missing, img).misses, "command") == {"ovs-vsctl"}  # followed into dumb-init's arguments


def test_merged_usr_and_alternatives_find_what_debian_puts_elsewhere() -> None:
    img = image(BASE)
    assert img.which("bash") == "/usr/bin/bash"  # shipped as /bin/bash
    assert img.exists("/bin/sh") and img.exists("/usr/bin/sh")
    assert img.which("awk") == "/usr/bin/awk"  # mawk's update-alternatives link
    assert canonical("/var/run/x.sock") == "/run/x.sock"
    without_mawk = image([d for d in BASE if d != "mawk"])
    assert without_mawk.which("awk") is None


def test_the_lab_view_lists_the_path_and_the_venv() -> None:
    img = image(BASE, ["nova"])
    found = img.executables()
    assert found["nova-compute"] == f"{VENV}/bin/nova-compute"
    assert found["python3"] == f"{VENV}/bin/python3"  # the venv's, first on PATH
    assert found["bash"] == "/usr/bin/bash"
    assert "ovs-vsctl" not in found
    assert img.venvs[VENV].distributions == {"nova": "1"}


@pytest.mark.parametrize("words", [["exec", "sleep"], ["sudo", "ovs-vsctl"]])
def test_wrappers_are_programs_too(words: list[str]) -> None:
    result = check(container(words), image(BASE))
    assert words[0] in names(result.misses, "command")


def test_the_containers_own_path_replaces_the_images() -> None:
    img = image(BASE, ["nova"])
    assert check(container(["nova-compute"]), img).misses == []
    narrowed = check(container(["nova-compute"], env={"PATH": "/usr/bin"}), img)
    assert [m.why for m in narrowed.misses] == ["command: not on PATH (/usr/bin)"]
