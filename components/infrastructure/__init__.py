"""What the services stand on: MariaDB (and its backup and TLS), RabbitMQ, memcached, the
credentials, operator charts, Rook and Ceph, the internal CA's rotation, the front door (Envoy
Gateway, the public routes) and the NetworkPolicies that isolate it all. It may import
`components.mechanism` and below; not `components.nodes`, which sits beside it.
"""
