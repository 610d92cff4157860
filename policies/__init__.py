"""The openstack-on-k8s policy pack: rules over Kubernetes objects, usable without an engine.

`__main__.py` turns the rules into a pulumi-policy PolicyPack for `pulumi preview`;
`report.check_resources` runs the same rules offline (tools/plan, tools/policycheck).
Modules here import only the standard library and `components.tables.roles`, except `pack`,
which needs pulumi-policy.
"""
