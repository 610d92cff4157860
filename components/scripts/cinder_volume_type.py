"""Create the volume type that cinder.conf's default_volume_type names, bound to its backend.

Idempotent. Authenticates as the cloud admin from OS_* variables (openstacksdk reads them).
VOLUME_TYPE names the type, VOLUME_BACKEND the backend's volume_backend_name, as
openstack-helm's cinder-bootstrap Job creates one type per backend.
"""

import os

import openstack


def main() -> None:
    name, backend = os.environ["VOLUME_TYPE"], os.environ["VOLUME_BACKEND"]
    conn = openstack.connect()
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


if __name__ == "__main__":
    main()
