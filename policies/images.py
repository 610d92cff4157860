"""Image references: which repository an image comes from and how it is pinned."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ImageRef:
    repository: str  # registry and path, without tag or digest
    tag: str | None
    digest: str | None

    @property
    def pinned(self) -> bool:
        """A digest, or a tag other than 'latest' (no tag at all means latest)."""
        return bool(self.digest) or (self.tag is not None and self.tag != "latest")


def parse_image(reference: str) -> ImageRef:
    """Split 'registry:5000/path/name:tag@sha256:...' into its parts.

    A ':' is a tag separator only after the last '/', since a registry may carry a port.
    """
    name, _, digest = reference.partition("@")
    slash = name.rfind("/")
    colon = name.rfind(":")
    if colon > slash:
        return ImageRef(name[:colon], name[colon + 1 :], digest or None)
    return ImageRef(name, None, digest or None)


def repository(reference: str) -> str:
    return parse_image(reference).repository
