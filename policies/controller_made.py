"""Objects only controllers make (controller-made-objects).

A DaemonSet's or StatefulSet's controller keeps each template it rolled out as a ControllerRevision,
and `kubectl rollout undo` rolls back to one: a ControllerRevision the program declared would hand the
controller a pod template no rule judged (say, libvirt's DaemonSet rolled back to an old image or a
privilege since removed). cert-manager makes a CertificateRequest from each Certificate, and the compute
nodes make theirs at run time, narrowed by a ValidatingAdmissionPolicy (components/nodes/libvirt_tls.py):
one the program declared would ask a CA to sign a request the certificate rules never read. The program
declares neither, so both are refused.
"""

from __future__ import annotations

from policies.k8s import K8sObject
from policies.messages import forbidden
from policies.settings import PackSettings

CONTROLLER_MADE = {
    ("apps", "ControllerRevision"): "a DaemonSet's or StatefulSet's controller keeps its rolled-out templates as "
    "ControllerRevisions; one declared would be a pod template the pack never judged, to roll back to",
    ("cert-manager.io", "CertificateRequest"): "cert-manager makes them from Certificates, the compute nodes at run "
    "time; one declared would have a CA sign a request the certificate rules never read",
}


def controller_made_objects(obj: K8sObject, settings: PackSettings) -> list[str]:
    why = CONTROLLER_MADE.get((obj.group, obj.kind))
    if why is None:
        return []
    return [forbidden(obj, "object", obj.kind, "none: the program declares no object its controllers make", why)]
