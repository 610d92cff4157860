#!/bin/sh
# Installs the Debian packages that tests/real needs, without starting any system
# service: the tests run their own instances on loopback in temporary directories.
set -eu

# The servers, then what uWSGI's sdist compiles with when the OpenStack venv is built
# (python3-dev only matters if the project's Python is Debian's own).
PACKAGES="mariadb-server rabbitmq-server memcached gcc libc6-dev python3-dev"

missing=""
for package in $PACKAGES; do
    if ! dpkg-query -W -f '${Status}' "$package" 2>/dev/null | grep -q "install ok installed"; then
        missing="$missing $package"
    fi
done
if [ -z "$missing" ]; then
    echo "install_system_packages.sh: all present ($PACKAGES)"
    exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
    command -v sudo >/dev/null || { echo "install_system_packages.sh: need root for:$missing" >&2; exit 1; }
    SUDO="sudo"
fi

# invoke-rc.d consults policy-rc.d; exit code 101 means "action forbidden", so the
# postinst scripts install the units but start nothing. Only remove what we added.
created_policy=""
if [ ! -e /usr/sbin/policy-rc.d ]; then
    printf '#!/bin/sh\nexit 101\n' | $SUDO tee /usr/sbin/policy-rc.d >/dev/null
    $SUDO chmod 0755 /usr/sbin/policy-rc.d
    created_policy=1
fi
cleanup() { [ -n "$created_policy" ] && $SUDO rm -f /usr/sbin/policy-rc.d; return 0; }
trap cleanup EXIT

$SUDO env DEBIAN_FRONTEND=noninteractive apt-get update -q
# shellcheck disable=SC2086
$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends $missing
