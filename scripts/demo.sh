#!/usr/bin/env bash
# The bundled example: static programs started in fresh sandboxes through
# `qrun do`, each with its status, wall time and host-call count.
set -euo pipefail
cd "$(dirname "$0")/.."
QRUN=target/release/qrun
APPS=$(ls -d target/release/build/test-apps-*/out/bin | head -1)
if [ ! -r /dev/kvm ]; then
    echo "demo: /dev/kvm is not available on this machine" >&2
    exit 1
fi
echo "== hello, in a fresh sandbox (qrun do)"
$QRUN do --stats -- "$APPS/hello"
echo "== the same binary natively"
/usr/bin/time -f "native: %e s" "$APPS/hello"
echo "== a Rust program (static-PIE) with arguments and an env var"
$QRUN do --stats --env QTEST=demo -- "$APPS/rust-hello" one two
echo "== touching 64 MiB of anonymous memory"
$QRUN do --stats -- "$APPS/touch_mem" 64
echo "== a deliberate segfault: the status a shell reports"
set +e
$QRUN do -- "$APPS/segfault"
echo "exit status: $?"
