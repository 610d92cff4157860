"""The program's tables: the service catalog (which services exist, what each needs, where its
spec is) and the node roles (which node pods exist, what each may hold). Standard library only, and
this file imports nothing: the policy pack imports `components.tables.roles` and
`components.tables.catalog` in the engine, without pydantic or Pulumi.
"""
