#!/bin/bash
# Map compute hosts that registered since the last run into their cell; idempotent.
set -euo pipefail
nova-manage --config-file /etc/nova/nova.conf cell_v2 discover_hosts --verbose
