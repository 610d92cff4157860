"""What each Kolla image is and who it runs as.

Kolla gives every service user a fixed UID (kolla/common/users.py), so pods can run as
that user with `runAsNonRoot` without reading the image.
"""

from __future__ import annotations

from dataclasses import dataclass

from components.tables.catalog import image_users


@dataclass(frozen=True)
class ImageProfile:
    name: str  # Kolla image name
    uid: int  # the service user's fixed UID; 0 where the process must start as root


# kolla/common/users.py (stable/2026.1); uid == gid for every user.
_KOLLA_UIDS = {
    "cinder": 42407,
    "glance": 42415,
    "horizon": 42420,
    "keystone": 42425,
    "neutron": 42435,
    "nova": 42436,
    "memcached": 42457,
    "placement": 42482,
    "ansible": 42401,  # kolla-toolbox's user
}
# Which user each image runs as: the service catalog's (components/tables/catalog.py).
_IMAGE_USER = image_users()


def profile(image: str) -> ImageProfile:
    user = _IMAGE_USER.get(image)
    if user is None:
        raise KeyError(
            f"no user known for Kolla image {image!r}; add it to its service in components/tables/catalog.py"
        )
    return ImageProfile(image, _KOLLA_UIDS[user])
