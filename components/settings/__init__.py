"""The settings model: a stack's `openstack:` settings parsed, defaulted and checked (`model`,
with its parts: the gateway and TLS settings, Ceph, the upgrade, the releases, memory and cron values),
and the problems it reports (`problems`). It may import `components.tables` and pydantic, nothing
that declares a resource; checks that need more (the names a stack's maps use) are passed in from
the top (`components.cloud.stack_config`).
"""
