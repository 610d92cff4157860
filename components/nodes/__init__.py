"""The compute nodes' mechanics: the node pods (`nodepod`, `compute_pods`), libvirt and its TLS,
and the maintenance controller that drains a cordoned node. It may import `components.mechanism`
and below; not `components.infrastructure`, which sits beside it.
"""
