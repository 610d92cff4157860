"""The top: `build` declares a stack's whole cloud from its settings, `graph` orders it, each
service is an `openstack_service`, `upgrade` and `upgrade_recipes` run a release upgrade, and
`stack_config` and `setting_names` read and fully check a stack's settings. It may import every
layer below, and the policy pack.
"""
