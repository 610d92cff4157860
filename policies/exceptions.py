"""Control-plane containers that cannot meet a restricted-profile control, each with why.

An exception is as narrow as a node role: it names the service and component labels AND
the Kolla image the container must run, in the stack's namespace, so copying labels onto
another pod excuses nothing. Add an entry only when the image itself cannot comply, and
say so in `reason` (it is printed in policies/README.md).
"""

from __future__ import annotations

from dataclasses import dataclass

from policies.images import repository
from policies.k8s import COMPONENT, NAME
from policies.node_roles import kolla_repository
from policies.podspec import ContainerRef, PodTemplate
from policies.settings import PackSettings

# Control ids, as the restricted rule reports them.
CONTROLS = (
    "allowPrivilegeEscalation", "capabilities", "runAsNonRoot", "runAsUser", "seccompProfile", "procMount", "volumes",
)  # fmt: skip


@dataclass(frozen=True)
class RestrictedException:
    service: str  # app.kubernetes.io/name
    component: str  # app.kubernetes.io/component
    image: str  # Kolla image name the container runs
    controls: tuple[str, ...]
    reason: str


# Every control-plane image the program runs meets the restricted profile today: Kolla
# images give each service a fixed non-root UID (components/mechanism/images.py), and the program
# runs them as that user without privilege escalation, so the table is empty.
EXCEPTIONS: tuple[RestrictedException, ...] = ()


def excusing(
    pod: PodTemplate,
    container: ContainerRef,
    control: str,
    settings: PackSettings,
    exceptions: tuple[RestrictedException, ...] = EXCEPTIONS,
) -> RestrictedException | None:
    if pod.obj.namespace != settings.namespace or pod.obj.from_chart:
        return None
    for exception in exceptions:
        if (
            control in exception.controls
            and pod.labels.get(NAME) == exception.service
            and pod.labels.get(COMPONENT) == exception.component
            and repository(container.image) == kolla_repository(exception.image, settings)
        ):
            return exception
    return None
