"""The shared mechanisms every service and store is built with: the workload spec and its pods
(`spec`, `workload`, `kube`, `meta`), the bootstrap Jobs, config files (`inifile`, `oslo`,
`service_configs`), the API's Deployment and Service (`api`), images, certificates and the internal
CA, and the registry of created resources (`created`). It may import `components.settings` and
`components.tables`.
"""
