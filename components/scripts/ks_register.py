"""Register a service with Keystone: its user and roles, its catalog entry, its endpoints.

`ks_register.py user|service|endpoints`; each is idempotent. Authenticates as the cloud
admin from OS_* variables (openstacksdk reads them). CATALOG lists
`name,type,public_url,internal_url,admin_url` entries separated by ';' (admin may be empty).
"""

import functools
import os
import sys
from collections.abc import Callable
from typing import Any

import openstack
import openstack.exceptions
from keystoneauth1 import exceptions as ks_exceptions
from keystoneauth1 import session
from keystoneauth1.identity import v3


def catalog() -> list[tuple[str, str, dict[str, str]]]:
    entries = []
    for entry in filter(None, os.environ["CATALOG"].split(";")):
        name, service_type, public, internal, admin = entry.split(",")
        urls = {"public": public, "internal": internal, "admin": admin}
        entries.append((name, service_type, {k: v for k, v in urls.items() if v}))
    return entries


def find_or_create(find: Callable[[], Any], create: Callable[[], Any]) -> Any:
    """The project, role and region every service shares: the ks Jobs of all services run at
    once, so another Job may create it between our look-up and our create (409 Conflict)."""
    found = find()
    if found is not None:
        return found
    try:
        return create()
    except openstack.exceptions.ConflictException:
        return find()


def password_works(name: str, password: str) -> bool:
    """Whether Keystone already takes this password for the user (an unscoped token)."""
    auth = v3.Password(auth_url=os.environ["OS_AUTH_URL"], username=name, password=password, user_domain_name="Default")
    try:
        session.Session(auth=auth).get_token()
    except ks_exceptions.Unauthorized:
        return False
    return True


def ensure_user(conn: openstack.connection.Connection) -> None:
    project_name = os.environ["SERVICE_PROJECT"]
    project = find_or_create(
        lambda: conn.identity.find_project(project_name, domain_id="default"),
        lambda: conn.identity.create_project(
            name=project_name, domain_id="default", description="OpenStack service users"
        ),
    )
    name, password = os.environ["SERVICE_USER"], os.environ["SERVICE_PASSWORD"]
    user = conn.identity.find_user(name, domain_id="default")
    if user is None:
        user = conn.identity.create_user(
            name=name, password=password, domain_id="default", default_project_id=project.id
        )
    elif not password_works(name, password):
        # The password in the Secret is the truth: a rotated password must reach Keystone.
        # Only then: every password change revokes the user's tokens and adds a history row.
        conn.identity.update_user(user, password=password)
    for role_name in filter(None, os.environ["SERVICE_ROLES"].split(",")):
        role = find_or_create(
            functools.partial(conn.identity.find_role, role_name),
            functools.partial(conn.identity.create_role, name=role_name),
        )
        conn.identity.assign_project_role_to_user(project, user, role)
    print(f"user {name} has roles {os.environ['SERVICE_ROLES']} on project {project_name}")


def ensure_services(conn: openstack.connection.Connection) -> None:
    for name, service_type, _ in catalog():
        found = [s for s in conn.identity.services(type=service_type) if s.name == name]
        if not found:
            conn.identity.create_service(name=name, type=service_type, enabled=True)
        print(f"service {name} ({service_type}) registered")


def ensure_endpoints(conn: openstack.connection.Connection) -> None:
    region = os.environ["OS_REGION_NAME"]
    find_or_create(lambda: conn.identity.find_region(region), lambda: conn.identity.create_region(id=region))
    for name, service_type, urls in catalog():
        service = next(s for s in conn.identity.services(type=service_type) if s.name == name)
        existing = {e.interface: e for e in conn.identity.endpoints(service_id=service.id, region_id=region)}
        for interface, url in urls.items():
            endpoint = existing.get(interface)
            if endpoint is None:
                conn.identity.create_endpoint(service_id=service.id, interface=interface, url=url, region_id=region)
            elif endpoint.url != url:
                conn.identity.update_endpoint(endpoint, url=url)
            print(f"endpoint {name} {interface} {url}")


def main() -> None:
    actions = {"user": ensure_user, "service": ensure_services, "endpoints": ensure_endpoints}
    if len(sys.argv) != 2 or sys.argv[1] not in actions:
        sys.exit(f"usage: ks_register.py {'|'.join(actions)}")
    actions[sys.argv[1]](openstack.connect())


if __name__ == "__main__":
    main()
