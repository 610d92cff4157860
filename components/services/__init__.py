"""The OpenStack services, mostly data: one module per catalog entry (keystone, glance,
placement, nova, neutron, cinder, horizon, and compute, deployed with nova), each a function that
returns its spec, and `specs`, which loads them by the catalog's locators. It may import
`components.infrastructure`, `components.nodes` and below.
"""
