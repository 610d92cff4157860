"""What the image-contents check reads: shell scripts, Python scripts, Dockerfiles, Debian and
PyPI metadata, and the plan's pods; all on small inputs, without network."""

from __future__ import annotations

import io
import tarfile
from pathlib import Path

from tests.conftest import plan_of
from tools.imagecheck.alternatives import links_of_script
from tools.imagecheck.debversion import compare
from tools.imagecheck.dockerfile import instructions, recipe
from tools.imagecheck.kolla import Rendered
from tools.imagecheck.pods import ACCOUNT_DIR, plan_containers
from tools.imagecheck.pypi import pypi_name, requirement
from tools.imagecheck.pyscan import script_needs
from tools.imagecheck.report import kolla_images
from tools.imagecheck.sdist import sdist_contents
from tools.imagecheck.shell import ALL_ARGS, Call, Redirect, parse_errors, script_events
from tools.imagecheck.ubuntu import Archive, parse_packages


def calls(text: str, env: dict[str, str] | None = None, args: list[str] | None = None) -> list[tuple[str | None, ...]]:
    return [e.words for e in script_events(text, env, args) if isinstance(e, Call)]


def test_shell_commands_in_pipelines_substitutions_and_heredocs_are_found() -> None:
    text = 'a | b -x && c\nd "$(e 1)" `f`\ncat <<EOF\n$(g)\nEOF\nif h; then i; elif j; then k; else l; fi\n'
    found = [w[0] for w in calls(text)]
    assert found == ["a", "b", "c", "e", "f", "d", "cat", "g", "h", "i", "j", "k", "l"]


def test_shell_variables_are_known_where_the_script_sets_them_literally() -> None:
    text = 'x=/usr/bin/tool\nargs=(--a "b c")\n"$x" "${args[@]}" $NODE "$UNSET"\nfor f in 1 2; do x=$f; "$x"; done\n'
    assert calls(text, {"NODE": "n1"}) == [("/usr/bin/tool", "--a", "b c", "n1", None), (None,)]


def test_shell_positional_parameters_follow_shift_until_a_loop_shifts() -> None:
    assert calls('echo "$1"; shift; exec "$@"', args=["a", "b", "c"]) == [("echo", "a"), ("shift",), ("exec", "b", "c")]
    looped = 'while [ "$1" != -- ]; do shift; done; exec "$@"'
    assert calls(looped, args=["a", "--", "b"])[-1] == ("exec", ALL_ARGS)


def test_shell_functions_are_marked_and_guards_come_from_command_v() -> None:
    text = "f() { run-it; }\nf\nif command -v opt >/dev/null; then opt --x; fi\nopt --y\n"
    events = [e for e in script_events(text) if isinstance(e, Call)]
    assert [(e.words[0], e.function, "opt" in e.guards) for e in events] == [
        ("run-it", False, False),
        ("f", True, False),
        ("command", False, False),
        ("opt", False, True),
        ("opt", False, False),
    ]


def test_shell_redirections_say_what_is_read_and_written() -> None:
    events = [e for e in script_events("cat < /in > /out 2>&1; echo x >> /log") if isinstance(e, Redirect)]
    assert [(e.path, e.writes) for e in events] == [("/in", False), ("/out", True), ("/log", True)]


def test_shell_syntax_errors_are_reported_by_line() -> None:
    assert parse_errors('echo ok\necho "unterminated\n') == [2]
    assert parse_errors("echo ok\n") == []


def test_python_imports_programs_and_paths_are_read_with_ast() -> None:
    source = (
        "import os, json.decoder\n"
        "from keystoneauth1.identity import v3\n"
        "try:\n    import yaml\nexcept ImportError:\n    yaml = None\n"
        "def f():\n    import pymysql\n    subprocess.run(['keystone-manage', 'x'])\n    os.execvp('ip', ['ip'])\n"
        "ETC = '/etc/keystone/keystone.conf'\nURL = '/api/v1/nodes'\n"
    )
    needs = script_needs(source)
    assert [(i.module, i.optional) for i in needs.imports] == [
        ("os", False),
        ("json.decoder", False),
        ("keystoneauth1.identity", False),
        ("yaml", True),
        ("pymysql", False),
    ]
    assert [p.name for p in needs.programs] == ["keystone-manage", "ip"]
    assert [p for p, _ in needs.paths] == ["/etc/keystone/keystone.conf"]


def _rendered(
    tmp_path: Path, name: str, parent: str | None, text: str, files: dict[str, str] | None = None
) -> Rendered:
    directory = tmp_path / name
    directory.mkdir()
    (directory / "Dockerfile").write_text(text)
    for file, content in (files or {}).items():
        (directory / file).write_text(content)
    return Rendered(name, directory, parent, None if parent else "ubuntu:24.04")


def test_a_dockerfile_chain_gives_packages_venv_files_and_user(tmp_path: Path) -> None:
    base = _rendered(
        tmp_path,
        "base",
        None,
        "FROM ubuntu:24.04\nENV LANG en_US.UTF-8\nRUN apt-get -y install --no-install-recommends \\\n\n    sudo gawk\n"
        "COPY start.sh /usr/local/bin/kolla_start\nRUN rm -f /etc/x && touch /usr/local/bin/kolla_extend_start\n"
        'ENTRYPOINT ["dumb-init", "--"]\nCMD ["kolla_start"]\n',
        {"start.sh": "#!/bin/bash\n"},
    )
    child = _rendered(
        tmp_path,
        "nova-base",
        "base",
        "FROM kolla/base:1\nADD nova-base-archive /nova-base-source\n"
        "RUN python3 -m venv --system-site-packages /var/lib/kolla/venv\nENV PATH /var/lib/kolla/venv/bin:$PATH\n"
        "RUN apt-get install python3-libvirt && ln -s nova-base-source/* nova \\\n"
        "    && python3 -m pip --no-cache-dir install -c /requirements/uc.txt /nova \\\n"
        "    && mkdir -p /etc/nova && cp -r /nova/etc/nova/* /etc/nova/ && useradd --uid 42436 nova\n"
        "USER nova\n",
    )
    found = recipe([base, child])
    assert [(s.packages, s.recommends) for s in found.apt] == [(("sudo", "gawk"), False), (("python3-libvirt",), True)]
    assert found.env["PATH"] == "/var/lib/kolla/venv/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
    assert found.venvs == {"/var/lib/kolla/venv": True}
    assert [(p.venv, p.requirements) for p in found.pip] == [("/var/lib/kolla/venv", ("/nova",))]
    assert found.sources["/nova"] == "nova-base"
    assert found.source_copies == [("nova-base", "etc/nova/*", "/etc/nova")]
    assert {"/usr/local/bin/kolla_start", "/usr/local/bin/kolla_extend_start"} <= found.files
    assert "/etc/x" in found.removed and found.users == {"nova": 42436}
    assert (found.entrypoint, found.cmd, found.user) == (["dumb-init", "--"], ["kolla_start"], "nova")
    assert instructions("RUN a \\\n  # comment\n  b\n") == [("RUN", "a   b")]


PACKAGES = """Package: a
Version: 1.0
Priority: optional
Depends: b | c, v, libx (>= 2) | liby:any
Filename: pool/a.deb

Package: b
Version: 1.0
Priority: optional
Filename: pool/b.deb

Package: c
Version: 1.0
Priority: optional
Filename: pool/c.deb

Package: p2
Version: 1.0
Priority: optional
Provides: v
Filename: pool/p2.deb

Package: p1
Version: 1.0
Priority: important
Provides: v (= 1)
Filename: pool/p1.deb

Package: libx
Version: 2.0
Priority: required
Recommends: c
Filename: pool/libx.deb

Package: libx
Version: 2.0~rc1
Priority: required
Filename: pool/libx-old.deb
"""


def test_apt_takes_the_first_alternative_unless_another_is_there_and_virtuals_by_importance() -> None:
    archive = Archive(parse_packages(PACKAGES, "noble"))
    assert archive.packages["libx"].filename == "pool/libx.deb"  # the newer version
    added, missing = archive.install(["a"], set(), recommends=False)
    assert added == {"a", "b", "p1", "libx"} and missing == []
    assert archive.install(["a", "c"], set(), recommends=False)[0] == {"a", "c", "p1", "libx"}
    assert archive.install(["libx"], set(), recommends=True)[0] == {"libx", "c"}
    assert archive.install(["nothere"], set(), recommends=False)[1] == ["nothere"]
    assert archive.base_image()[1] == ["apt"]  # required packages plus apt, which this index lacks


def test_debian_versions_order_as_dpkg_orders_them() -> None:
    assert compare("1.0~rc1", "1.0") < 0 < compare("1:0.9", "2.0")
    assert compare("2.39-0ubuntu8.3", "2.39-0ubuntu8") > 0
    assert compare("1.0", "1.0") == 0


def test_alternatives_come_from_update_alternatives_in_postinst() -> None:
    postinst = (
        '#!/bin/sh\nset -e\nif [ "$1" = configure ]; then\n'
        "  update-alternatives --install /usr/bin/awk awk /usr/bin/mawk 5 \\\n"
        "    --slave /usr/share/man/man1/awk.1.gz awk.1.gz /usr/share/man/man1/mawk.1.gz\nfi\n"
    )
    assert links_of_script(postinst) == [
        ("/usr/bin/awk", "/usr/bin/mawk"),
        ("/usr/share/man/man1/awk.1.gz", "/usr/share/man/man1/mawk.1.gz"),
    ]


def test_an_sdist_is_read_from_its_declarations(tmp_path: Path) -> None:
    archive = tmp_path / "thing-1.0.tar.gz"
    setup = "from setuptools import setup\nsetup(name='thing', py_modules=['thing'], scripts=['bin/thing-run'])\n"
    with tarfile.open(archive, "w:gz") as tar:
        for name, text in {"thing-1.0/setup.py": setup, "thing-1.0/thing.py": ""}.items():
            info = tarfile.TarInfo(name)
            info.size = len(text)
            tar.addfile(info, io.BytesIO(text.encode()))
    found = sdist_contents("thing", "1.0", archive)
    assert (found.modules, found.scripts, found.partial) == (("thing",), ("thing-run",), True)
    assert "uwsgi" in sdist_contents("uwsgi", "2.0.31", archive).scripts  # its setup.py installs the binary


def test_pip_install_words_become_pypi_projects() -> None:
    table = {
        "placement-base": {"location": "$tarballs_base/openstack/placement/placement-${openstack_branch}.tar.gz"},
        "nova-base-plugin-blazar": {"location": "$tarballs_base/openstack/blazar-nova/blazar-nova-x.tar.gz"},
        "keystone-base": {"location": "$tarballs_base/openstack/keystone/keystone-x.tar.gz"},
    }
    assert pypi_name(table["placement-base"]["location"]) == "openstack-placement"
    sources = {"/placement": "placement-base", "/keystone": "keystone-base"}
    assert requirement("/placement", sources, table, "placement-base") == ["openstack-placement"]
    assert requirement("/keystone[ldap]", sources, table, "keystone-base") == ["keystone[ldap]"]
    assert requirement("/plugins/*", sources, table, "nova-base") == ["blazar-nova"]
    assert requirement("tooz[etcd]", sources, table, "x") == ["tooz[etcd]"]


def test_the_plans_containers_carry_their_scripts_and_the_operators_are_skipped() -> None:
    plan = plan_of("prod")
    references = {"quay.io/openstack.kolla/nova-libvirt:2026.1-ubuntu-noble", "rabbitmq:4.2.8-management"}
    named = kolla_images(plan, references)
    assert named == {"quay.io/openstack.kolla/nova-libvirt:2026.1-ubuntu-noble": "nova-libvirt"}
    found = plan_containers(plan, named)
    libvirt = next(c for c in found.containers if c.where == "DaemonSet/libvirt-kvm-general/libvirt")
    # args only: the image's entrypoint (Kolla's dumb-init) runs them
    assert libvirt.command is None and libvirt.args == ("bash", "/scripts/libvirt_start.sh")
    assert "exec" in (libvirt.mount_of("/scripts/libvirt_start.sh")[0].files or {}).get("", "")  # type: ignore[index]
    assert libvirt.execs == (("readinessProbe", ("virsh", "-c", "qemu:///system", "uri")),)
    assert not any(m.path == ACCOUNT_DIR for m in libvirt.mounts)  # automountServiceAccountToken: false
    skipped = {(s.where, s.image) for s in found.skipped}
    assert ("RabbitmqCluster/rabbitmq", "rabbitmq:4.2.8-management") in skipped
    assert (
        "DaemonSet/cinder-volume/cinder-volume",
        "quay.io/openstack.kolla/cinder-volume:2026.1-ubuntu-noble",
    ) in skipped
