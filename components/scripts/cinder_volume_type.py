"""Create the volume types of cinder.conf's backends, each bound to its backend.

Idempotent. Authenticates as the cloud admin from OS_* variables (openstacksdk reads them).
VOLUME_TYPES lists 'type=backend' pairs, the backend its volume_backend_name, as
openstack-helm's cinder-bootstrap Job creates one type per backend; cinder.conf's
default_volume_type names the first.
"""

from __future__ import annotations

import os

import openstack


def ensure(conn: openstack.connection.Connection, name: str, backend: str) -> None:
    existing = conn.block_storage.find_type(name)
    if existing is None:
        conn.block_storage.create_type(
            name=name, is_public=True, extra_specs={"volume_backend_name": backend}, description=f"{backend} volumes"
        )
        print(f"created volume type {name} for backend {backend}")
    elif existing.extra_specs.get("volume_backend_name") != backend:
        conn.block_storage.update_type_extra_specs(existing, volume_backend_name=backend)
        print(f"volume type {name} now points at backend {backend}")
    else:
        print(f"volume type {name} exists for backend {backend}")


def main() -> None:
    conn = openstack.connect()
    for pair in os.environ["VOLUME_TYPES"].split():
        name, backend = pair.split("=", 1)
        ensure(conn, name, backend)


if __name__ == "__main__":
    main()
