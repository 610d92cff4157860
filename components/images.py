"""What each Kolla image is and who it runs as.

Kolla gives every service user a fixed UID (kolla/common/users.py), so pods can run as
that user with `runAsNonRoot` without reading the image.
"""

from __future__ import annotations

from dataclasses import dataclass


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

_IMAGE_USER = {
    "keystone": "keystone",
    "glance-api": "glance",
    "placement-api": "placement",
    "nova-api": "nova",
    "nova-scheduler": "nova",
    "nova-conductor": "nova",
    "nova-novncproxy": "nova",
    "neutron-server": "neutron",
    "cinder-api": "cinder",
    "cinder-scheduler": "cinder",
    "cinder-volume": "cinder",
    "horizon": "horizon",
    "memcached": "memcached",
    "kolla-toolbox": "ansible",
}


def profile(image: str) -> ImageProfile:
    user = _IMAGE_USER.get(image)
    if user is None:
        raise KeyError(f"no user known for Kolla image {image!r}; add it to components/images.py")
    return ImageProfile(image, _KOLLA_UIDS[user])
