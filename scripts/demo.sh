#!/usr/bin/env bash
# The bundled example: the HTTP function server (test-apps/c/http_server.c)
# as an OCI container run by qrun the way containerd would (create, start,
# kill, state, delete), with a 64 MiB heap. It is hibernated with
# `qrun kill <id> SIGSTOP` and woken by the next client connection (first by
# page faults, then by one REAP prefetch) and by `qrun kill <id> SIGCONT`.
# Each step prints the request latency and the sandbox process's PSS.
set -euo pipefail
cd "$(dirname "$0")/.."
QRUN=$PWD/target/release/qrun
APPS=$(ls -td target/release/build/test-apps-*/out/bin | head -1)
PORT=${DEMO_PORT:-$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')}
ID=demo-fn-$$
if [ ! -r /dev/kvm ]; then
    echo "demo: /dev/kvm is not available on this machine" >&2
    exit 1
fi
WORK=$(mktemp -d /tmp/qrun-demo.XXXXXX)
ROOT=$WORK/state
B=$WORK/bundle
q() { "$QRUN" --root "$ROOT" "$@"; }
cleanup() {
    q delete --force "$ID" >/dev/null 2>&1 || true
    rm -rf "$WORK"
}
trap cleanup EXIT

echo "== a bundle: rootfs with http_server; config.json from 'qrun spec'"
mkdir -p "$B/rootfs"
cp "$APPS/http_server" "$B/rootfs/"
"$QRUN" spec --bundle "$B"
# The function listens on the host's loopback (no network namespace), with
# the default guest memory.
python3 - "$B/config.json" "$PORT" <<'EOF'
import json, sys
path, port = sys.argv[1], sys.argv[2]
c = json.load(open(path))
c["process"]["args"] = ["/http_server", "--port", port]
c["process"]["terminal"] = False
c["linux"]["namespaces"] = [n for n in c["linux"]["namespaces"] if n["type"] != "network"]
json.dump(c, open(path, "w"), indent=2)
EOF

q create --bundle "$B" "$ID" >"$WORK/out.log" 2>&1
t0=$(date +%s%N)
q start "$ID"
PID=$(q state "$ID" | python3 -c 'import json,sys; print(json.load(sys.stdin)["pid"])')
url="http://127.0.0.1:$PORT"
for _ in $(seq 200); do curl -s -o /dev/null "$url/" && break; sleep 0.01; done
echo "started $ID (pid $PID): first answer after $(( ($(date +%s%N) - t0) / 1000000 )) ms"

pss() { awk '/^Pss:/ {printf "%.1f MiB", $2 / 1024}' "/proc/$PID/smaps_rollup"; }
hib() { q state "$ID" | python3 -c 'import json,sys; print(json.load(sys.stdin)["annotations"].get("qrun.hibernation", "?"))'; }
req() { # label path
    local out
    out=$(curl -sS --noproxy '*' -w ' %{time_total}' "$url$2")
    printf '%-44s %-34s %8.1f ms   PSS %s\n' "$1" "$(echo "${out% *}" | tr -d '\n')" \
        "$(echo "${out##* }" | awk '{print $1 * 1000}')" "$(pss)"
}
stop() {
    local t0 t1
    t0=$(date +%s%N)
    q kill "$ID" SIGSTOP
    t1=$(date +%s%N)
    printf '%-44s %-34s %8.1f ms   PSS %s\n' "kill SIGSTOP (hibernate)" "state: $(hib)" \
        "$(echo "$(( t1 - t0 ))" | awk '{print $1 / 1e6}')" "$(pss)"
}

echo
req "fill a 64 MiB heap" "/fill?mb=64"
req "warm request (re-reads the 64 MiB)" /verify
stop
req "woken by the connection (page faults)" /verify
stop
req "woken by the connection (REAP prefetch)" /verify
stop
t0=$(date +%s%N)
q kill "$ID" SIGCONT
t1=$(date +%s%N)
printf '%-44s %-34s %8.1f ms   PSS %s\n' "kill SIGCONT (wake, REAP prefetch)" "state: $(hib)" \
    "$(echo "$(( t1 - t0 ))" | awk '{print $1 / 1e6}')" "$(pss)"
req "request after the wake" /verify
echo
q kill "$ID" SIGSTOP
# The guest drops its kernel pages once it waits again, a moment after the
# commit (the rows above read the PSS after a `qrun state`).
sleep 0.2
echo "hibernated PSS by mapping (the 5 largest; all: $(pss)):"
awk '/^[0-9a-f]+-/ {name=$6} /^Pss:/ {pss[name]+=$2} END {for (n in pss) printf "  %6.0f KiB  %s\n", pss[n], n}' "/proc/$PID/smaps" | sort -rn | head -5
status() { q state "$ID" | python3 -c 'import json,sys; print(json.load(sys.stdin)["status"])'; }
# The function installs no SIGTERM handler: as a container's pid 1 (init
# semantics, as under runc) it ignores SIGTERM; SIGKILL ends it, as
# `docker stop` does after its grace period.
q kill "$ID" SIGTERM
sleep 0.3
echo "after SIGTERM (no handler; pid 1 ignores it, as under runc): $(status)"
q kill "$ID" SIGKILL
for _ in $(seq 100); do [ "$(status)" = stopped ] && break; sleep 0.05; done
echo "after SIGKILL: $(status)"
q delete "$ID"
echo "deleted; no swap or REAP file is left: $(ls "$ROOT" | wc -l) entries under the runtime root"
