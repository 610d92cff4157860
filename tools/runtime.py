"""Runs the real Pulumi program under the SDK's mock runtime and records what it declares.

No engine and no cluster: `set_mocks` swaps the resource monitor for one that records
every registration with its inputs, parent and dependencies. The offline plan and the
tests both use this, so what the plan shows is what the tests check.
"""

from __future__ import annotations

import base64
import decimal
import hashlib
import json
import re
import runpy
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pulumi
import yaml
from google.protobuf import json_format
from pulumi.runtime import mocks
from pulumi.runtime.settings import get_root_resource, set_root_resource
from pulumi.runtime.stack import massage, run_pulumi_func
from pulumi.runtime.sync_await import _sync_await

from components.settings.model import PROJECT, Problem, SettingsError
from tools import stack_secrets
from tools.yaml_reading import PulumiCliLoader, compose_all, duplicate_key

REPO = Path(__file__).resolve().parent.parent
SECRET_MARK = "[secret]"
# How the Pulumi wire protocol marks a secret value and an unknown one.
_SECRET_SIG = ("4dabf18193072939515e22adb298388d", "1b47061264138c4ac30d75fd1eb44270")
_UNKNOWN = "04da6b54-80e4-46f7-96ec-b56ff0331ba9"


@dataclass
class Registration:
    urn: str
    type: str
    name: str
    parent: str
    custom: bool
    remote: bool
    dependencies: list[str]
    inputs: dict[str, Any]  # secrets replaced by SECRET_MARK
    revealed: dict[str, Any]  # secrets shown
    outputs: dict[str, Any] = field(default_factory=dict)  # what the mock returned: a random resource's values
    # Resource options the engine acts on: how long it waits for the object, and whether
    # deleting it from the stack leaves it in the cluster.
    custom_timeouts: dict[str, str] = field(default_factory=dict)
    retain_on_delete: bool = False
    # Input properties a later update leaves as they are in the cluster (ignoreChanges).
    ignore_changes: list[str] = field(default_factory=list)
    # Where the engine also looks for this resource's state (URNs or alias specs): a moved one.
    aliases: list[Any] = field(default_factory=list)
    protect: bool = False  # the engine refuses to delete it
    delete_before_replace: bool = False  # a replacement deletes the old object before creating the new
    replace_on_changes: list[str] = field(default_factory=list)  # input paths whose change replaces it
    # What the transforms of its options do, as each says (`does`), or their names: on a chart or
    # manifest they reach the children the mock runtime does not expand.
    transforms: list[str] = field(default_factory=list)

    def options(self) -> dict[str, Any]:
        """The resource options the engine acts on that this resource sets (defaults left out)."""
        found: dict[str, Any] = {
            "protect": self.protect,
            "retainOnDelete": self.retain_on_delete,
            "deleteBeforeReplace": self.delete_before_replace,
            "ignoreChanges": self.ignore_changes,
            "replaceOnChanges": self.replace_on_changes,
            "customTimeouts": self.custom_timeouts,
            "aliases": [a for a in self.aliases if not self._api_version_alias(a)],
            "transforms": self.transforms,
        }
        return {name: value for name, value in found.items() if value}

    def _api_version_alias(self, alias: Any) -> bool:
        """One of the aliases pulumi-kubernetes gives every object: its kind under an older API version."""
        spec = alias.get("spec", {}) if isinstance(alias, dict) else {}
        alias_type = spec.get("type", "")
        return (
            set(spec) <= {"type", "parentUrn"}
            and alias_type.startswith("kubernetes:")
            and alias_type.rsplit(":", 1)[-1] == self.type.rsplit(":", 1)[-1]
        )

    @property
    def generated_secrets(self) -> list[str]:
        """What a pulumi-random resource generated, in every form the program may use it."""
        if self.type == "random:index/randomPassword:RandomPassword":
            return [self.outputs["result"]]
        if self.type == "random:index/randomBytes:RandomBytes":
            return [self.outputs["base64"].replace("+", "-").replace("/", "_")]  # as a Fernet key
        return []

    @property
    def kind(self) -> str | None:
        return self.inputs.get("kind") if self.custom else None

    @property
    def k8s_name(self) -> str | None:
        return (self.inputs.get("metadata") or {}).get("name")

    @property
    def namespace(self) -> str | None:
        return (self.inputs.get("metadata") or {}).get("namespace")


def _unwrap(value: Any, *, reveal: bool) -> Any:
    if isinstance(value, dict):
        if value.get(_SECRET_SIG[0]) == _SECRET_SIG[1]:
            return _unwrap(value.get("value"), reveal=True) if reveal else SECRET_MARK
        return {k: _unwrap(v, reveal=reveal) for k, v in value.items()}
    if isinstance(value, list):
        return [_unwrap(v, reveal=reveal) for v in value]
    if isinstance(value, float) and value.is_integer():
        return int(value)  # protobuf carries every number as a double
    if value == _UNKNOWN:
        return None
    return value


class FakeCloudMocks(pulumi.runtime.Mocks):
    """Generated secrets get stable fake values per name; other resources return no outputs.

    Outside previews (as here) the SDK resolves a property the engine returns no value for
    to its input, as for any property a provider does not return: the program reads back
    what it declared, without the outputs being serialized and translated a second time (a
    fifth of a large plan's time when the mocks echoed the inputs).
    """

    def new_resource(self, args: pulumi.runtime.MockResourceArgs) -> tuple[str, dict]:
        digest = hashlib.sha256(f"{args.typ}/{args.name}".encode()).digest()
        if args.typ == "random:index/randomPassword:RandomPassword":
            result = "Mock" + digest.hex()[: int(args.inputs.get("length", 32)) - 4]
            return f"{args.name}-id", {**args.inputs, "result": result}
        if args.typ == "random:index/randomBytes:RandomBytes":
            generated = base64.b64encode(digest[: int(args.inputs["length"])]).decode()
            return f"{args.name}-id", {**args.inputs, "base64": generated}
        return f"{args.name}-id", {}

    def call(self, args: pulumi.runtime.MockCallArgs) -> tuple[dict, list[tuple[str, str]] | None]:
        return {}, []  # no outputs, no failures


def describe_transform(transform: Any) -> str:
    """What a transform does, in its own words (`does`), or else its name."""
    return str(getattr(transform, "does", None) or getattr(transform, "__qualname__", repr(transform)))


class _SeeingTransforms(pulumi.runtime.Mocks):
    """Passes every call on to `inner`, keeping the transforms of the resource being registered.

    The mock monitor hands each resource's transforms (the functions themselves) to the mocks'
    `new_resource`; it does not run them. The SDK registers resources from several threads at
    once, each registration in one thread: what is kept is the thread's own.
    """

    def __init__(self, inner: pulumi.runtime.Mocks):
        self.inner = inner
        self._local = threading.local()

    @property
    def last(self) -> list[Any]:
        return getattr(self._local, "last", [])

    @last.setter
    def last(self, transforms: list[Any]) -> None:
        self._local.last = transforms

    def new_resource(self, args: pulumi.runtime.MockResourceArgs) -> tuple[str | None, dict]:
        self.last = list(args.transforms)
        return self.inner.new_resource(args)

    def call(self, args: pulumi.runtime.MockCallArgs) -> tuple[dict, list[tuple[str, str]] | None]:
        return self.inner.call(args)


class RecordingMonitor(mocks.MockMonitor):
    def __init__(self, mock: pulumi.runtime.Mocks):
        self._seen = _SeeingTransforms(mock)
        super().__init__(self._seen)
        self.registrations: list[Registration] = []
        # The stack's outputs (`pulumi.export`), as `pulumi stack output` shows them: a secret as [secret].
        self.outputs: dict[str, Any] = {}
        self.revealed_outputs: dict[str, Any] = {}

    def RegisterResourceOutputs(self, request: Any) -> Any:  # noqa: N802 (gRPC method name)
        if request.urn.split("::")[-2].endswith("pulumi:pulumi:Stack"):
            raw = json_format.MessageToDict(request.outputs, preserving_proto_field_name=True)
            self.outputs = _unwrap(raw, reveal=False)
            self.revealed_outputs = _unwrap(raw, reveal=True)
        return super().RegisterResourceOutputs(request)

    def RegisterResource(self, request: Any) -> Any:  # noqa: N802 (gRPC method name)
        self._seen.last = []
        response = super().RegisterResource(request)
        if request.type != "pulumi:pulumi:Stack":
            raw = json_format.MessageToDict(request.object, preserving_proto_field_name=True)
            outputs = json_format.MessageToDict(response.object, preserving_proto_field_name=True)
            self.registrations.append(
                Registration(
                    urn=response.urn,
                    type=request.type,
                    name=request.name,
                    parent=request.parent,
                    custom=bool(request.custom),
                    remote=bool(request.remote),
                    dependencies=list(dict.fromkeys(request.dependencies)),
                    inputs=_unwrap(raw, reveal=False),
                    revealed=_unwrap(raw, reveal=True),
                    outputs=_unwrap(outputs, reveal=True),
                    custom_timeouts=json_format.MessageToDict(request.customTimeouts),
                    retain_on_delete=request.retainOnDelete,
                    ignore_changes=list(request.ignoreChanges),
                    aliases=[
                        *request.aliasURNs,
                        *(json_format.MessageToDict(a, preserving_proto_field_name=True) for a in request.aliases),
                    ],
                    protect=request.protect,
                    delete_before_replace=request.deleteBeforeReplace,
                    replace_on_changes=list(request.replaceOnChanges),
                    transforms=[describe_transform(t) for t in self._seen.last],
                )
            )
        return response


def stack_file(stack: str) -> Path:
    return REPO / "stacks" / f"Pulumi.{stack}.yaml"


def stack_config(stack: str, path: Path | None = None) -> dict[str, str]:
    """The stack's config as the Pulumi CLI hands it to the program (`read_stack_file`).

    `path` reads the stack's file from elsewhere; by default stacks/Pulumi.<stack>.yaml.
    """
    path = path or stack_file(stack)
    if not path.exists():
        known = ", ".join(sorted(p.name.split(".")[1] for p in stack_file(stack).parent.glob("Pulumi.*.yaml")))
        raise FileNotFoundError(f"no stack {stack!r}: {path} does not exist (stacks: {known})")
    return with_project_defaults(stack, read_stack_file(path))


PROJECT_FILE = REPO / "Pulumi.yaml"


def with_project_defaults(stack: str, config: Mapping[str, str], project_file: Path = PROJECT_FILE) -> dict[str, str]:
    """The stack's config merged with Pulumi.yaml's declarations, as the CLI merges them before the
    program runs (pulumi pkg/workspace/config.go, mergeConfig): a project key the stack leaves out
    takes the declaration's `default` or `value`, a scalar as Go's `%v` prints it and anything else
    as JSON; a key with neither is missing, and the CLI refuses the stack naming every such key."""
    declared = yaml.safe_load(project_file.read_text()).get("config") or {}
    merged = dict(config)
    missing = []
    for name, declaration in sorted(declared.items()):
        key = name if ":" in name else f"{PROJECT}:{name}"
        # The CLI's shorthand `key: value` declares a default (RewriteShorthandConfigValues).
        entry = declaration if isinstance(declaration, dict) else {"default": declaration}
        if key in merged:
            if not _of_declared_type(merged[key], entry.get("type")):
                problem = f"Stack '{stack}' with configuration key '{name}' must be of type '{entry['type']}'"
                raise SettingsError([Problem(key, merged[key], problem)])
            continue
        value = entry.get("default", entry.get("value"))
        if value is None:
            missing.append(name)
        else:
            merged[key] = _as_engine_config({key: value})[key]
    if missing:
        values = "value" if len(missing) == 1 else "values"
        raise SettingsError(
            [
                Problem(
                    str(project_file),
                    None,
                    f"Stack '{stack}' is missing configuration {values} {_listed(missing)}",
                    shown=False,
                )
            ]
        )
    return merged


def _of_declared_type(text: str, declared: str | None) -> bool:
    """The CLI's check of a stack's scalar against the project's type (workspace.ValidateConfigValue):
    a boolean is the text true or false (`yes` is text to go-yaml v3), an integer parses as one."""
    if declared == "boolean":
        return text in ("true", "false")
    if declared == "integer":
        return re.fullmatch(r"[-+]?[0-9]+", text) is not None
    return True


def _listed(keys: list[str]) -> str:
    """The CLI's list of missing keys: 'a', 'b' and 'c' (formatMissingKeys)."""
    quoted = [f"'{key}'" for key in sorted(keys)]
    return quoted[0] if len(quoted) == 1 else f"{', '.join(quoted[:-1])} and {quoted[-1]}"


def read_stack_file(path: Path) -> dict[str, str]:
    """Every key of a stack file's `config:`, in the form the Pulumi CLI passes it to a program.

    As the CLI reads the file (config.Value in pulumi/sdk/go/common/resource/config): a scalar
    is its text as written (`"2024"` and `2024` alike, `1.30` stays '1.30', an empty one is
    ''), a mapping or list is JSON. So the plan sees exactly what `pulumi up` would give the
    program, and components.cloud.stack_config decides what each value means in one place.
    """

    def wrong(what: str, value: Any = None, shown: bool = True) -> SettingsError:
        return SettingsError([Problem(str(path), value, what, shown=shown)])

    if path.is_dir():
        raise wrong("is a directory, not a stack file", shown=False)
    try:
        text = path.read_bytes().decode("utf-8")
    except UnicodeDecodeError as error:
        raise wrong(f"not UTF-8 text (byte {error.start}), which the Pulumi CLI reads", shown=False) from None
    except OSError as error:
        raise wrong(f"cannot read: {error.strerror or error}", shown=False) from None
    try:
        # The CLI's go-yaml v3 refuses a key written twice, where PyYAML keeps the last.
        documents = compose_all(text, PulumiCliLoader)
        if len(documents) > 1:
            raise yaml.YAMLError("a stack file is one YAML document")
        document = documents[0] if documents else None
        found = duplicate_key(document) if document is not None else None
        if found is not None:
            raise yaml.MarkedYAMLError(problem=f'duplicate key "{found[0]}"', problem_mark=found[1])
    except yaml.YAMLError as error:
        raise wrong(f"not valid YAML: {error}", shown=False) from None
    if document is None:
        return {}
    if not isinstance(document, yaml.MappingNode):
        raise wrong("a stack file is a mapping with a 'config:' mapping", _construct(document))
    config = next((value for key, value in document.value if key.value == "config"), None)
    if config is None or (isinstance(config, yaml.ScalarNode) and config.tag.endswith(":null")):
        return {}
    if not isinstance(config, yaml.MappingNode):
        raise wrong("'config:' is a mapping of '<namespace>:<name>' keys to values", _construct(config))
    # `<<: *base` under config: merged as the CLI's go-yaml merges it, the keys written here winning.
    PulumiCliLoader("").flatten_mapping(config)
    top = {k.value: v for k, v in document.value if isinstance(k, yaml.ScalarNode)}
    salt = top["encryptionsalt"].value if isinstance(top.get("encryptionsalt"), yaml.ScalarNode) else None
    decrypt: list[Callable[[str], str]] = []  # made at the first secure value: its key takes a second

    def opened(secure: str) -> str:
        if not decrypt:
            decrypt.append(stack_secrets.decrypter(salt))
        return decrypt[0](secure)

    wire: dict[str, str] = {}
    for key, value in config.value:
        if isinstance(value, yaml.ScalarNode):
            wire[key.value] = _cli_text(value)
            continue
        try:
            constructed = _construct(value)
        except RecursionError:
            raise wrong(f"{key.value} is nested too deeply to read", shown=False) from None
        try:
            revealed, secret = _decrypted(constructed, opened)
        except stack_secrets.StackSecretError as error:
            raise SettingsError([Problem(key.value, None, str(error), shown=False)]) from None
        text = revealed if isinstance(revealed, str) else json.dumps(revealed, default=str)
        wire[key.value] = stack_secrets.SecretText(text) if secret else text
    return wire


def _decrypted(value: Any, opened: Callable[[str], str]) -> tuple[Any, bool]:
    """`value` with every `{secure: ...}` in it decrypted, and whether there was one (isSecureValue:
    a mapping of the one key `secure` to text)."""
    if isinstance(value, dict):
        if len(value) == 1 and isinstance(value.get("secure"), str):
            return opened(value["secure"]), True
        pairs = {k: _decrypted(v, opened) for k, v in value.items()}
        return {k: v for k, (v, _) in pairs.items()}, any(s for _, s in pairs.values())
    if isinstance(value, list):
        items = [_decrypted(v, opened) for v in value]
        return [v for v, _ in items], any(s for _, s in items)
    return value, False


# What go-yaml v3 (resolve.go) tries a plain scalar as, after dates, once `_` are dropped: an integer
# by strconv.ParseInt(s, 0, 64) (0x, 0o, 0b, and a leading 0 for octal), else a float of this form.
_GO_FLOAT = re.compile(r"^[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?$")
_GO_DATE = re.compile(r"^([0-9]{4})-([0-9]{1,2})-([0-9]{1,2})$")
_INT_BASES = {"0x": 16, "0X": 16, "0o": 8, "0O": 8, "0b": 2, "0B": 2}


def _go_int(plain: str) -> int | None:
    """strconv.ParseInt(plain, 0, 64), or ParseUint's larger range; None where both fail."""
    sign, body = (-1, plain[1:]) if plain[:1] == "-" else (1, plain[1:] if plain[:1] == "+" else plain)
    base = _INT_BASES.get(body[:2], 8 if len(body) > 1 and body.startswith("0") else 10)
    digits = body[2:] if body[:2] in _INT_BASES else body
    try:
        value = sign * int(digits, base) if digits and digits.isalnum() else None
    except ValueError:
        return None
    return value if value is not None and -(2**63) <= value < 2**64 else None


def _cli_text(node: yaml.ScalarNode) -> str:
    """A scalar as the CLI hands it to the program: go-yaml v3 decodes a plain one into a bool, a
    number, a date or null, and config.Value turns that into text (sdk resource/config object.go,
    MarshalString: JSON for bools and numbers, time.Time's String() for a date), so `1.30` arrives
    as '1.3', `True` as 'true', `0x10` as '16', `1e3` as '1000'. A quoted scalar is its text.
    Checked against pulumi 3.274.1's `pulumi config --json` (tests/test_stack_config.py)."""
    text = node.value
    if node.style is not None:
        return text
    if node.tag.endswith(":null"):
        return ""
    if node.tag.endswith(":bool"):
        return "true" if _construct(node) else "false"
    date = _GO_DATE.match(text)
    if date:
        year, month, day = map(int, date.groups())
        return f"{year:04d}-{month:02d}-{day:02d} 00:00:00 +0000 UTC"
    plain = text.replace("_", "")
    number = _go_int(plain)
    if number is not None:
        return str(number)
    if _GO_FLOAT.match(plain):
        return _go_json_float(float(plain))
    return text


def _go_json_float(number: float) -> str:
    """encoding/json's text of a float64: an integer-valued one without a point, plain between 1e-6 and
    1e21, else exponent form without a padded exponent."""
    if number.is_integer() and abs(number) < 1e21:
        return str(int(number))
    if 1e-6 <= abs(number) < 1e21:
        return format(decimal.Decimal(repr(number)), "f")
    return repr(number).replace("e-0", "e-").replace("e+0", "e+")


def _construct(node: yaml.Node) -> Any:
    """A value as the CLI's go-yaml v3 makes it: YAML 1.2 booleans only (`yes` stays text)."""
    return PulumiCliLoader("").construct_document(node)


def _as_engine_config(config: Mapping[str, Any]) -> dict[str, str]:
    """What the Pulumi CLI hands a program: scalars as text, objects and lists as JSON."""
    wire = {}
    for key, value in config.items():
        if isinstance(value, dict | list | tuple):
            wire[key] = json.dumps(value)
        elif isinstance(value, bool):
            wire[key] = "true" if value else "false"
        else:
            wire[key] = str(value)
    return wire


def run_program(
    config: Mapping[str, Any],
    stack: str = "test",
    monitor: RecordingMonitor | None = None,
    secret_keys: list[str] | None = None,
) -> list[Registration]:
    """Run __main__.py with `config` (keys like 'openstack:namespace') and return its registrations.

    `secret_keys` names the keys the engine would mark secret.
    """
    # A value that was a secret in the stack file is one to the program too, as under the CLI.
    secret_keys = [*(secret_keys or []), *(k for k, v in config.items() if isinstance(v, stack_secrets.SecretText))]
    pulumi.runtime.set_all_config(_as_engine_config(config), secret_keys)
    monitor = monitor or RecordingMonitor(FakeCloudMocks())
    set_root_resource(None)  # type: ignore[arg-type]  # a fresh Stack resource for every run
    pulumi.runtime.set_mocks(FakeCloudMocks(), project=PROJECT, stack=stack, preview=False, monitor=monitor)

    def program() -> None:
        runpy.run_path(str(REPO / "__main__.py"), run_name="__main__")
        # The engine's entry point registers the stack's outputs after the program (run_in_stack);
        # the mocks' Stack registered its none when it was made, before the program exported any.
        stack = get_root_resource()
        if isinstance(stack, pulumi.ComponentResource):
            stack.register_outputs(massage(getattr(stack, "outputs", {}), []))

    _sync_await(run_pulumi_func(program))
    return monitor.registrations


def stack_with(config: Mapping[str, str], overrides: Mapping[str, Any] | None) -> dict[str, str]:
    """A stack's config with some `openstack:` settings changed (camelCase keys, Python values)."""
    return {**config, **_as_engine_config({f"{PROJECT}:{k}": v for k, v in (overrides or {}).items()})}


def run_stack(stack: str, overrides: Mapping[str, Any] | None = None, path: Path | None = None) -> list[Registration]:
    """Run the program with a stack file's settings, optionally changed by `overrides`."""
    return run_program(stack_with(stack_config(stack, path), overrides), stack)
