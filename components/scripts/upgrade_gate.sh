#!/bin/bash
# An upgrade's preflight check (components/upgrade.py): runs its command and stops the upgrade,
# before any change, when it exits with a code outside UPGRADE_OK_CODES, saying what to do.
set -uo pipefail
"$@"
code=$?
for ok in ${UPGRADE_OK_CODES:-0}; do
  if [ "$code" -eq "$ok" ]; then
    exit 0
  fi
done
echo "upgrade stopped before any change: '$*' exited $code (passes with: ${UPGRADE_OK_CODES:-0})" >&2
echo "${UPGRADE_ADVICE:-}" >&2
exit 1
