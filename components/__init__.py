"""The Pulumi program, in layers: each package imports only the ones below it (`lint-imports` checks).

- `cloud`: the top: a stack's whole cloud, its order, the services' component, the upgrade, the full
  settings check.
- `services`: the OpenStack services, one module of data per catalog entry.
- `infrastructure` | `nodes`: what the services stand on (databases, queues, caches, the front door,
  Ceph, isolation) and the compute nodes' mechanics (node pods, libvirt, maintenance); side by side,
  neither imports the other.
- `mechanism`: the shared building blocks (workload specs, config files, bootstrap Jobs, certificates).
- `settings`: the settings model and its problems.
- `tables`: the service catalog and the node roles (standard library only; the policy pack reads them).

`scripts` is no layer: its files run in the pods, and the program reads them as text.
Every `__init__.py` here imports nothing, so importing one module pulls in only what it imports.
"""
