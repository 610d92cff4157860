"""The check: what a container runs, reads and imports must be in its image as Kolla builds it.

From the container's argv (command and args, or the image's entrypoint and CMD), its exec probes
and lifecycle hooks, every program is looked up as the image would find it: an absolute path
must be a file of the image (or of a mount), a bare name must be on PATH (the container's PATH
if it sets one, else the image's) unless it is a builtin of the shell running it. What a program
runs in turn is followed: shell scripts (`bash x.sh`, `sh -c "..."`, a mounted script run by its
shebang) through the shell walker, Python (`python3 x.py`, `-m`, `-c`) through `ast` against the
modules of that interpreter, uWSGI's `--ini` for its WSGI module. Absolute paths given as
arguments are files: a config file (`--config-file`, `--ini`, a script) must exist; another
path must exist or have its directory there (the program may create it). A path on a mount is
checked against the mounted ConfigMap or Secret, or left to the volume (hostPath, emptyDir).
"""

from __future__ import annotations

import configparser
import posixpath
import re
from dataclasses import dataclass, field

from tools.imagecheck.contents import ImageContents, ModuleIndex
from tools.imagecheck.pods import Container
from tools.imagecheck.programs import (
    BASH_BUILTINS,
    DASH_BUILTINS,
    NOT_READING,
    READ_OPTIONS,
    RUNTIME_ROOTS,
    WRAPPERS,
    unwrap,
)
from tools.imagecheck.pyscan import script_needs
from tools.imagecheck.shell import ALL_ARGS, Call, parse_errors, script_events

_MAX_DEPTH = 8
_PYTHON = re.compile(r"python(3(\.\d+)?)?")
_PATH_OPTION = re.compile(r"^\s*([\w.-]+)\s*=\s*(/[^\s=]*)\s*$")


@dataclass(frozen=True)
class Miss:
    stack: str
    where: str
    image: str
    kind: str  # command, file, module, unresolved, script
    name: str
    why: str

    def __str__(self) -> str:
        return f"{self.stack} {self.where} ({self.image}): {self.kind} {self.name} — {self.why}"


@dataclass
class Result:
    commands: set[str] = field(default_factory=set)
    files: set[str] = field(default_factory=set)
    modules: set[str] = field(default_factory=set)
    misses: list[Miss] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def check_container(container: Container, image_name: str, image: ImageContents) -> Result:
    return _Checker(container, image_name, image).run()


@dataclass
class _Checker:
    container: Container
    image_name: str
    image: ImageContents
    result: Result = field(default_factory=Result)
    created: set[str] = field(default_factory=set)
    depth: int = 0

    @property
    def env(self) -> dict[str, str]:
        env = dict(self.image.env)
        env.update({k: v for k, v in self.container.env.items() if v is not None})
        for name, value in self.container.env.items():
            if value is None:
                env.pop(name, None)
        return env

    @property
    def path_env(self) -> str:
        return self.env.get("PATH", "")

    def miss(self, kind: str, name: str, why: str) -> None:
        # One miss per missing thing and container: the first place it is needed.
        if not any(m.kind == kind and m.name == name for m in self.result.misses):
            self.result.misses.append(
                Miss(self.container.stack, self.container.where, self.image_name, kind, name, why)
            )

    def note(self, text: str) -> None:
        if text not in self.result.notes:
            self.result.notes.append(text)

    def run(self) -> Result:
        c = self.container
        if c.command is not None:
            argv = [*c.command, *(c.args or ())]
        else:
            argv = [*self.image.entrypoint, *(c.args if c.args is not None else self.image.cmd)]
        self.exec(list(argv), "command")
        for label, probe in c.execs:
            self.exec(list(probe), label)
        return self.result

    # -- programs -----------------------------------------------------------------------------

    def exec(
        self,
        words: list[str | None],
        origin: str,
        shell: str | None = None,
        guards: frozenset[str] = frozenset(),
        invoked: list[str] | None = None,
    ) -> None:
        if not words:
            return
        if words[0] == ALL_ARGS:
            if invoked is None or "--" not in invoked:
                self.miss("unresolved", '"$@"', f"{origin}: runs its arguments, which the check cannot follow")
                return
            # The convention of wait_for_sockets.sh: `SCRIPT ARGS... -- COMMAND...`.
            words = [*invoked[invoked.index("--") + 1 :], *words[1:]]
            if not words:
                return
        name = words[0]
        if name is None:
            self.miss("unresolved", "command", f"{origin}: its name is only known when it runs")
            return
        builtins = BASH_BUILTINS if shell == "bash" else DASH_BUILTINS if shell else frozenset()
        if name in builtins:
            self._builtin(words, origin, shell, guards, invoked)
            return
        if self.depth > _MAX_DEPTH:
            return
        path = self.lookup(name, origin, guards)
        if path is None:
            return
        program = posixpath.basename(path)
        args = words[1:]
        if program in WRAPPERS:
            self.exec(unwrap(args, *WRAPPERS[program]), origin, None, guards, invoked)
            return
        self.depth += 1
        try:
            followed = self.follow(path, args, origin)
        finally:
            self.depth -= 1
        if not followed:  # a script's arguments are checked where the script uses them
            self.arguments(program, args, origin)

    def _builtin(
        self, words: list[str | None], origin: str, shell: str | None, guards: frozenset[str], invoked: list[str] | None
    ) -> None:
        name, args = words[0], words[1:]
        if name == "exec" and args:
            self.exec(args, origin, shell, guards, invoked)
        elif name == "command" and args and args[0] not in ("-v", "-V"):
            self.exec([a for a in args if a != "-p"], origin, shell, guards, invoked)
        elif name in (".", "source") and args and args[0] is not None:
            text = self.read(args[0], origin)
            if text is not None:
                self.walk(text, shell or "sh", invoked, args[0])
        elif name == "eval" and args:
            if None in args:
                self.miss("unresolved", "eval", f"{origin}: evaluates text only known when it runs")
            else:
                self.walk(" ".join(str(a) for a in args), shell or "sh", invoked, origin)

    def lookup(self, name: str, origin: str, guards: frozenset[str]) -> str | None:
        """Where the program is: in a mount (a script), or in the image; a miss otherwise."""
        self.result.commands.add(name)
        if name.startswith("/"):
            mounted = self.container.mount_of(name)
            if mounted is not None and mounted[0].files is not None:
                if mounted[1] in mounted[0].files:
                    return name
                self.miss("command", name, f"{origin}: not in the mounted {mounted[0].kind} {mounted[0].source}")
                return None
            if mounted is not None:
                self.note(f"{name} is on the {mounted[0].kind} volume at {mounted[0].path}: not checked")
                return None
        found = self.image.which(name, self.path_env)
        if found is not None:
            return found
        why = "not in the image" if name.startswith("/") else f"not on PATH ({self.path_env})"
        if name in guards:
            self.note(f"{origin}: {name} is {why}; the script asks for it first (command -v) and copes without")
            return None
        self.miss("command", name, f"{origin}: {why}")
        return None

    def follow(self, path: str, args: list[str | None], origin: str) -> bool:
        """Into what the program runs, when the check can read it: True when it did."""
        program = posixpath.basename(path)
        if program in ("bash", "sh", "dash"):
            self.shell(args, "bash" if program == "bash" else "sh", origin)
        elif _PYTHON.fullmatch(program):
            self.python(path, args, origin)
        elif program == "uwsgi" and "--ini" in args:
            self.uwsgi(path, args, origin)
        else:
            text = self.mounted_text(path)
            if text is None:
                return False
            mount = self.container.mount_of(path)
            mode = mount[0].mode if mount else None
            if mode is not None and not mode & 0o111:
                self.miss("command", path, f"{origin}: mounted with mode {mode:o}, not executable")
                return True
            first = text.splitlines()[0] if text else ""
            if not first.startswith("#!"):
                self.miss("command", path, f"{origin}: a mounted file without #! line run as a program")
                return True
            interpreter = first[2:].split()
            self.exec([*interpreter, path, *args], f"{path} (#!)")
        return True

    def shell(self, args: list[str | None], shell: str, origin: str) -> None:
        i = 0
        while i < len(args) and args[i] is not None and str(args[i]).startswith("-"):
            option = str(args[i])
            if option == "-c":
                if i + 1 >= len(args) or args[i + 1] is None:
                    self.miss("unresolved", f"{shell} -c", f"{origin}: a script only known when it runs")
                    return
                positional = [str(a) if a is not None else "" for a in args[i + 3 :]]
                self.walk(str(args[i + 1]), shell, positional, f"{origin} ({shell} -c)")
                return
            i += 2 if option == "-o" else 1
        if i >= len(args):
            return
        script = args[i]
        if script is None:
            self.miss("unresolved", shell, f"{origin}: runs a script whose path is only known when it runs")
            return
        text = self.read(script, origin)
        if text is not None:
            self.walk(text, shell, [str(a) if a is not None else "" for a in args[i + 1 :]], script)

    def walk(self, text: str, shell: str, positional: list[str] | None, origin: str) -> None:
        errors = parse_errors(text)
        if errors:
            self.miss("script", origin, f"does not parse as {shell} at line {errors[0]}")
            return
        for event in script_events(text, self.env, positional):
            where = f"{origin}:{event.line}"
            if not isinstance(event, Call):
                if event.path is None:
                    continue
                if event.writes:
                    self.created.add(posixpath.normpath(event.path))
                else:
                    self.file(event.path, where, strict=True)
                continue
            if event.function:
                continue
            self.exec(list(event.words), where, shell, event.guards, positional)

    # -- Python and uWSGI -----------------------------------------------------------------------

    def python(self, interpreter: str, args: list[str | None], origin: str) -> None:
        index = self.image.modules_for(interpreter)
        i = 0
        while i < len(args):
            option = args[i]
            if option in ("-m", "-c"):
                value = args[i + 1] if i + 1 < len(args) else None
                if value is None:
                    self.miss("unresolved", f"python {option}", f"{origin}: its value is only known when it runs")
                elif option == "-m":
                    self.module(value, index, f"{origin} (-m)")
                else:
                    self.python_source(value, index, f"{origin} (-c)", None)
                return
            if option in ("-W", "-X"):
                i += 2
                continue
            if option is not None and option.startswith("-"):
                i += 1
                continue
            break
        if i >= len(args):
            return
        script = args[i]
        if script is None:
            self.miss("unresolved", "python", f"{origin}: runs a script whose path is only known when it runs")
            return
        text = self.read(script, origin)
        if text is not None:
            self.python_source(text, index, script, posixpath.dirname(script))

    def python_source(self, text: str, index: ModuleIndex, origin: str, directory: str | None) -> None:
        try:
            needs = script_needs(text)
        except SyntaxError as error:
            self.miss("script", origin, f"does not parse as Python: {error.msg} (line {error.lineno})")
            return
        for found in needs.imports:
            top = found.module.split(".")[0]
            sibling = posixpath.join(directory, f"{top}.py") if directory else None
            if sibling is not None and self.mounted_text(sibling) is not None:
                if sibling not in self.result.files and self.depth <= _MAX_DEPTH:
                    self.result.files.add(sibling)
                    self.depth += 1
                    self.python_source(self.mounted_text(sibling) or "", index, sibling, directory)
                    self.depth -= 1
                continue
            self.module(found.module, index, f"{origin}:{found.line}", optional=found.optional)
        for program in needs.programs:
            self.exec([program.name], f"{origin}:{program.line}")
        for path, line in needs.paths:
            self.file(path, f"{origin}:{line}", strict=False)

    def module(self, dotted: str, index: ModuleIndex, origin: str, optional: bool = False) -> None:
        self.result.modules.add(dotted)
        if index.has(dotted):
            return
        if optional:
            self.note(f"{origin}: optional import {dotted} is not in the image")
        else:
            self.miss("module", dotted, f"{origin}: not importable by the image's Python")

    def uwsgi(self, path: str, args: list[str | None], origin: str) -> None:
        ini = args[args.index("--ini") + 1] if args.index("--ini") + 1 < len(args) else None
        text = self.read(ini, origin) if ini else None
        if text is None:
            return
        parser = configparser.RawConfigParser(strict=False)
        parser.read_string(text)
        if not parser.has_section("uwsgi"):
            return
        python = posixpath.join(posixpath.dirname(path), "python3")
        options = parser["uwsgi"]
        if "module" in options:
            self.module(options["module"].split(":")[0], self.image.modules_for(python), f"{ini} (module)")
        if "wsgi-file" in options:
            self.file(options["wsgi-file"], f"{ini} (wsgi-file)", strict=True)
        if "static-map" in options:
            self.file(options["static-map"].partition("=")[2], f"{ini} (static-map)", strict=False)

    # -- files --------------------------------------------------------------------------------

    def arguments(self, program: str, args: list[str | None], origin: str) -> None:
        if program in NOT_READING:
            if program in ("mkdir", "touch"):
                self.created.update(posixpath.normpath(a) for a in args if a and a.startswith("/"))
            return
        strict_next = False
        for arg in args:
            if arg is None:
                strict_next = False
                continue
            if strict_next:
                self.file(arg, f"{origin} ({program})", strict=True)
                self.config_paths(arg)
                strict_next = False
            elif arg in READ_OPTIONS:
                strict_next = True
            elif arg.startswith("--") and "=" in arg:
                option, _, value = arg.partition("=")
                if value.startswith("/"):
                    self.file(value, f"{origin} ({program})", strict=option in READ_OPTIONS)
            elif arg.startswith("/"):
                self.file(arg, f"{origin} ({program})", strict=program == "cat")

    def config_paths(self, path: str) -> None:
        """The absolute paths a mounted config file sets (lock_path, state_path, key_repository ...):
        each must exist or have its directory in the image or on a mount."""
        text = self.mounted_text(path)
        for number, line in enumerate((text or "").splitlines(), 1):
            match = _PATH_OPTION.match(line)
            if match:
                self.file(match.group(2), f"{path}:{number} ({match.group(1)})", strict=False)

    def file(self, path: str, origin: str, strict: bool) -> None:
        if not path.startswith("/") or any(c in path for c in "*?[") or "://" in path:
            return
        path = posixpath.normpath(path)
        if any(path == root or path.startswith(root + "/") for root in RUNTIME_ROOTS):
            return
        self.result.files.add(path)
        if path in self.created or any(path.startswith(c + "/") for c in self.created):
            return
        mounted = self.container.mount_of(path)
        if mounted is not None:
            mount, inner = mounted
            if mount.files is None or inner in mount.files or any(f.startswith(inner + "/") for f in mount.files):
                return
            if not inner and mount.files:
                return
            self.miss("file", path, f"{origin}: not in the mounted {mount.kind} {mount.source}")
            return
        if self.image.exists(path):
            return
        if not strict and self.image.is_dir(posixpath.dirname(path)):
            self.note(f"{origin}: {path} is not in the image, its directory is (made when it runs?)")
            return
        why = "not in the image" if strict else "neither it nor its directory is in the image"
        self.miss("file", path, f"{origin}: {why}")

    def mounted_text(self, path: str) -> str | None:
        mounted = self.container.mount_of(path)
        if mounted is None or mounted[0].files is None:
            return None
        return mounted[0].files.get(mounted[1])

    def read(self, path: str, origin: str) -> str | None:
        """A script's text: from its mount; a file of the image is checked but not read."""
        self.file(path, origin, strict=True)
        text = self.mounted_text(path)
        if text is None and self.image.exists(path):
            self.note(f"{origin}: runs {path} from the image; its commands are not read")
        return text
