"""What the check knows of programs in general: shell builtins, wrappers, options naming files."""

from __future__ import annotations


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


BASH_BUILTINS = _words(
    """
    : . [ alias bg bind break builtin caller cd command compgen complete compopt continue declare dirs disown echo
    enable eval exec exit export false fc fg getopts hash help history jobs kill let local logout mapfile popd printf
    pushd pwd read readarray readonly return set shift shopt source suspend test times trap true type typeset ulimit
    umask unalias unset wait
    """
)
DASH_BUILTINS = _words(
    """
    : . [ alias bg break cd command continue echo eval exec exit export false fg getopts hash jobs kill local printf
    pwd read readonly return set shift test times trap true type ulimit umask unalias unset wait
    """
)
# Programs that run the rest of their arguments as a command: (options that take a value,
# operands before the command: timeout's duration, flock's lock file).
WRAPPERS: dict[str, tuple[frozenset[str], int]] = {
    "env": (frozenset({"-u", "--unset", "-C", "--chdir", "-S"}), 0),
    "sudo": (frozenset({"-u", "-g", "-C", "-D", "-h", "-p", "-r", "-t", "-U", "-T"}), 0),
    "nice": (frozenset({"-n", "--adjustment"}), 0),
    "nohup": (frozenset(), 0),
    "setsid": (frozenset(), 0),
    "timeout": (frozenset({"-s", "--signal", "-k", "--kill-after"}), 1),
    "stdbuf": (frozenset({"-i", "-o", "-e"}), 0),
    "ionice": (frozenset({"-c", "-n", "-p"}), 0),
    "flock": (frozenset({"-w", "--timeout", "-E", "--conflict-exit-code"}), 1),
    # Kolla's ENTRYPOINT (`dumb-init --single-child --`): a container with only args runs them through it.
    "dumb-init": (frozenset({"-r", "--rewrite"}), 0),
}
# Options whose value is a file the program reads at start.
READ_OPTIONS = frozenset({"--config-file", "--config-dir", "--config", "--ini", "--log-config", "--log-config-append"})
# Kernel and runtime filesystems: the node's, not the image's.
RUNTIME_ROOTS = ("/proc", "/sys", "/dev")
# Commands whose path arguments are created, tested or only printed, not read.
NOT_READING = frozenset({"[", "test", "echo", "printf", "mkdir", "touch", "rm", "ln", "mktemp", "install"})


def unwrap(args: list[str | None], with_value: frozenset[str], operands: int) -> list[str | None]:
    """The command a wrapper runs: its arguments after its options (and env's NAME=value)."""
    i = 0
    while i < len(args):
        arg = args[i]
        if arg is None:
            return args[i:]
        if arg == "--":
            return args[i + 1 :]
        if arg in with_value:
            i += 2
        elif arg.startswith("-") or ("=" in arg and not arg.startswith("/")):
            i += 1
        else:
            break
    return args[i + operands :]
