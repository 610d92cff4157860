"""nova-compute-maintenance's modules import each other as the pod runs them: side by side in /scripts."""

import sys

from tools.runtime import REPO

SCRIPTS = str(REPO / "components" / "scripts")
if SCRIPTS not in sys.path:
    sys.path.insert(0, SCRIPTS)
