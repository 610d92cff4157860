"""Transforms of the objects an operator's chart or manifest brings, and what each one does.

A `helm.v4.Chart` or `yaml.v2.ConfigFile` is a remote component: the provider registers its
children with their parent as their only option, so `retainOnDelete` or `protect` set on the
component never reach them (pulumi-kubernetes issue #3065, closed as won't fix: deleting the
chart deleted every child). The engine runs the component's `transforms` on each child, so an
option a child must have is set there. Each transform says what it does (`does`): the plan
records it (tools/runtime.py), so `--explain` and the plan diff show it, since the mock runtime
does not expand a chart's children.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import pulumi

Apply = Callable[[pulumi.ResourceTransformArgs], pulumi.ResourceTransformResult | None]
CUSTOM_RESOURCE_DEFINITION = "kubernetes:apiextensions.k8s.io/v1:CustomResourceDefinition"


@dataclass(frozen=True)
class ChildTransform:
    """A resource transform with what it does in words (the engine calls it like a function)."""

    does: str
    apply: Apply

    def __call__(self, args: pulumi.ResourceTransformArgs) -> pulumi.ResourceTransformResult | None:
        return self.apply(args)


def _retain_definition(args: pulumi.ResourceTransformArgs) -> pulumi.ResourceTransformResult | None:
    if args.type_ != CUSTOM_RESOURCE_DEFINITION:
        return None
    kept = pulumi.ResourceOptions.merge(args.opts, pulumi.ResourceOptions(retain_on_delete=True))
    return pulumi.ResourceTransformResult(args.props, kept)


# Deleting a CustomResourceDefinition deletes every object of its kind in the cluster: every
# MariaDB (and so its data) or RabbitmqCluster, of this stack and of any other. Removing the
# chart or manifest from the stack (the stack deleted, `install: false`, a new source) must
# leave the definitions where they are.
KEEP_DEFINITIONS = ChildTransform(
    "retainOnDelete on each CustomResourceDefinition: deleting one would delete every object of its kind",
    _retain_definition,
)
