"""Downloads, cached once and checked, and reading parts of remote archives by HTTP range.

Everything lands under `<cache>/image-contents` (the OpenStack venvs' cache, tools/release_pins.py,
moved by OPENSTACK_VENV_CACHE), so the check works offline after the first run. A file with a
known SHA256 (from an archive's Release file, or PyPI's index) is checked before it is kept.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

from tools.release_pins import cache_base

T = TypeVar("T")
R = TypeVar("R")
_BLOCK = 64 * 1024
_TRIES = 4


class FetchError(RuntimeError):
    pass


def cache_dir(*parts: str) -> Path:
    path = cache_base().joinpath("image-contents", *parts)
    path.mkdir(parents=True, exist_ok=True)
    return path


def _open(request: urllib.request.Request | str) -> bytes:
    url = request.full_url if isinstance(request, urllib.request.Request) else request
    for attempt in range(_TRIES):
        try:
            with urllib.request.urlopen(request, timeout=60) as answer:
                return bytes(answer.read())
        except (urllib.error.URLError, TimeoutError, ConnectionError) as error:
            if (isinstance(error, urllib.error.HTTPError) and error.code < 500) or attempt == _TRIES - 1:
                raise FetchError(f"{url}: {error}") from error
            time.sleep(2**attempt)
    raise AssertionError("unreachable")


def get_bytes(url: str, headers: dict[str, str] | None = None) -> bytes:
    return _open(urllib.request.Request(url, headers=headers or {}))


def get_json(url: str, accept: str = "application/json") -> Any:
    return json.loads(get_bytes(url, {"Accept": accept}))


def download(url: str, dest: Path, sha256: str | None = None) -> Path:
    """`dest`, fetched from `url` unless it is already there (with the right checksum)."""
    if dest.exists() and (sha256 is None or _sha256(dest) == sha256):
        return dest
    data = get_bytes(url)
    if sha256 is not None and hashlib.sha256(data).hexdigest() != sha256:
        raise FetchError(f"{url}: checksum differs from {sha256}")
    dest.parent.mkdir(parents=True, exist_ok=True)
    partial = dest.with_name(f"{dest.name}.{os.getpid()}.part")
    partial.write_bytes(data)
    partial.replace(dest)
    return dest


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def get_range(url: str, start: int, length: int) -> tuple[bytes, int]:
    """Bytes [start, start+length) of `url`, and the size of the whole file."""
    request = urllib.request.Request(url, headers={"Range": f"bytes={start}-{start + length - 1}"})
    for attempt in range(_TRIES):
        try:
            with urllib.request.urlopen(request, timeout=60) as answer:
                data = bytes(answer.read())
                content_range = answer.headers.get("Content-Range", "")
                if answer.status == 200:  # the server ignored the range
                    return data[start : start + length], len(data)
                return data, int(content_range.rsplit("/", 1)[-1])
        except (urllib.error.URLError, TimeoutError, ConnectionError) as error:
            if attempt == _TRIES - 1 or (isinstance(error, urllib.error.HTTPError) and error.code < 500):
                raise FetchError(f"{url}: {error}") from error
            time.sleep(2**attempt)
    raise AssertionError("unreachable")


class RemoteFile(io.RawIOBase):
    """A remote file read in blocks by HTTP range requests: zipfile reads a wheel's index this way."""

    def __init__(self, url: str) -> None:
        self.url = url
        self._blocks: dict[int, bytes] = {}
        tail, self.size = get_range(url, 0, _BLOCK)
        self._blocks[0] = tail
        self._pos = 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._pos

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self._pos, io.SEEK_END: self.size}[whence]
        self._pos = max(0, base + offset)
        return self._pos

    def _block(self, index: int) -> bytes:
        if index not in self._blocks:
            self._blocks[index], _ = get_range(self.url, index * _BLOCK, _BLOCK)
        return self._blocks[index]

    def read(self, size: int = -1) -> bytes:
        end = self.size if size < 0 else min(self.size, self._pos + size)
        out = bytearray()
        while self._pos < end:
            block = self._block(self._pos // _BLOCK)
            offset = self._pos % _BLOCK
            piece = block[offset : offset + end - self._pos]
            if not piece:
                break
            out += piece
            self._pos += len(piece)
        return bytes(out)

    def readinto(self, buffer: Any) -> int:
        data = self.read(len(buffer))
        buffer[: len(data)] = data
        return len(data)


def parallel(function: Callable[[T], R], items: Iterable[T], workers: int = 8) -> Iterator[R]:
    """`function` over `items` in a few threads (network-bound look-ups), results in order."""
    with ThreadPoolExecutor(workers) as pool:
        yield from pool.map(function, items)
