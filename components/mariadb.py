"""MariaDB through the mariadb-operator: one server, or a three-node Galera cluster under HA.

The operator owns bootstrap and full-cluster recovery of Galera; this program only
declares the `MariaDB` resource and waits until the operator reports it Ready.
"""

from __future__ import annotations

import pulumi
import pulumi_kubernetes as k8s

from components import kube
from components.bootstrap import MARIADB_ROOT_SECRET
from components.credentials import Credentials
from components.graph import DeployGraph
from components.meta import metadata
from components.operator_chart import operator_chart
from components.settings import Settings
from components.workload import resources_manifest

CHART_REPOSITORY = "https://helm.mariadb.com/mariadb-operator"
WAIT_READY = {"pulumi.com/waitFor": "condition=Ready", "pulumi.com/timeoutSeconds": "1200"}


class MariaDB(pulumi.ComponentResource):
    def __init__(
        self,
        settings: Settings,
        credentials: Credentials,
        graph: DeployGraph,
        opts: pulumi.ResourceOptions | None = None,
    ):
        super().__init__("openstack:infra:MariaDB", "mariadb", None, opts)
        ns, operators = settings.namespace, settings.operators
        crds = operator_chart(
            "mariadb-operator-crds", "mariadb-operator-crds", CHART_REPOSITORY, operators.mariadb_crds, ns, self
        )
        chart = operator_chart(
            "mariadb-operator",
            "mariadb-operator",
            CHART_REPOSITORY,
            operators.mariadb,
            ns,
            self,
            depends_on=[crds] if crds else None,
        )
        root = kube.secret(MARIADB_ROOT_SECRET, ns, "mariadb", {"password": credentials.password("mariadb-root")}, self)
        replicas = 3 if settings.ha else 1
        spec: dict = {
            "rootPasswordSecretKeyRef": {"name": MARIADB_ROOT_SECRET, "key": "password", "generate": False},
            "replicas": replicas,
            "storage": {"size": settings.storage.mariadb_size, "storageClassName": settings.storage.storage_class},
            "resources": resources_manifest(settings.resources_of("mariadb")),
            "nodeSelector": settings.node_selectors.control_plane,
            # Each service opens a pool per worker; the default of 151 runs out with a few APIs.
            "myCnf": "[mariadb]\nmax_connections=4096\nmax_allowed_packet=256M\ninnodb_buffer_pool_size=512M\n",
        }
        if settings.ha:
            spec["galera"] = {"enabled": True}
            spec["affinity"] = {"antiAffinityEnabled": True}
            spec["podDisruptionBudget"] = {"maxUnavailable": 1}
        self.server = k8s.apiextensions.CustomResource(
            "mariadb",
            api_version="k8s.mariadb.com/v1alpha1",
            kind="MariaDB",
            metadata={**metadata("mariadb", ns, "mariadb", "database"), "annotations": WAIT_READY},
            spec={k: v for k, v in spec.items() if v is not None},
            opts=pulumi.ResourceOptions(parent=self, depends_on=[r for r in (chart, root) if r]),
        )
        graph.add("mariadb", self.server)
        self.register_outputs({})
