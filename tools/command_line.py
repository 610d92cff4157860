"""What every tool's `python -m` entry does around its main: end quietly when its reader has gone.

`python -m tools.plan --graph | head` closes the pipe before the tool has written everything. Python
then raises BrokenPipeError on the next write (and again when it flushes stdout at exit), which would
print a traceback for what is the reader's choice. As a Unix tool does, the tool stops there; its
status is 141, a shell's for SIGPIPE, so `set -o pipefail` still sees that output was cut short.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable

PIPE_CLOSED_STATUS = 128 + 13  # SIGPIPE's number


def run(main: Callable[[], int]) -> None:
    """sys.exit(main()), ending quietly if stdout's reader closed the pipe."""
    try:
        status = main()
        sys.stdout.flush()  # inside the try: a closed pipe shows up here when the output was buffered
    except BrokenPipeError:
        # Later flushes (at interpreter exit) would fail again; writes now go nowhere.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        sys.exit(PIPE_CLOSED_STATUS)
    sys.exit(status)
