"""What a chain of rendered Kolla Dockerfiles does to an image, instruction by instruction.

ENV, USER, COPY/ADD and RUN are read; a RUN's commands are walked with the shell walker
(tools/imagecheck/shell.py), which yields: `apt-get install` (with or without recommends),
`pip install` (into the venv whose python runs it), `python3 -m venv`, and the files and
directories that mkdir, touch, ln, cp, mv, rm, redirections and `useradd` make or remove.
Kolla installs each OpenStack project from its source archive (`ADD nova-base-archive
/nova-base-source`, `ln -s nova-base-source/* nova`, `pip install /nova`): such paths are
recorded as the kolla source they come from. What a command does beyond these (sed, chmod, a
download) is not modelled.
"""

from __future__ import annotations

import json
import posixpath
import re
import shlex
from dataclasses import dataclass, field

from tools.imagecheck.kolla import Rendered
from tools.imagecheck.shell import Call, Redirect, script_events

# The distribution image's own environment (ubuntu:24.04's config).
BASE_ENV = {"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}
_VARIABLE = re.compile(r"\$(\w+)|\$\{(\w+)\}")


@dataclass(frozen=True)
class AptStep:
    packages: tuple[str, ...]
    recommends: bool
    image: str


@dataclass(frozen=True)
class PipStep:
    venv: str | None  # the venv whose python runs pip; None for the system's
    requirements: tuple[str, ...]  # as written: names, name[extra], /nova, /keystone[ldap], /plugins/*
    image: str  # whose Dockerfile runs it (its plugins are /plugins/*)


@dataclass
class Recipe:
    """The image as its Dockerfiles leave it (parents first)."""

    chain: list[str] = field(default_factory=list)
    base_image: str | None = None
    env: dict[str, str] = field(default_factory=lambda: dict(BASE_ENV))
    user: str | None = None
    entrypoint: list[str] = field(default_factory=list)
    cmd: list[str] = field(default_factory=list)
    apt: list[AptStep] = field(default_factory=list)
    pip: list[PipStep] = field(default_factory=list)
    venvs: dict[str, bool] = field(default_factory=dict)  # path → --system-site-packages
    files: set[str] = field(default_factory=set)
    dirs: set[str] = field(default_factory=set)
    removed: set[str] = field(default_factory=set)
    links: dict[str, str] = field(default_factory=dict)  # link → target
    sources: dict[str, str] = field(default_factory=dict)  # /nova → kolla source "nova-base"
    source_copies: list[tuple[str, str, str]] = field(default_factory=list)  # (source, path in it, dest)
    users: dict[str, int] = field(default_factory=dict)
    apt_sources: list[str] = field(default_factory=list)  # repositories the RUNs add
    unknown: list[str] = field(default_factory=list)  # commands whose effect could not be read

    def add_file(self, path: str) -> None:
        self.files.add(path)
        self.removed.discard(path)
        self.dirs.update(_parents(path))

    def add_dir(self, path: str) -> None:
        self.dirs.add(path)
        self.removed.discard(path)
        self.dirs.update(_parents(path))

    def is_dir(self, path: str) -> bool:
        return path in self.dirs or path in self.venvs or path in self.sources


def _parents(path: str) -> list[str]:
    parents = []
    while path not in ("/", ""):
        path = posixpath.dirname(path)
        parents.append(path)
    return parents


def instructions(text: str) -> list[tuple[str, str]]:
    """(KEYWORD, arguments) of each instruction, continuation lines joined, comments dropped."""
    out: list[tuple[str, str]] = []
    pending = ""
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.startswith("#") or not stripped:  # Docker skips both, inside continuations too
            continue
        if stripped.endswith("\\"):
            pending += line.rstrip()[:-1]
            continue
        whole = (pending + line).strip()
        pending = ""
        if whole:
            keyword, _, rest = whole.partition(" ")
            out.append((keyword.upper(), rest.strip()))
    return out


def recipe(chain: list[Rendered]) -> Recipe:
    result = Recipe()
    for rendered in chain:
        result.chain.append(rendered.name)
        if rendered.base_image:
            result.base_image = rendered.base_image
        for keyword, arguments in instructions(rendered.dockerfile):
            if keyword == "ENV":
                result.env.update(_env(arguments, result.env))
            elif keyword == "USER":
                result.user = arguments.split(":")[0]
            elif keyword == "ENTRYPOINT":
                result.entrypoint = _exec_form(arguments)
                result.cmd = []  # a new ENTRYPOINT resets the inherited CMD
            elif keyword == "CMD":
                result.cmd = _exec_form(arguments)
            elif keyword in ("COPY", "ADD"):
                _copy(result, rendered, arguments)
            elif keyword == "RUN":
                _run(result, rendered.name, arguments)
    return result


def _exec_form(arguments: str) -> list[str]:
    """["a", "b"] as written, or the shell form run by /bin/sh -c."""
    if arguments.startswith("["):
        return [str(word) for word in json.loads(arguments)]
    return ["/bin/sh", "-c", arguments]


def _substitute(text: str, env: dict[str, str]) -> str:
    return _VARIABLE.sub(lambda m: env.get(m.group(1) or m.group(2), ""), text)


def _env(arguments: str, env: dict[str, str]) -> dict[str, str]:
    words = shlex.split(arguments.replace("\n", " "))
    if words and "=" not in words[0]:  # legacy form: ENV KEY value with spaces
        return {words[0]: _substitute(" ".join(words[1:]), env)}
    found = {}
    for word in words:
        key, _, value = word.partition("=")
        found[key] = _substitute(value, env)
    return found


def _copy(result: Recipe, rendered: Rendered, arguments: str) -> None:
    if arguments.startswith("["):
        words = json.loads(arguments)
    else:
        words = [w for w in shlex.split(arguments) if not w.startswith("--")]
    *sources, dest = words
    into_dir = dest.endswith("/") or len(sources) > 1
    for source in sources:
        if source.endswith("-archive"):  # kolla's source archives: a tree whose files it does not list
            target = dest if dest != "/" else "/" + source.removesuffix("-archive")
            if source == "plugins-archive":
                target = "/plugins"
            result.add_dir(target)
            result.sources[target] = source.removesuffix("-archive")
            continue
        local = rendered.directory / source
        if local.is_dir():
            for inner in sorted(local.rglob("*")):
                if inner.is_file():
                    result.add_file(posixpath.join(dest, str(inner.relative_to(local))))
        else:
            result.add_file(posixpath.join(dest, posixpath.basename(source)) if into_dir else dest)


def _run(result: Recipe, image: str, text: str) -> None:
    cwd = "/"
    for event in script_events(text, result.env):
        if isinstance(event, Redirect):
            if event.writes and event.path and event.path.startswith("/") and not event.path.startswith("/dev/"):
                result.add_file(event.path)
                source = posixpath.basename(event.path)
                if event.path.startswith("/etc/apt/sources.list.d/") and source not in result.apt_sources:
                    result.apt_sources.append(source)
            continue
        words = event.words
        if words[0] == "cd" and len(words) > 1 and words[1]:
            cwd = posixpath.normpath(posixpath.join(cwd, words[1]))
            continue
        _command(result, image, event, cwd)


def _absolute(cwd: str, path: str) -> str:
    return posixpath.normpath(posixpath.join(cwd, path))


def _command(result: Recipe, image: str, call: Call, cwd: str) -> None:
    words = call.words
    name = posixpath.basename(words[0] or "")
    known = [w for w in words[1:] if w is not None]
    options = {w for w in known if w.startswith("-")}
    operands = [w for w in known if not w.startswith("-")]
    if name == "apt-get" and "install" in known:
        packages = tuple(w for w in known[known.index("install") + 1 :] if not w.startswith("-"))
        result.apt.append(AptStep(packages, "--no-install-recommends" not in known, image))
    elif "pip" in known and "install" in known and name.startswith("python"):
        result.pip.append(PipStep(_venv_of(result, words[0] or ""), _pip_requirements(known), image))
    elif known[:2] == ["-m", "venv"]:
        result.venvs[_absolute(cwd, operands[-1])] = "--system-site-packages" in options
        result.add_dir(_absolute(cwd, operands[-1]))
    elif name == "mkdir":
        for path in operands:
            result.add_dir(_absolute(cwd, path))
    elif name == "touch":
        for path in operands:
            result.add_file(_absolute(cwd, path))
    elif name == "ln" and len(operands) == 2 and None not in words:
        _link(result, cwd, *operands)
    elif name == "cp" and len(operands) >= 2 and None not in words:
        _cp(result, cwd, operands)
    elif name == "mv" and len(operands) == 2 and None not in words:
        source, dest = (_absolute(cwd, p) for p in operands)
        result.removed.add(source)
        result.files.discard(source)
        result.add_file(dest)
    elif name == "rm":
        for path in operands:
            result.removed.add(_absolute(cwd, path))
    elif name == "useradd" and "--uid" in known and operands:
        result.users[operands[-1]] = int(known[known.index("--uid") + 1])


def _venv_of(result: Recipe, python: str) -> str | None:
    """The venv whose python a bare `python3` is: the first venv directory on PATH."""
    if python.startswith("/"):
        return next((v for v in result.venvs if python.startswith(v + "/")), None)
    for directory in result.env.get("PATH", "").split(":"):
        venv = posixpath.dirname(directory)
        if directory.endswith("/bin") and venv in result.venvs:
            return venv
    return None


def _pip_requirements(words: list[str]) -> tuple[str, ...]:
    with_value = {"-c", "--constraint", "-r", "--requirement", "-i", "--index-url", "--extra-index-url", "-t"}
    after = words[words.index("install") + 1 :]
    out, skip = [], False
    for word in after:
        if skip:
            skip = False
        elif word in with_value:
            skip = True
        elif not word.startswith("-"):
            out.append(word)
    return tuple(out)


def _link(result: Recipe, cwd: str, target: str, link: str) -> None:
    where = _absolute(cwd, link)
    if target.endswith("/*"):  # kolla's `ln -s nova-base-source/* nova`: the tree under another name
        source_dir = _absolute(cwd, target[:-2])
        result.add_dir(where)
        if source_dir in result.sources:
            result.sources[where] = result.sources[source_dir]
        return
    if result.is_dir(where):
        where = posixpath.join(where, posixpath.basename(target))
    result.links[where] = _absolute(posixpath.dirname(where), target)
    result.add_file(where)


def _cp(result: Recipe, cwd: str, operands: list[str]) -> None:
    *sources, dest = (_absolute(cwd, p) for p in operands)
    for source in sources:
        tree = next((d for d in result.sources if source == d or source.startswith(d + "/")), None)
        if tree is not None:  # from a project's source: what it ships there
            inner = posixpath.relpath(source, tree)
            result.source_copies.append((result.sources[tree], inner, dest))
            if source.endswith("/*"):
                result.add_dir(dest)
            else:
                result.add_file(posixpath.join(dest, posixpath.basename(source)) if result.is_dir(dest) else dest)
        elif result.is_dir(dest) or len(sources) > 1:
            result.add_file(posixpath.join(dest, posixpath.basename(source)))
        else:
            result.add_file(dest)
