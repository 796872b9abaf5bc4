#!/usr/bin/env bash
# cri-tools' `crictl` and `critest` (issue 17), built once from their Go
# module and reused after.
#
#   scripts/cri-tools.sh     build if missing; print the directory holding
#                            crictl and critest
#
# The version is pinned (CRI_TOOLS_VERSION; v1.30 speaks the CRI v1 API
# that containerd 1.6 serves). Its go.mod has `replace` directives (the
# Kubernetes staging modules), which `go install pkg@version` refuses, and
# the module zip lacks vendor/: a copy of the module is built as the main
# module, its dependencies fetched by `go mod download` (from the Go module
# proxy, or from GOMODCACHE with no network when they are there already).
# critest is a `go test -c` binary, as in cri-tools' Makefile. The binaries land in $QRUN_CRI_CACHE (default
# ~/.cache/qrun-cri) with a stamp naming the version (a build that did not
# finish is redone). Needs `go` (1.22 or newer). Takes a few minutes.
set -euo pipefail

VERSION=${CRI_TOOLS_VERSION:-v1.30.0}
CACHE=${QRUN_CRI_CACHE:-$HOME/.cache/qrun-cri}
DIR=$CACHE/$VERSION
STAMP=$DIR/stamp
log() { echo "cri-tools.sh: $*" >&2; }

if [ -x "$DIR/crictl" ] && [ -x "$DIR/critest" ] && [ -f "$STAMP" ] &&
    [ "$(cat "$STAMP")" = "$VERSION" ]; then
    echo "$DIR"
    exit 0
fi
if ! command -v go >/dev/null; then
    for g in /usr/local/go/bin/go /usr/lib/go/bin/go; do
        [ -x "$g" ] && PATH=$(dirname "$g"):$PATH && break
    done
fi
if ! command -v go >/dev/null; then
    log "go is not installed: cannot build cri-tools (scripts/deps.sh installs it)"
    exit 1
fi
mkdir -p "$DIR"
rm -f "$STAMP" "$DIR/crictl" "$DIR/critest"
# The module is published under its vanity path; its go.mod names the
# GitHub path, which is what the ldflags below refer to.
SRC=$(cd "$DIR" && GOFLAGS=-mod=mod go mod download -json "sigs.k8s.io/cri-tools@$VERSION" 2>"$DIR/fetch.err" |
    sed -n 's/^\t"Dir": "\(.*\)",$/\1/p') || true
if [ -z "$SRC" ] || [ ! -f "$SRC/go.mod" ]; then
    cat "$DIR/fetch.err" >&2 || true
    log "could not fetch sigs.k8s.io/cri-tools@$VERSION (no Go module proxy and not in GOMODCACHE?)"
    exit 1
fi
BUILD=$DIR/src
rm -rf "$BUILD"
cp -r "$SRC" "$BUILD"
chmod -R u+w "$BUILD"
PROJECT=github.com/kubernetes-sigs/cri-tools
LDFLAGS="-s -X $PROJECT/pkg/version.Version=${VERSION#v}"
if ! (cd "$BUILD" && GOFLAGS=-mod=mod GOTOOLCHAIN=local go mod download) >"$DIR/build.log" 2>&1; then
    tail -5 "$DIR/build.log" >&2
    log "could not fetch cri-tools' dependencies (no Go module proxy?)"
    exit 1
fi
log "building crictl and critest $VERSION with $(go version | cut -d' ' -f3) (a few minutes)"
# Low priority: the machine is shared with builds.
if ! (cd "$BUILD" &&
    CGO_ENABLED=0 GOFLAGS="-buildvcs=false -trimpath" GOTOOLCHAIN=local \
        nice -n 10 go build -mod=mod -ldflags "$LDFLAGS" -o "$DIR/crictl" ./cmd/crictl &&
    CGO_ENABLED=0 GOFLAGS="-buildvcs=false -trimpath" GOTOOLCHAIN=local \
        nice -n 10 go test -mod=mod -c -ldflags "$LDFLAGS" -o "$DIR/critest" ./cmd/critest) \
    >>"$DIR/build.log" 2>&1; then
    log "build failed; see $DIR/build.log:"
    tail -5 "$DIR/build.log" >&2
    exit 1
fi
rm -rf "$BUILD"
echo "$VERSION" >"$STAMP"
log "built $DIR/crictl and $DIR/critest"
echo "$DIR"
