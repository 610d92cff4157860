"""Lists: an object with `items` is a list, and what reaches the cluster is its items.

apimachinery decodes any object with an `items` field as a list, whatever its kind says, and
gives an item with neither kind nor apiVersion those of its list (`PodList` → `Pod`;
unstructured.go, decodeToList); kubectl applies the items. pulumi-kubernetes also has a
resource type per list kind (`kubernetes:apps/v1:DaemonSetList`...). So the pack judges each
item as the object it is, and a list nobody looked into cannot carry a pod past the rules.
An item never holds a node role (node_roles.py): node pods are the program's own DaemonSets.
"""

from __future__ import annotations

from collections.abc import Mapping

from policies.k8s import K8sObject, get, is_list, type_token

LIST_SUFFIX = "List"


def _list_type(obj: K8sObject) -> tuple[str, str]:
    """The list's apiVersion and kind, from its fields or else from its type token."""
    parts = obj.type.split(":")
    api_version = get(obj.props, "apiVersion")
    kind = get(obj.props, "kind")
    if not isinstance(api_version, str):
        api_version = parts[1].removeprefix("core/") if len(parts) == 3 else ""
    return api_version, kind if isinstance(kind, str) else obj.kind


def flatten(obj: K8sObject) -> list[K8sObject]:
    """The object itself, or the items of a list (of lists...), each as an object of its own."""
    if not isinstance(obj.props, Mapping) or "items" not in obj.props:
        return [obj]
    items = obj.props["items"]
    api_version, kind = _list_type(obj)
    found = []
    for index, item in enumerate(items if is_list(items) else ()):
        if not isinstance(item, Mapping):
            continue
        item_version, item_kind = get(item, "apiVersion"), get(item, "kind")
        if item_version is None and item_kind is None:
            item_version, item_kind = api_version, kind.removesuffix(LIST_SUFFIX)
        token = type_token(str(item_version or api_version), str(item_kind or kind.removesuffix(LIST_SUFFIX)))
        within = f"item {index} of {obj.describe()}"
        found += flatten(K8sObject(obj.urn, token, item, obj.dependencies, within))
    return found
