"""Links a package's maintainer scripts make at install: `update-alternatives --install`.

Contents indexes list what a package ships, not what its postinst creates, and some commands
exist only as such links (`awk` is mawk's or gawk's, `iptables` is iptables-nft's). A .deb is
an ar archive whose second member is control.tar: the first 64 KiB of the .deb, read by HTTP
range, usually hold it whole. Its postinst is read with the shell walker (tools/imagecheck/shell.py).
Results are cached per package version.
"""

from __future__ import annotations

import gzip
import io
import json
import lzma
import tarfile
from collections.abc import Iterable

import zstandard

from tools.imagecheck.fetch import RemoteFile, cache_dir, parallel
from tools.imagecheck.shell import Call, script_events
from tools.imagecheck.ubuntu import MIRROR, Package

Link = tuple[str, str]  # (link, target), absolute paths


def _member(data: RemoteFile, offset: int) -> tuple[str, int, int]:
    """(name, start of data, size) of the ar member whose header is at `offset`."""
    data.seek(offset)
    header = data.read(60)
    if len(header) != 60 or header[58:60] != b"`\n":
        raise ValueError(f"{data.url}: not an ar archive member at {offset}")
    return header[:16].decode().strip().rstrip("/"), offset + 60, int(header[48:58].decode().strip())


def _decompress(name: str, payload: bytes) -> bytes:
    if name.endswith(".zst"):
        return zstandard.ZstdDecompressor().stream_reader(io.BytesIO(payload)).read()
    if name.endswith(".xz"):
        return lzma.decompress(payload)
    if name.endswith(".gz"):
        return gzip.decompress(payload)
    return payload


def maintainer_script(url: str, script: str = "postinst") -> str | None:
    data = RemoteFile(url)
    if data.read(8) != b"!<arch>\n":
        raise ValueError(f"{url}: not a .deb")
    _, start, size = _member(data, 8)
    name, start, size = _member(data, start + size + size % 2)
    if not name.startswith("control.tar"):
        raise ValueError(f"{url}: second member is {name}")
    data.seek(start)
    with tarfile.open(fileobj=io.BytesIO(_decompress(name, data.read(size)))) as control:
        for member in control.getmembers():
            if member.name.lstrip("./") == script:
                extracted = control.extractfile(member)
                return extracted.read().decode(errors="replace") if extracted else None
    return None


def links_of_script(text: str) -> list[Link]:
    """Every `update-alternatives --install LINK NAME PATH PRIO [--slave LINK NAME PATH]...` of a script."""
    links: list[Link] = []
    for event in script_events(text):
        if not isinstance(event, Call) or "update-alternatives" not in event.words[:3]:
            continue
        words = event.words
        for i, word in enumerate(words[:-3]):
            if word in ("--install", "--slave"):
                link, target = words[i + 1], words[i + 3]
                if link and target and link.startswith("/") and target.startswith("/"):
                    links.append((link, target))
    return links


def alternatives(packages: Iterable[Package]) -> dict[str, list[Link]]:
    """package name → the links its postinst installs (cached per version)."""
    path = cache_dir("ubuntu") / "alternatives.json"
    known: dict[str, list[list[str]]] = json.loads(path.read_text()) if path.exists() else {}
    todo = [p for p in packages if f"{p.name}={p.version}" not in known]

    def read(package: Package) -> tuple[str, list[Link]]:
        text = maintainer_script(f"{MIRROR}/{package.filename}")
        return f"{package.name}={package.version}", links_of_script(text) if text else []

    if todo:
        for key, links in parallel(read, todo):
            known[key] = [list(link) for link in links]
        path.write_text(json.dumps(known, indent=0, sort_keys=True))
    wanted = {f"{p.name}={p.version}": p.name for p in packages}
    return {wanted[key]: [(a, b) for a, b in value] for key, value in known.items() if key in wanted}
