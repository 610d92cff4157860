"""Test doubles of the APIs the program's own code calls, where the real server cannot run here.

kubefake    the Kubernetes API paths nova-compute-maintenance calls (nodes, pods, events, RBAC)
json_http   a JSON-over-HTTP server in a thread, which the doubles answer through
merge_patch JSON merge patch (RFC 7386), as the API server applies it
rbac        the rules bound to a ServiceAccount, shared with the lab's API server (tests/lab/cloud/apiserver.py)

Standard library only, and this file imports nothing: the lab runs some of them in the OpenStack virtualenv.
"""
