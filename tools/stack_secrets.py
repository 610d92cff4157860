"""Secret stack settings (`pulumi config set --secret`) read as the Pulumi CLI reads them, offline.

With the passphrase secrets provider (`pulumi login --local`, a file or object-store backend) a stack
file holds `encryptionsalt: v1:<salt>:<check>` and each secret as `secure: v1:<nonce>:<ciphertext>`.
The key is PBKDF2-SHA256 of the passphrase and salt, 1,000,000 rounds, and each value AES-256-GCM
(pulumi sdk go/common/resource/config/crypt.go; pkg/secrets/passphrase/manager.go, whose check is
that the state decrypts to "pulumi"). The passphrase comes from where the CLI takes it:
PULUMI_CONFIG_PASSPHRASE or the file PULUMI_CONFIG_PASSPHRASE_FILE. Stacks of another secrets
provider (Pulumi Cloud, a KMS) cannot be read here: the error says so.
"""

from __future__ import annotations

import base64
import hashlib
import os
from collections.abc import Mapping
from functools import cache
from pathlib import Path

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

ROUNDS = 1_000_000
CHECK = "pulumi"


class SecretText(str):
    """A setting's value that was a secret in the stack file: the program's run marks its key secret."""

    __slots__ = ()


class StackSecretError(ValueError):
    pass


def passphrase(environ: Mapping[str, str] = os.environ) -> str | None:
    if "PULUMI_CONFIG_PASSPHRASE" in environ:
        return environ["PULUMI_CONFIG_PASSPHRASE"]
    if environ.get("PULUMI_CONFIG_PASSPHRASE_FILE"):
        # The CLI trims the file's white space (manager.go, readPassphrase): `echo phrase > file` works.
        return Path(environ["PULUMI_CONFIG_PASSPHRASE_FILE"]).read_text().strip()
    return None


@cache
def _key(phrase: str, salt: bytes) -> bytes:
    return hashlib.pbkdf2_hmac("sha256", phrase.encode(), salt, ROUNDS, 32)


def _open(key: bytes, value: str) -> str:
    version, _, rest = value.partition(":")
    nonce, _, ciphertext = rest.partition(":")
    if version != "v1" or not ciphertext:
        raise StackSecretError(f"not a v1 secure value: {value[:12]}...")
    try:
        return AESGCM(key).decrypt(base64.b64decode(nonce), base64.b64decode(ciphertext), None).decode()
    except (InvalidTag, ValueError):
        raise StackSecretError("does not decrypt with this passphrase") from None


def decrypter(encryption_salt: str | None, environ: Mapping[str, str] = os.environ) -> Decrypt:
    """What decrypts this stack file's secure values; StackSecretError says what is missing."""
    if not encryption_salt:
        raise StackSecretError(
            "a secure value, and the stack file has no encryptionsalt: its secrets provider is not a "
            "passphrase (Pulumi Cloud, a KMS), which the offline plan cannot ask; plan a copy with the value in clear"
        )
    phrase = passphrase(environ)
    if phrase is None:
        raise StackSecretError("a secure value: set PULUMI_CONFIG_PASSPHRASE (or _FILE), as for the Pulumi CLI")
    version, _, rest = encryption_salt.partition(":")
    salt, _, check = rest.partition(":")
    if version != "v1" or not check:
        raise StackSecretError(f"encryptionsalt is not a v1 passphrase state: {encryption_salt[:12]}...")
    key = _key(phrase, base64.b64decode(salt))
    try:
        if _open(key, check) != CHECK:
            raise StackSecretError("incorrect passphrase")
    except StackSecretError:
        raise StackSecretError("incorrect passphrase (PULUMI_CONFIG_PASSPHRASE)") from None
    return Decrypt(key)


class Decrypt:
    def __init__(self, key: bytes):
        self._key = key

    def __call__(self, value: str) -> str:
        return _open(self._key, value)
