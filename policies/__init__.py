"""The openstack-on-k8s policy pack: rules over Kubernetes objects, usable without an engine.

`__main__.py` turns the rules into a pulumi-policy PolicyPack for `pulumi preview`;
`report.check_resources` runs the same rules offline (tools/plan, tools/policycheck).
Modules here import only the standard library and the program's tables (`components.tables`: the
role table and the service catalog; `lint-imports` holds the pack to them), except `pack`, which
needs pulumi-policy.
"""
