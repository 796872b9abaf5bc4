#!/usr/bin/env bash
# The OCI runtime-tools validation suite against qrun and runc, in one run.
#
# Fetches github.com/opencontainers/runtime-tools from the Go module proxy
# (GOPROXY as configured; Debian's package lacks the tests), builds
# cmd/runtimetest (static) and every validation/ program, runs each
# program once per runtime (RUNTIME=<binary>, as the suite expects) with a
# timeout, and prints per-test results and both pass counts. Results go
# to target/runtime-tools/results-<runtime>.txt; the TAP output of each
# test to target/runtime-tools/tap/<runtime>/<test>.tap.
#
# Usage: scripts/runtime-tools.sh [QRUN_BINARY]   (make oci-validate)
# Env: RUNTIME_TOOLS_VERSION, TEST_TIMEOUT (seconds per test, default 60),
#      ONLY="test1 test2" to run a subset.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
QRUN=$(realpath "${1:-target/release/qrun}")
VERSION=${RUNTIME_TOOLS_VERSION:-v0.9.1-0.20251114084447-edf4cb3d2116}
TIMEOUT=${TEST_TIMEOUT:-60}
WORK=$ROOT/target/runtime-tools
RUNC=$(command -v runc || true)

die() {
    echo >&2
    echo "************************************************************" >&2
    echo "runtime-tools: $*" >&2
    echo "************************************************************" >&2
    exit 1
}

[ -x "$QRUN" ] || die "$QRUN not found: run 'cargo build --release' first"
[ -n "$RUNC" ] || die "runc not installed (scripts/deps.sh installs it)"
command -v go >/dev/null || die "go is not installed"
[ -r /dev/kvm ] || die "/dev/kvm is not available: qrun cannot run here"

echo "== fetching github.com/opencontainers/runtime-tools@$VERSION (GOPROXY=$(go env GOPROXY))"
mkdir -p "$WORK"
if ! SRC=$(cd "$WORK" && GOFLAGS=-mod=mod go mod download -json \
    "github.com/opencontainers/runtime-tools@$VERSION" 2>"$WORK/fetch.err" |
    sed -n 's/^\t"Dir": "\(.*\)",$/\1/p') || [ -z "$SRC" ]; then
    cat "$WORK/fetch.err" >&2 || true
    die "could not fetch runtime-tools from the Go module proxy (network refused?); nothing was tested"
fi
echo "   $SRC"

BUILD=$WORK/src
if [ ! -x "$WORK/bin/runtimetest" ] || [ "$(cat "$WORK/bin/.version" 2>/dev/null)" != "$VERSION" ]; then
    echo "== building runtimetest and the validation programs"
    rm -rf "$BUILD" "$WORK/bin"
    cp -r "$SRC" "$BUILD"
    chmod -R u+w "$BUILD"
    mkdir -p "$WORK/bin"
    (cd "$BUILD" &&
        CGO_ENABLED=0 go build -mod=mod -tags "netgo osusergo" -o "$WORK/bin/runtimetest" ./cmd/runtimetest &&
        go build -mod=mod -o "$WORK/bin/" ./validation/...) ||
        die "building the suite failed"
    echo "$VERSION" >"$WORK/bin/.version"
fi
# The programs look for runtimetest and the rootfs tarball in their cwd.
cp "$BUILD/rootfs-amd64.tar.gz" "$WORK/bin/"

TESTS=${ONLY:-$(cd "$BUILD/validation" && for d in */; do d=${d%/}; [ "$d" = util ] || echo "$d"; done)}

run_suite() { # name binary
    local name=$1 bin=$2 out=$WORK/results-$1.txt pass=0 total=0 okn=0 alln=0
    mkdir -p "$WORK/tap/$name"
    : >"$out"
    for t in $TESTS; do
        [ -x "$WORK/bin/$t" ] || continue
        local tap=$WORK/tap/$name/$t.tap status=0
        (cd "$WORK/bin" && RUNTIME=$bin timeout "$TIMEOUT" "./$t") >"$tap" 2>&1 </dev/null || status=$?
        local ok notok
        ok=$(grep -c '^ok ' "$tap" || true)
        notok=$(grep -c '^not ok ' "$tap" || true)
        okn=$((okn + ok)); alln=$((alln + ok + notok))
        total=$((total + 1))
        if [ "$status" -eq 0 ] && [ "$notok" -eq 0 ] && [ "$ok" -gt 0 ]; then
            pass=$((pass + 1)); echo "PASS $t ($ok/$((ok + notok)))" >>"$out"
        else
            echo "FAIL $t ($ok/$((ok + notok)) assertions, exit $status)" >>"$out"
        fi
        # A failed test may leave containers behind; clear them.
        for id in $("$bin" list -q 2>/dev/null); do "$bin" delete --force "$id" >/dev/null 2>&1 || true; done
    done
    echo "$name $pass $total $okn $alln"
}

echo "== running $(echo $TESTS | wc -w) validation programs against qrun and runc (timeout ${TIMEOUT}s each)"
Q=$(run_suite qrun "$QRUN")
R=$(run_suite runc "$RUNC")
echo
paste "$WORK/results-qrun.txt" "$WORK/results-runc.txt" | awk -F'\t' '{printf "%-60s | %s\n", "qrun " $1, "runc " $2}'
echo
printf "%-6s %18s %22s\n" runtime "programs passed" "TAP assertions ok"
for line in "$Q" "$R"; do
    set -- $line
    printf "%-6s %12s / %-4s %14s / %-6s\n" "$1" "$2" "$3" "$4" "$5"
done
