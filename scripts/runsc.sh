#!/usr/bin/env bash
# gVisor's `runsc` for the FunctionBench comparison (issue 19), built once
# from its Go module with CGO_ENABLED=0 into a cache directory and reused
# after.
#
#   scripts/runsc.sh     build if missing; print the runsc path
#
# The version is pinned (RUNSC_VERSION, a pseudo-version of the module
# gvisor.dev/gvisor as the Go module proxy serves it); the binary lands in
# $QRUN_FUNCTIONBENCH_CACHE/runsc/ (default ~/.cache/qrun-functionbench),
# with a stamp naming the version (a build that did not finish is redone).
# Needs `go` (1.24 or newer) on PATH. Building takes a few minutes.
set -euo pipefail

RUNSC_VERSION=${RUNSC_VERSION:-v0.0.0-20260905035102-160fafc42237}
CACHE=${QRUN_FUNCTIONBENCH_CACHE:-$HOME/.cache/qrun-functionbench}
DIR=$CACHE/runsc
BIN=$DIR/runsc
STAMP=$DIR/runsc.stamp
log() { echo "runsc.sh: $*" >&2; }

if [ -x "$BIN" ] && [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$RUNSC_VERSION" ]; then
    echo "$BIN"
    exit 0
fi
if ! command -v go >/dev/null; then
    for g in /usr/local/go/bin/go /usr/lib/go/bin/go; do
        [ -x "$g" ] && PATH=$(dirname "$g"):$PATH && break
    done
fi
if ! command -v go >/dev/null; then
    log "go is not installed: cannot build runsc"
    exit 1
fi
mkdir -p "$DIR"
rm -f "$STAMP" "$BIN"
log "building gvisor.dev/gvisor/runsc@$RUNSC_VERSION with $(go version | cut -d' ' -f3) (a few minutes)"
# Low priority: the machine is shared with builds.
if ! GOBIN=$DIR CGO_ENABLED=0 GOFLAGS=-buildvcs=false \
    nice -n 10 go install -ldflags=-s "gvisor.dev/gvisor/runsc@$RUNSC_VERSION" >"$DIR/build.log" 2>&1; then
    log "build failed; see $DIR/build.log:"
    tail -5 "$DIR/build.log" >&2
    exit 1
fi
echo "$RUNSC_VERSION" >"$STAMP"
log "built $BIN"
echo "$BIN"
