"""What reads as a password in configuration text, environment values and command lines.

A finding needs both a name that holds a password and a literal value (or a URL with a
password in it). Names are judged by their last word (split at `_ . -`, spaces and camelCase):
`OS_PASSWORD`, `memcache_secret_key`, `MYSQL_PWD`, `dbPass` are passwords' names;
`password_expires_days`, `secretName`, `PASSWORD_FILE`, `bypass`, `proxy_pass` and `PWD` (the
shell's working directory) are not. Values that read a password from elsewhere, or that no
password would be (booleans, absolute paths, function calls), are not literals.
"""

from __future__ import annotations

import re

SECRET_MARK = "[secret]"  # how the offline plan shows a Pulumi secret value
# The last word of a password's name ends with one of these (adminpassword, authtoken too).
SECRET_ENDINGS = ("password", "passwd", "passphrase", "secret", "token", "credential", "credentials", "apikey",
                  "privatekey", "secretkey")  # fmt: skip
# Short words that are a password's name only after another word (DB_PASS, MYSQL_PWD, adminPw):
# alone, PWD is the working directory and pass a Python statement.
SHORT_WORDS = ("pass", "pwd", "pw")
# ... but nginx's proxy_pass, uwsgi_pass... name an upstream.
UPSTREAMS = ("proxy", "fastcgi", "uwsgi", "scgi", "grpc", "memcached")
# Words that end in "pass" and name no password; other compounds do (dbpass, adminpass).
PASS_WORDS = ("bypass", "compass", "encompass", "surpass", "trespass", "overpass", "underpass")
KEY_NAMES = (("secret", "key"), ("private", "key"), ("api", "key"), ("encryption", "key"))

BOOLEANS = ("true", "false", "yes", "no", "on", "off")
EMPTY_VALUES = ("", "~", "null", "none", "nil")
# Values that read a password from elsewhere: shell and Kubernetes variables ($X, ${X}, $(X),
# `cmd`), templates ({{ x }}, {x}, %(x)s, %s, <x>), the environment of a Python script.
REFERENCE = re.compile(r"""^["']?(\$|\{|%\(|%s|<|`)|os\.environ|getenv|environ\.get|environ\[""")
# A function call (getpass.getpass(), session.get_token()) or an attribute or key of another
# object named like a secret (args.password, conf["password"]): code, not a value.
CALL = re.compile(r"[A-Za-z_][\w.]*\(.*\)")
_STEP = r"""(?:\.([A-Za-z_]\w*)|\[["']([\w.-]+)["']\])"""
ATTRIBUTE = re.compile(rf"[A-Za-z_]\w*(?:{_STEP})+")  # the last step's name is group 1 or 2
PATH = re.compile(r"/[\w.@:+-]+(/[\w.@:+-]*)*")  # a file: /etc/ssl/private/tls.key

# scheme://user:password@ (the user may be empty: redis://:password@host).
URL_PASSWORD = re.compile(r"[a-z][a-z0-9+.-]*://[^\s/@:]*:([^\s/@]*)@", re.I)
# A line of INI, YAML, JSON, env or shell: key = value, key: value, - key: value, export KEY=value.
SHELL_WORDS = r"(?:export|readonly|local|(?:declare|typeset)(?:\s+-\w+)*)\s+"
ASSIGNMENT = re.compile(rf"""^\s*(?:-\s+)?(?:{SHELL_WORDS})?["']?([\w.-]+)["']?\s*[=:]\s*(.*?)\s*[,;]?\s*$""")
# "key": "value" anywhere in a line, for JSON written on one line.
JSON_PAIR = re.compile(r'"([\w.-]+)"\s*:\s*("[^"]*")')
# NAME=value anywhere in a shell line: cd /x && export OS_PASSWORD=... && ..., MYSQL_PWD=... mysql.
SHELL_VALUE = r"""("[^"]*"|'[^']*'|(?:\[["'][\w.-]+["']\]|[^\s;&|,)\]}'"])*)"""  # conf["key"] is one value
SHELL_ASSIGNMENT = re.compile(rf"(?:^|[\s;&|(?])(?:{SHELL_WORDS})?([A-Za-z_]\w*)=(?!=){SHELL_VALUE}")
# --name=value or --name value on a command line.
FLAG = re.compile(rf"(?:^|\s)(--[A-Za-z][\w-]*)(?:=|\s+)(?!-){SHELL_VALUE}")
FLAG_ALONE = re.compile(r"--[A-Za-z][\w-]*")


def words(name: str) -> list[str]:
    spaced = re.sub(r"([a-z0-9])([A-Z])", r"\1 \2", name)
    return [word.lower() for word in re.split(r"[^A-Za-z0-9]+", spaced) if word]


def names_a_secret(name: str) -> bool:
    parts = words(name)
    if not parts:
        return False
    last, before = parts[-1], parts[-2] if len(parts) > 1 else ""
    if last.endswith(SECRET_ENDINGS) or tuple(parts[-2:]) in KEY_NAMES:
        return True
    if last in SHORT_WORDS:
        return bool(before) and before not in UPSTREAMS
    return last.endswith("pass") and len(last) > len("pass") and last not in PASS_WORDS


def unquoted(value: str) -> str:
    value = value.strip()
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
        return value[1:-1]
    return value


def literal(value: str, name: str = "") -> bool:
    """Whether a value given to `name` is a literal password rather than a reference to one."""
    bare = unquoted(value)
    if bare.lower() in EMPTY_VALUES or bare.lower() in BOOLEANS or bare.lower() == name.lower():
        return False  # password=password passes a variable on
    if REFERENCE.search(value) or CALL.fullmatch(bare) or PATH.fullmatch(bare):
        return False
    attribute = ATTRIBUTE.fullmatch(bare)
    return not (attribute and names_a_secret(attribute.group(1) or attribute.group(2)))


def url_password(text: str) -> bool:
    return any(literal(match.group(1)) for match in URL_PASSWORD.finditer(text))


def _pair(match: re.Match[str]) -> tuple[str, str]:
    """Group 1 and 2 of a pattern below: each has exactly these two groups, and both always match."""
    return match.group(1), match.group(2)


def pairs(line: str) -> list[tuple[str, str]]:
    """The (name, value) pairs a line assigns, as each syntax reads it."""
    found = [_pair(m) for m in JSON_PAIR.finditer(line)]
    if not found and (match := ASSIGNMENT.match(line)):
        found.append(_pair(match))
    found += [_pair(m) for m in SHELL_ASSIGNMENT.finditer(line)]
    return found + [_pair(m) for m in FLAG.finditer(line)]


def problems(text: str) -> list[tuple[int, str]]:
    """(line number, what) for each password-like literal in a text; never the value."""
    found = []
    for number, line in enumerate(text.splitlines(), start=1):
        if SECRET_MARK in line:
            found.append((number, "a Pulumi secret value"))
        elif url_password(line):
            found.append((number, "a URL with a password"))
        else:
            names = [name for name, value in pairs(line) if names_a_secret(name) and literal(value, name)]
            found += [(number, f"a literal value for {name!r}") for name in dict.fromkeys(names)]
    return found


def flag_values(arguments: list[object]) -> list[tuple[int, str]]:
    """(index, flag) for each argument that is the value of the argument before it, a flag
    named like a password: ["--password", "hunter2"]."""
    found = []
    for index in range(1, len(arguments)):
        flag, value = arguments[index - 1], arguments[index]
        if not isinstance(flag, str) or not isinstance(value, str) or not FLAG_ALONE.fullmatch(flag):
            continue
        if names_a_secret(flag) and not value.startswith("-") and literal(value, flag):
            found.append((index, flag))
    return found
