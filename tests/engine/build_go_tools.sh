#!/usr/bin/env bash
# Builds, from the Go module proxy, the programs a user of this project runs besides Python:
#   pulumi                      the Pulumi CLI (github.com/pulumi/pulumi/pkg/v3/cmd/pulumi)
#   pulumi-language-python      a STAND-IN of ours (gotools/pulumi-language-python): the proxy
#                               doesn't serve the upstream module; see its doc comment
#   pulumi-resource-kubernetes  the Kubernetes provider plugin (pulumi-kubernetes/provider/v4)
#   pulumi-resource-random      a STAND-IN of ours (gotools/pulumi-resource-random) for pulumi-random's
#                               provider plugin, which the proxy doesn't serve; see its doc comment
#   kube-apiserver, kube-controller-manager, kube-scheduler   (k8s.io/kubernetes)
#   etcd                        Debian's etcd-server package (installed, not built)
# into $CACHE/go-tools/<tool>-<version>/, outside the checkout. A tool whose directory is complete
# is skipped, so a second run only prints where everything is. Each build prints its seconds
# (module download + compile); a tool that can't be built says why and the others still build.
#
#   tests/engine/build_go_tools.sh [pulumi] [pulumi-language-python] [pulumi-resource-kubernetes]
#                                  [pulumi-resource-random] [kubernetes] [etcd]
#                                                               (no argument: all of them)
#
# Versions are pinned here and in the go.mod/go.sum of each module under gotools/.
# GO_BUILD_JOBS (default 2) is go build's -p; builds run under nice -n 10.
set -euo pipefail

PULUMI_VERSION=3.274.1
# The only version of provider/v4 the proxy serves; PyPI released that commit as 4.25.0a1768448096.
K8S_PROVIDER_MODULE_VERSION=v4.0.0-20260115033456-f47bc2d6f199
K8S_PROVIDER_VERSION=4.25.0-alpha.1768448096+f47bc2d6
# The pulumi-random release whose plugin the Python SDK pulumi-random 4.21.x asks for; our stand-in
# answers as RANDOM_PROVIDER_VERSION+standin.<hash of its source>: semver build metadata, which
# version comparisons ignore, so the engine's "expected to have version >=4.21.4" check passes (a
# -standin prerelease would sort below 4.21.4 and draw that warning on every run).
RANDOM_PROVIDER_VERSION=4.21.4
KUBERNETES_VERSION=1.31.14
# The Go that the modules' go lines need at least (pkg/v3's go.mod says go 1.26.6).
GO_MIN=1.26.6

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
MODULES="$HERE/gotools"
CACHE="${OPENSTACK_ON_K8S_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/openstack-on-k8s}"
TOOLS="$CACHE/go-tools"
LOGS="$TOOLS/logs"
mkdir -p "$TOOLS" "$LOGS"

# Our own module and build caches, so a build never depends on what else the machine has.
export GOMODCACHE="$CACHE/go-mod"
export GOCACHE="$CACHE/go-build"
# The local Go only: every module here asks for go <= $GO_MIN.
export GOTOOLCHAIN=local
# The checksum database can't be reached from this workplace (only the module proxy can). Every
# hash is pinned instead by the go.sum files committed under gotools/ (-mod=readonly: a module
# missing from them is an error, not a new download), which were recorded from the proxy.
export GOSUMDB=off
export GOFLAGS="-mod=readonly -buildvcs=false -trimpath"
# Static binaries, as upstream releases them.
export CGO_ENABLED=0
JOBS="${GO_BUILD_JOBS:-2}"
NICE=(nice -n 10)

failed=()

go_at_least() {  # go_at_least 1.26.6: the local go is that version or newer
    local have
    have="$(go env GOVERSION 2>/dev/null | sed 's/^go//')" || return 1
    [[ "$(printf '%s\n%s\n' "$1" "$have" | sort -V | head -n1)" == "$1" ]]
}

# build NAME VERSION FUNCTION: runs FUNCTION DIR (DIR is a fresh directory that becomes
# $TOOLS/NAME-VERSION once FUNCTION succeeds), timing it; on failure prints the log's tail.
build() {
    local name="$1" version="$2" fn="$3"
    local dest="$TOOLS/$name-$version" log="$LOGS/$name-$version.log"
    if [[ -f "$dest/.complete" ]]; then
        printf '%-28s %-36s present: %s\n' "$name" "$version" "$dest"
        return 0
    fi
    if ! command -v go >/dev/null; then
        printf '%-28s %-36s NOT BUILT: no go command on PATH\n' "$name" "$version"
        failed+=("$name"); return 0
    fi
    if ! go_at_least "$GO_MIN"; then
        printf '%-28s %-36s NOT BUILT: needs Go >= %s, this is %s (GOTOOLCHAIN=local)\n' \
            "$name" "$version" "$GO_MIN" "$(go env GOVERSION)"
        failed+=("$name"); return 0
    fi
    local partial="$dest.partial" start end
    rm -rf "$partial" && mkdir -p "$partial"
    start=$(date +%s)
    # A subshell outside any `if`, so that set -e stops FUNCTION at its first failing command.
    local rc=0
    set +e
    ( set -e; "$fn" "$partial" ) >"$log" 2>&1
    rc=$?
    set -e
    if [[ $rc == 0 ]]; then
        end=$(date +%s)
        rm -rf "$dest" && mv "$partial" "$dest"
        echo "built in $((end - start)) s with $(go env GOVERSION)" >"$dest/.complete"
        printf '%-28s %-36s built in %4d s: %s\n' "$name" "$version" "$((end - start))" "$dest"
    else
        end=$(date +%s)
        printf '%-28s %-36s NOT BUILT after %d s; the end of %s:\n' "$name" "$version" "$((end - start))" "$log"
        tail -n 25 "$log" | sed 's/^/    /'
        failed+=("$name")
    fi
}

# --- pulumi: pkg/v3 has replace directives, so `go install pkg@version` refuses it; the module
# gotools/pulumi requires it (and sdk/v3) and carries its non-local replace.
build_pulumi() {
    cd "$MODULES/pulumi"
    "${NICE[@]}" go build -p "$JOBS" -o "$1/pulumi" \
        -ldflags "-X github.com/pulumi/pulumi/sdk/v3/go/common/version.Version=v$PULUMI_VERSION" \
        github.com/pulumi/pulumi/pkg/v3/cmd/pulumi
    "$1/pulumi" version
}

# --- pulumi-language-python: our stand-in, plus the upstream scripts it and the engine run, which
# the served sdk/v3 module carries (sdk/python/cmd and sdk/python/dist of the same release).
langhost_version() {  # the stand-in's directory changes with its source
    local sum
    sum="$(cat "$MODULES/pulumi-language-python/go.mod" "$MODULES/pulumi-language-python/go.sum" \
        "$MODULES"/pulumi-language-python/*.go | sha256sum | cut -c1-12)"
    echo "$PULUMI_VERSION-standin.$sum"
}
build_langhost() {
    cd "$MODULES/pulumi-language-python"
    "${NICE[@]}" go build -p "$JOBS" -o "$1/pulumi-language-python" \
        -ldflags "-X github.com/pulumi/pulumi/sdk/v3/go/common/version.Version=$(langhost_version)" .
    local sdk
    go mod download github.com/pulumi/pulumi/sdk/v3
    sdk="$(go list -m -f '{{.Dir}}' github.com/pulumi/pulumi/sdk/v3)"
    install -m 0755 "$sdk/python/cmd/pulumi-language-python-exec" "$1/"
    install -m 0755 "$sdk/python/dist/pulumi-resource-pulumi-python" "$1/"
    "$1/pulumi-language-python" -version
}
# The engine looks for the Python language host next to the pulumi binary (upstream bundles it
# there) and on PATH; links beside pulumi make both the same file, so it doesn't warn.
link_langhost() {
    local cli="$TOOLS/pulumi-$PULUMI_VERSION" host="$TOOLS/pulumi-language-python-$(langhost_version)"
    [[ -f "$cli/.complete" && -f "$host/.complete" ]] || return 0
    local f
    for f in pulumi-language-python pulumi-language-python-exec pulumi-resource-pulumi-python; do
        ln -sfn "$host/$f" "$cli/$f"
    done
}

# --- pulumi-resource-kubernetes: its command embeds files its generate.go writes, and the module
# cache is read-only, so the command is copied beside our go.mod/go.sum and built there.
build_k8s_provider() {
    local work="$TOOLS/.work/pulumi-resource-kubernetes"
    rm -rf "$work" && mkdir -p "$work"
    cp "$MODULES/pulumi-resource-kubernetes/go.mod" "$MODULES/pulumi-resource-kubernetes/go.sum" "$work/"
    cd "$work"
    local mod="github.com/pulumi/pulumi-kubernetes/provider/v4" dir
    go mod download "$mod"
    dir="$(go list -m -f '{{.Dir}}' "$mod")"
    cp "$dir/cmd/pulumi-resource-kubernetes/"{main.go,generate.go,schema.json,terraform-mapping.json} .
    chmod u+w ./*
    VERSION="$K8S_PROVIDER_VERSION" "${NICE[@]}" go run -p "$JOBS" ./generate.go
    "${NICE[@]}" go build -p "$JOBS" -o "$1/pulumi-resource-kubernetes" \
        -ldflags "-X $mod/pkg/version.Version=$K8S_PROVIDER_VERSION" .
    echo "provider/v4 $K8S_PROVIDER_MODULE_VERSION as $K8S_PROVIDER_VERSION" >"$1/VERSION"
}

# --- pulumi-resource-random: our stand-in, put on PATH (the engine runs a provider plugin it finds
# there), which is also how pulumi-resource-kubernetes is found.
random_provider_version() {  # the stand-in's directory changes with its source
    local sum
    sum="$(cat "$MODULES/pulumi-resource-random/go.mod" "$MODULES/pulumi-resource-random/go.sum" \
        "$MODULES"/pulumi-resource-random/*.go | sha256sum | cut -c1-12)"
    echo "$RANDOM_PROVIDER_VERSION+standin.$sum"
}
build_random_provider() {
    cd "$MODULES/pulumi-resource-random"
    "${NICE[@]}" go build -p "$JOBS" -o "$1/pulumi-resource-random" \
        -ldflags "-X main.version=$(random_provider_version)" .
    "$1/pulumi-resource-random" -version
}

# --- kube-apiserver, kube-controller-manager, kube-scheduler, with the version stamps
# Kubernetes' own build (hack/lib/version.sh) sets; the commit isn't known from the proxy.
build_kubernetes() {
    cd "$MODULES/kubernetes"
    local v="v$KUBERNETES_VERSION" major minor date ldflags="" pkg
    major="${KUBERNETES_VERSION%%.*}"; minor="${KUBERNETES_VERSION#*.}"; minor="${minor%%.*}"
    date="$(go list -m -f '{{.Time.UTC.Format "2006-01-02T15:04:05Z"}}' k8s.io/kubernetes)"
    for pkg in k8s.io/client-go/pkg/version k8s.io/component-base/version; do
        ldflags+=" -X $pkg.gitVersion=$v -X $pkg.gitMajor=$major -X $pkg.gitMinor=$minor"
        ldflags+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=$date"
    done
    local cmd
    for cmd in kube-apiserver kube-controller-manager kube-scheduler; do
        "${NICE[@]}" go build -p "$JOBS" -o "$1/$cmd" -ldflags "$ldflags" "k8s.io/kubernetes/cmd/$cmd"
        "$1/$cmd" --version
    done
}

# --- etcd: Debian's package (3.4 on bookworm), installed when missing and we are root.
etcd_step() {
    local have
    if ! command -v etcd >/dev/null && [[ $(id -u) == 0 ]] && command -v apt-get >/dev/null; then
        start=$(date +%s)
        if ! DEBIAN_FRONTEND=noninteractive apt-get install -y -q etcd-server >"$LOGS/etcd.log" 2>&1; then
            apt-get update -q >>"$LOGS/etcd.log" 2>&1 || true
            DEBIAN_FRONTEND=noninteractive apt-get install -y -q etcd-server >>"$LOGS/etcd.log" 2>&1 || true
        fi
        printf '%-28s %-36s apt-get install took %d s\n' etcd "" "$(($(date +%s) - start))"
    fi
    if command -v etcd >/dev/null; then
        have="$(etcd --version 2>/dev/null | sed -n 's/^etcd Version: //p')"
        printf '%-28s %-36s present: %s (Debian etcd-server)\n' etcd "$have" "$(command -v etcd)"
    else
        printf '%-28s %-36s NOT INSTALLED: %s\n' etcd "" \
            "no etcd on PATH and apt-get install etcd-server was not possible (needs root and apt; see $LOGS/etcd.log)"
        failed+=(etcd)
    fi
}

want=("$@")
[[ ${#want[@]} -gt 0 ]] || want=(pulumi pulumi-language-python pulumi-resource-kubernetes pulumi-resource-random
                                 kubernetes etcd)
for tool in "${want[@]}"; do
    case "$tool" in
        pulumi) build pulumi "$PULUMI_VERSION" build_pulumi ;;
        pulumi-language-python) build pulumi-language-python "$(langhost_version)" build_langhost ;;
        pulumi-resource-kubernetes) build pulumi-resource-kubernetes "$K8S_PROVIDER_VERSION" build_k8s_provider ;;
        pulumi-resource-random) build pulumi-resource-random "$(random_provider_version)" build_random_provider ;;
        kubernetes) build kubernetes "$KUBERNETES_VERSION" build_kubernetes ;;
        etcd) etcd_step ;;
        *) echo "unknown tool: $tool" >&2; exit 2 ;;
    esac
done
link_langhost

cat <<EOF

PATH for these tools:
  export PATH="$TOOLS/pulumi-$PULUMI_VERSION:$TOOLS/pulumi-resource-kubernetes-$K8S_PROVIDER_VERSION:$TOOLS/pulumi-resource-random-$(random_provider_version):$TOOLS/kubernetes-$KUBERNETES_VERSION:\$PATH"
EOF
if [[ ${#failed[@]} -gt 0 ]]; then
    echo "not built: ${failed[*]}" >&2
    exit 1
fi
