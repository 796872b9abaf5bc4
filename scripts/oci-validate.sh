#!/usr/bin/env bash
# Kubernetes' CRI validation suite (critest, cri-tools v1.30) through
# containerd's CRI with the `qrun` runtime handler and with `runc`, on the
# same images, then the OCI runtime-tools suite (scripts/runtime-tools.sh)
# against both. Prints and writes both pass counts. Not part of `make
# test` (slow; root, /dev/kvm, containerd, runc, the CNI plugins, go).
#
#   scripts/oci-validate.sh [QRUN_BINARY]     (make oci-validate)
#
# Env: SUITE=critest or SUITE=runtime-tools runs one suite (ONLY is
# runtime-tools.sh's: a list of its programs); CRITEST_ARGS adds
# critest/ginkgo options (e.g. --ginkgo.focus=...); CRITEST_TIMEOUT
# (seconds per handler, default 2400); HANDLERS="qrun" runs one handler.
#
# No registry is reachable here: scripts/cri-registry.py builds critest's
# images (busybox-static based, same for both handlers) and serves them as
# a mirror of registry.k8s.io and gcr.io. containerd (private root, state,
# sockets) runs with the CRI plugin, both handlers, a CNI bridge network of
# its own and pods' oom_score_adj clamped to its own (this machine refuses
# lower values; runc then fails every pod). Logs and the summary go to
# target/oci-validate/.
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
QRUN=$(realpath "${1:-target/release/qrun}")
WORK=$ROOT/target/oci-validate
SUITE=${SUITE:-}
die() {
    echo "oci-validate: $*" >&2
    exit 1
}
[ -x "$QRUN" ] || die "$QRUN not found: run 'cargo build --release' first"

critest_counts() { # log -> "passed ran"
    local ran passed
    ran=$(sed -n 's/.*Ran \([0-9]*\) of [0-9]* Specs.*/\1/p' "$1" | tail -1)
    passed=$(sed -n 's/.* \([0-9]*\) Passed | .*/\1/p' "$1" | tail -1)
    echo "${passed:-0} ${ran:-0}"
}

run_critest() {
    command -v containerd >/dev/null || die "containerd is not installed (scripts/deps.sh)"
    command -v runc >/dev/null || die "runc is not installed (scripts/deps.sh)"
    [ -x /usr/lib/cni/bridge ] || die "the CNI plugins are missing (containernetworking-plugins)"
    [ -r /dev/kvm ] || die "/dev/kvm is not available: qrun cannot run here"
    local tools pause
    tools=$(scripts/cri-tools.sh) || die "could not build critest (scripts/cri-tools.sh)"
    pause=$(ls -t target/release/build/test-apps-*/out/bin/pause 2>/dev/null | head -1)
    [ -x "$pause" ] || die "no pause test program: cargo build --release --workspace"

    local C=$WORK/containerd
    rm -rf "$C" "$WORK/registry" "$WORK"/critest-*
    mkdir -p "$C/cni" "$WORK"
    python3 scripts/cri-registry.py build "$WORK/registry" "$pause" || die "building the images failed"
    local port
    port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
    python3 scripts/cri-registry.py serve "$WORK/registry" "$port" 2>"$WORK/registry.log" &
    PIDS+=($!)

    cat >"$C/cni/10-qrun-validate.conflist" <<EOF
{"cniVersion": "1.0.0", "name": "qrun-validate", "plugins": [
  {"type": "bridge", "bridge": "qrunval0", "isGateway": true, "ipMasq": true,
   "hairpinMode": true,
   "ipam": {"type": "host-local", "routes": [{"dst": "0.0.0.0/0"}],
            "ranges": [[{"subnet": "10.213.0.0/16"}]]}},
  {"type": "portmap", "capabilities": {"portMappings": true}},
  {"type": "loopback"}]}
EOF
    local cri='plugins."io.containerd.grpc.v1.cri"'
    cat >"$C/config.toml" <<EOF
version = 2
root = "$C/root"
state = "$C/state"
[grpc]
  address = "$C/c.sock"
[ttrpc]
  address = "$C/c.sock.ttrpc"
[debug]
  address = "$C/debug.sock"
[$cri]
  sandbox_image = "registry.k8s.io/pause:3.6"
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  restrict_oom_score_adj = true
  [$cri.cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "$C/cni"
  [$cri.registry.mirrors."registry.k8s.io"]
    endpoint = ["http://127.0.0.1:$port"]
  [$cri.registry.mirrors."gcr.io"]
    endpoint = ["http://127.0.0.1:$port"]
  [$cri.containerd]
    default_runtime_name = "runc"
    [$cri.containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
    [$cri.containerd.runtimes.qrun]
      runtime_type = "io.containerd.runc.v2"
      [$cri.containerd.runtimes.qrun.options]
        BinaryName = "$QRUN"
EOF
    containerd --config "$C/config.toml" >"$C/containerd.log" 2>&1 &
    PIDS+=($!)
    local ep="unix://$C/c.sock"
    for _ in $(seq 100); do
        "$tools/crictl" --runtime-endpoint "$ep" --image-endpoint "$ep" version >/dev/null 2>&1 && break
        sleep 0.2
    done
    "$tools/crictl" --runtime-endpoint "$ep" version >/dev/null 2>&1 || die "containerd did not come up ($C/containerd.log)"

    local h
    for h in ${HANDLERS:-runc qrun}; do
        echo "== critest with the $h handler (log: $WORK/critest-$h.log)"
        (cd "$WORK" && timeout "${CRITEST_TIMEOUT:-2400}" "$tools/critest" \
            --runtime-endpoint "$ep" --image-endpoint "$ep" --runtime-handler "$h" \
            --ginkgo.no-color ${CRITEST_ARGS:-}) >"$WORK/critest-$h.log" 2>&1
        echo "   exit $?: $(grep -E '^(Ran |FAIL!|SUCCESS!)' "$WORK/critest-$h.log" | tr '\n' ' ')"
        grep -E '^\s*\[FAIL\]' "$WORK/critest-$h.log" | sed 's/^\s*/   /' >"$WORK/critest-$h.failed" || true
        # What a timed-out run left behind.
        "$tools/crictl" --runtime-endpoint "$ep" rmp --all --force >/dev/null 2>&1
    done
    {
        echo "critest $(date -u +%F) cri-tools $("$tools/crictl" --version | awk '{print $3}'), containerd $(containerd --version | awk '{print $3}')"
        for h in ${HANDLERS:-runc qrun}; do
            set -- $(critest_counts "$WORK/critest-$h.log")
            echo "$h: $1 of $2 specs passed"
        done
        for h in ${HANDLERS:-runc qrun}; do
            echo "failed under $h:"
            sed 's/^/  /' "$WORK/critest-$h.failed"
        done
    } | tee "$WORK/critest-summary.txt"
}

PIDS=()
cleanup() {
    for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null; done
    for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null; done
}
trap cleanup EXIT

status=0
if [ "$SUITE" != runtime-tools ]; then
    run_critest || status=1
fi
if [ "$SUITE" != critest ]; then
    scripts/runtime-tools.sh "$QRUN" || status=1
fi
exit $status
