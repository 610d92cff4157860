"""MariaDB through the mariadb-operator: one server, or a three-node Galera cluster under HA.

The operator owns bootstrap and full-cluster recovery of Galera; this program only
declares the `MariaDB` resource and waits until the operator reports it Ready.
"""

from __future__ import annotations

import pulumi
import pulumi_kubernetes as k8s

from components.infrastructure import mariadb_tls
from components.infrastructure.credentials import Credentials
from components.infrastructure.mariadb_backup import mariadb_backup
from components.infrastructure.operator_chart import operator_chart
from components.mechanism import kube, oslo
from components.mechanism.bootstrap import MARIADB_ROOT_SECRET
from components.mechanism.created import DeployGraph
from components.mechanism.meta import metadata
from components.mechanism.workload import resources_manifest
from components.settings import scheduling
from components.settings.memory import SHARES
from components.settings.model import Settings

# The OCI charts; the helm.mariadb.com repository is deprecated (docs/helm.md, 26.6.0).
OPERATOR_CHART = "oci://ghcr.io/mariadb-operator/charts/mariadb-operator"
CRDS_CHART = "oci://ghcr.io/mariadb-operator/charts/mariadb-operator-crds"
# Why `replicas.mariadb` is no setting: the servers follow `ha`.
REPLICAS = "one server, or a three-node Galera cluster under ha (the operator keeps them in step)"
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
        # The CRD chart must never be uninstalled: deleting the CRDs cascade-deletes every
        # MariaDB, Database, User and Grant, and so the data (UPGRADE_26.6.0.md: "always use
        # `helm upgrade` in-place"). Pulumi would delete its objects if the chart were removed
        # or replaced, e.g. by a change of its source; operator_chart retains each CRD. The
        # CRDs are the cluster's: of several stacks on one cluster, one installs them.
        crds = operator_chart("mariadb-operator-crds", CRDS_CHART, operators.mariadb_crds, ns, self)
        # Namespace-scoped: the chart's only such mode watches its own release namespace, with a
        # Role there and no webhook or cert-controller (values.yaml currentNamespaceOnly), so the
        # operator runs in the stack's namespace. Cluster-wide remain only the CRDs.
        chart = operator_chart(
            "mariadb-operator",
            OPERATOR_CHART,
            operators.mariadb,
            ns,
            self,
            values={"currentNamespaceOnly": True},
            depends_on=[crds] if crds else None,
        )
        root = kube.secret(MARIADB_ROOT_SECRET, ns, "mariadb", {"password": credentials.password("mariadb-root")}, self)
        replicas = 3 if settings.ha else 1
        resources = settings.resources_of(oslo.MARIADB)
        # Galera fsyncs every commit: block storage (storage.classes.database), not a shared file system.
        database_class = settings.storage.class_for("database")
        spec: dict = {
            "rootPasswordSecretKeyRef": {"name": MARIADB_ROOT_SECRET, "key": "password", "generate": False},
            "replicas": replicas,
            # No storageClassName without a class (the cluster's default): the CRD's field is a string, not null.
            "storage": {
                "size": settings.storage.mariadb_size,
                **({"storageClassName": database_class} if database_class else {}),
            },
            "resources": resources_manifest(resources),
            "nodeSelector": settings.node_selectors.control_plane,
            **scheduling.pod_fields(settings.tolerations.control_plane, settings.priority_classes.data_stores),
            # Each service opens a pool per worker; the default of 151 runs out with a few APIs.
            # The buffer pool is a share of the container's memory limit (components/settings/memory.py).
            "myCnf": (
                "[mariadb]\nmax_connections=4096\nmax_allowed_packet=256M\n"
                f"innodb_buffer_pool_size={SHARES['mariadb'].mib(resources.limits_memory)}M\n"
            ),
            **mariadb_tls.tls_spec(settings),
        }
        if settings.ha:
            spec["galera"] = {"enabled": True}
            spec["affinity"] = {"antiAffinityEnabled": True}
            spec["podDisruptionBudget"] = {"maxUnavailable": 1}
        # No dependency: the pods wait in ContainerCreating until cert-manager writes the Secrets.
        mariadb_tls.certificates_for(settings, self)
        self.server = k8s.apiextensions.CustomResource(
            "mariadb",
            api_version="k8s.mariadb.com/v1alpha1",
            kind="MariaDB",
            # Its name is what the operator names the Services clients use (oslo.database_service).
            metadata={**metadata(oslo.MARIADB, ns, "mariadb", "database"), "annotations": WAIT_READY},
            spec={k: v for k, v in spec.items() if v is not None},
            opts=pulumi.ResourceOptions(parent=self, depends_on=[r for r in (chart, root) if r]),
        )
        graph.add(oslo.MARIADB, self.server)
        self.backup = mariadb_backup(settings, self.server, self)
        self.register_outputs({})
