"""The resources created so far by the walk of the deploy graph, by Kubernetes name.

`components.cloud.graph` decides what waits for what, before any resource exists; as
`components.cloud.build` walks it in order, each created resource is registered here, and a
node's needs are turned into `depends_on` on what is registered under those names.
"""

from __future__ import annotations

from collections.abc import Iterable

import pulumi


class UnknownDependencyError(KeyError):
    pass


class DeployGraph:
    def __init__(self) -> None:
        self._nodes: dict[str, pulumi.Resource] = {}

    def add(self, name: str, resource: pulumi.Resource) -> pulumi.Resource:
        if name in self._nodes:
            raise ValueError(f"{name!r} is declared twice in the deploy graph")
        self._nodes[name] = resource
        return resource

    def __contains__(self, name: str) -> bool:
        return name in self._nodes

    def resolve(self, names: Iterable[str], *, waiter: str) -> list[pulumi.Resource]:
        """The resources `waiter` must wait for; an unknown name is a programming error."""
        resolved = []
        for name in names:
            if name not in self._nodes:
                known = ", ".join(sorted(self._nodes)) or "nothing yet"
                raise UnknownDependencyError(f"{waiter} waits for {name!r}, which is not declared (known: {known})")
            resolved.append(self._nodes[name])
        return resolved
