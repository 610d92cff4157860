"""What the program asks of Rook (rook-ceph).

With `ceph.rook` the program declares, in the CephCluster's namespace, a CephBlockPool per pool and
a CephClient per cephx client, with the caps the README's external section asks an administrator for
(components/infrastructure/rook.py): `mon: profile rbd`, and `profile rbd` (or `profile rbd-read-only`)
on named pools for `osd`, `profile rbd` on named pools for `mgr`. A CephClient's caps are therefore
only those forms, on the stack's pools (`cephPools`): Rook creates the client and hands its key to
whoever reads its Secret, so `allow *`, another pool, or a pool-less `profile rbd` would hand over
other data of the cluster. A CephCluster is the Kubernetes cluster's storage, never the stack's
(components/settings/ceph.py): declaring or patching one is refused, and so is every other Rook kind
(filesystems, object stores and their users...), which the program never declares.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from policies.k8s import K8sObject, get, mapping
from policies.messages import forbidden, not_allowed
from policies.settings import PackSettings

GROUP = "ceph.rook.io"
DECLARED = ("CephBlockPool", "CephClient")
# Per daemon type, the grants a client of the program holds, a pool named in each.
GRANTS = {
    "mon": re.compile(r"profile rbd"),
    "osd": re.compile(r"profile rbd(-read-only)? pool=(?P<pool>[^\s,]+)"),
    "mgr": re.compile(r"profile rbd pool=(?P<pool>[^\s,]+)"),
}
SHAPES = "mon: profile rbd; osd: profile rbd[-read-only] pool=<pool>, ...; mgr: profile rbd pool=<pool>, ..."


def _caps(obj: K8sObject, settings: PackSettings) -> Iterator[str]:
    pools = ", ".join(settings.ceph_pools) or "none (the stack keeps nothing in Ceph)"
    allowed = f"{SHAPES}, on the stack's pools: {pools}"
    why = "Rook hands the client's key to whoever reads its Secret: caps beyond the stack's pools hand over the cluster"
    for daemon, granted in mapping(get(obj.props, "spec", "caps")).items():
        field = f"spec.caps.{daemon}"
        shape = GRANTS.get(str(daemon))
        if shape is None or not isinstance(granted, str):
            yield not_allowed(obj, "client", field, granted, allowed, why)
            continue
        for grant in (g.strip() for g in granted.split(",")):
            matched = shape.fullmatch(grant)
            pool = matched.groupdict().get("pool") if matched else None
            if not matched or (pool is not None and pool not in settings.ceph_pools):
                yield not_allowed(obj, "client", field, grant, allowed, why)
    if not settings.ceph_pools:
        why = "the stack keeps nothing in Ceph, so it has no client to ask for"
        yield forbidden(obj, "client", "CephClient", "a CephClient only where the stack uses Ceph pools", why)


def rook_ceph(obj: K8sObject, settings: PackSettings) -> list[str]:
    if obj.group != GROUP:
        return []
    if obj.kind == "CephCluster":
        why = (
            "a CephCluster is the Kubernetes cluster's storage, decided for every user of it: the program declares "
            "none, and a patch of one changes everyone's"
        )
        return [forbidden(obj, "cluster", "CephCluster", "CephBlockPool and CephClient", why)]
    if obj.kind not in DECLARED:
        why = "the program declares only Rook's pools and clients; other kinds hand out storage or users it never needs"
        return [forbidden(obj, "object", obj.kind, "CephBlockPool and CephClient", why)]
    return list(_caps(obj, settings)) if obj.kind == "CephClient" else []
