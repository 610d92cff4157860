"""Helpers for testing against the real OpenStack release and real servers.

openstack_venv  the cached virtualenvs, one per release, with its projects (never the program's)
tempest_venv    the cached virtualenv with Tempest, OpenStack's test suite, for the running cloud
servers         MariaDB, RabbitMQ and memcached on loopback, started and stopped by tests
validator       oslo-config-validator plus a value check of rendered files, each with its own verdict
namespaces      which oslo.config namespaces describe which rendered file
oslo_values     the value check itself; runs inside the OpenStack venv
oslo_check      both checks of many files that share one namespace list, in one process in the venv
"""
