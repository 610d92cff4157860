"""What Pulumi runs for `--policy-pack policies`: build the PolicyPack, nothing else.

The PolicyPack constructor starts the analyzer server and never returns, so the rules
live in importable modules (policies/registry.py) and are tested there.
"""

import sys
from pathlib import Path

# Pulumi runs the pack from inside policies/, where neither `policies.*` nor the shared
# role table (components/tables/roles.py) is importable until the repository root is on the path.
REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from pulumi_policy import EnforcementLevel, Policy, PolicyPack  # noqa: E402

from policies.pack import PACK_NAME, build_policies  # noqa: E402

# PolicyPack's parameter is a list[Policy], and list is invariant: the resource and stack
# policies go into a list of that type.
policies: list[Policy] = [*build_policies()]
PolicyPack(
    name=PACK_NAME,
    policies=policies,
    enforcement_level=EnforcementLevel.MANDATORY,
    description="Gates privileges and host access of OpenStack on Kubernetes; see policies/README.md.",
)
