#!/usr/bin/env bash
# Drives qrun through containerd (ctr), Docker and Podman as a user would
# and prints PASS/FAIL per step (with the first error line of a failure).
# Not part of `make test`: needs root, /dev/kvm, and containerd, docker.io
# and podman installed (Debian: apt-get install -y containerd docker.io
# podman). A tool that is missing is reported as SKIP.
#
#   scripts/ecosystem-check.sh [path/to/qrun]     (default target/release/qrun)
#
# It starts its own containerd (private root and socket) and, when no
# dockerd runs, its own dockerd (Docker's default roots, a config file of
# its own registering the `qrun` runtime); it stops what it started.
# Images are imported from a busybox-static rootfs: no registry is used.
set -uo pipefail
cd "$(dirname "$0")/.."
Q=$(realpath "${1:-target/release/qrun}")
[ -x "$Q" ] || { echo "no qrun binary at $Q (cargo build --release)"; exit 2; }
[ -x /bin/busybox ] || { echo "needs /bin/busybox (busybox-static)"; exit 2; }

W=$(mktemp -d /tmp/qrun-eco.XXXXXX)
PASS=0 FAIL=0 SKIP=0
TAG="$$"
STARTED_PIDS=()

cleanup() {
    docker rm -f "eco-d1-$TAG" "eco-d2-$TAG" >/dev/null 2>&1
    podman rm -f "eco-p1-$TAG" >/dev/null 2>&1
    for p in "${STARTED_PIDS[@]}"; do kill "$p" 2>/dev/null; done
    for p in "${STARTED_PIDS[@]}"; do wait "$p" 2>/dev/null; done
    rm -rf "$W"
}
trap cleanup EXIT

# step NAME EXPECTED-OUTPUT-REGEX CMD...: runs CMD (60 s at most); passes
# when it exits 0 and its stdout matches the regex ('' matches anything).
step() {
    local name=$1 want=$2
    shift 2
    local out
    out=$(timeout 60 "$@" 2>"$W/err")
    local rc=$?
    if [ $rc -eq 0 ] && [[ -z "$want" || "$out" =~ $want ]]; then
        printf 'PASS  %s\n' "$name"
        PASS=$((PASS + 1))
    else
        local why
        why=$(grep -v '^\s*$' "$W/err" | head -1)
        [ -n "$why" ] || why="exit $rc, output: $(echo "$out" | head -1)"
        printf 'FAIL  %s: %s\n' "$name" "$why"
        FAIL=$((FAIL + 1))
    fi
}

# status NAME WANT-CODE CMD...: passes when CMD exits with WANT-CODE.
status() {
    local name=$1 want=$2
    shift 2
    timeout 60 "$@" >/dev/null 2>"$W/err"
    local rc=$?
    if [ $rc -eq "$want" ]; then
        printf 'PASS  %s\n' "$name"
        PASS=$((PASS + 1))
    else
        printf 'FAIL  %s: exit %s, wanted %s: %s\n' "$name" $rc "$want" "$(head -1 "$W/err")"
        FAIL=$((FAIL + 1))
    fi
}

skip() {
    printf 'SKIP  %s\n' "$1"
    SKIP=$((SKIP + 1))
}

# The image: busybox-static and its applets, plus a page to serve.
R="$W/rootfs"
mkdir -p "$R/bin" "$R/www"
cp /bin/busybox "$R/bin/busybox"
for a in sh sleep echo cat ls id true httpd; do ln -s busybox "$R/bin/$a"; done
echo "served by qrun" >"$R/www/index.html"
tar -C "$R" -cf "$W/rootfs.tar" .

# ---- containerd (ctr) ----
echo "== containerd $(containerd --version 2>/dev/null | awk '{print $3}')"
if command -v containerd >/dev/null && command -v ctr >/dev/null; then
    C="$W/containerd"
    mkdir -p "$C"
    cat >"$C/config.toml" <<EOF
version = 2
root = "$C/root"
state = "$C/state"
disabled_plugins = ["io.containerd.grpc.v1.cri"]
[grpc]
  address = "$C/c.sock"
[ttrpc]
  address = "$C/c.sock.ttrpc"
[debug]
  address = "$C/debug.sock"
EOF
    containerd --config "$C/config.toml" >"$C/log" 2>&1 &
    STARTED_PIDS+=($!)
    for _ in $(seq 100); do ctr --address "$C/c.sock" version >/dev/null 2>&1 && break; sleep 0.1; done
    ctr_=(ctr --address "$C/c.sock")
    id="eco-c-$TAG"
    step "ctr run (foreground)" '^hello$' "${ctr_[@]}" run --rm --runc-binary "$Q" --rootfs "$R" "$id-0" /bin/echo hello
    step "ctr run -d" '' "${ctr_[@]}" run -d --runc-binary "$Q" --rootfs "$R" "$id" /bin/sleep 300
    step "ctr task exec" '^from exec$' "${ctr_[@]}" task exec --exec-id x1 "$id" /bin/echo from exec
    status "ctr task exec exit status 3" 3 "${ctr_[@]}" task exec --exec-id x2 "$id" /bin/sh -c 'exit 3'
    step "ctr task exec stdin" '^piped$' sh -c "echo piped | ctr --address '$C/c.sock' task exec --exec-id x3 '$id' /bin/cat"
    step "ctr task pause" '' "${ctr_[@]}" task pause "$id"
    step "ctr task ls shows PAUSED" 'PAUSED' "${ctr_[@]}" task ls
    step "ctr task resume" '' "${ctr_[@]}" task resume "$id"
    step "ctr task kill SIGSTOP (hibernate)" '' "${ctr_[@]}" task kill --signal SIGSTOP "$id"
    step "qrun state: hibernated" '"qrun.hibernation": "hibernated"' "$Q" --root /run/containerd/runc/default state "$id"
    step "ctr task exec wakes it" '^awake$' "${ctr_[@]}" task exec --exec-id x4 "$id" /bin/echo awake
    step "ctr task kill SIGKILL" '' "${ctr_[@]}" task kill --signal SIGKILL "$id"
    sleep 1
    step "ctr task ls shows STOPPED" "$id +[0-9]+ +STOPPED" "${ctr_[@]}" task ls
    step "ctr task delete" '' "${ctr_[@]}" task delete "$id"
    step "ctr container rm" '' "${ctr_[@]}" container rm "$id"
else
    skip "containerd/ctr not installed"
fi

# ---- Docker ----
echo "== docker"
if command -v dockerd >/dev/null && command -v docker >/dev/null; then
    if ! docker info >/dev/null 2>&1; then
        cat >"$W/daemon.json" <<EOF
{ "runtimes": { "qrun": { "path": "$Q" } } }
EOF
        dockerd --config-file "$W/daemon.json" >"$W/dockerd.log" 2>&1 &
        STARTED_PIDS+=($!)
        for _ in $(seq 200); do docker info >/dev/null 2>&1 && break; sleep 0.1; done
    fi
    if [[ "$(docker info 2>/dev/null)" =~ Runtimes:[^$'\n']*qrun ]]; then
        img="qrun-eco:$TAG"
        step "docker import" '' docker import "$W/rootfs.tar" "$img"
        step "docker run --runtime qrun" '^hello$' docker run --rm --runtime qrun "$img" /bin/echo hello
        d1="eco-d1-$TAG"
        step "docker run -d" '' docker run -d --name "$d1" --runtime qrun "$img" /bin/sleep 300
        step "docker exec" '^from exec$' docker exec "$d1" /bin/echo from exec
        status "docker exec exit status 4" 4 docker exec "$d1" /bin/sh -c 'exit 4'
        step "docker exec -i (stdin)" '^piped$' sh -c "echo piped | docker exec -i '$d1' /bin/cat"
        step "docker top" 'sandbox-init' docker top "$d1"
        step "docker pause" '' docker pause "$d1"
        step "docker unpause" '' docker unpause "$d1"
        step "docker kill -s SIGSTOP (hibernate)" '' docker kill -s SIGSTOP "$d1"
        cid=$(docker inspect -f '{{.Id}}' "$d1")
        step "qrun state: hibernated" '"qrun.hibernation": "hibernated"' "$Q" --root /run/docker/runtime-runc/moby state "$cid"
        step "docker exec wakes it" '^awake$' docker exec "$d1" /bin/echo awake
        # runc: `sleep` as pid 1 ignores SIGTERM (no handler), so stop
        # waits -t seconds and SIGKILLs: exit 137.
        step "docker stop -t 2" '' docker stop -t 2 "$d1"
        step "docker stop exit code as runc (137)" '^137$' docker inspect -f '{{.State.ExitCode}}' "$d1"
        step "docker rm" '' docker rm "$d1"
        d2="eco-d2-$TAG"
        step "docker run -p 18089:80 (httpd)" '' docker run -d --name "$d2" --runtime qrun -p 18089:80 "$img" /bin/httpd -f -p 80 -h /www
        sleep 1
        step "curl the published port" 'served by qrun' curl -s -m 10 http://127.0.0.1:18089/index.html
        step "docker kill -s SIGSTOP the server" '' docker kill -s SIGSTOP "$d2"
        step "a connection wakes it" 'served by qrun' curl -s -m 10 http://127.0.0.1:18089/index.html
        step "docker rm -f" '' docker rm -f "$d2"
        docker rmi "$img" >/dev/null 2>&1
    else
        skip "docker: no dockerd with a 'qrun' runtime (a dockerd already runs without it?)"
    fi
else
    skip "docker.io not installed"
fi

# ---- Podman ----
echo "== podman $(podman --version 2>/dev/null | awk '{print $3}')"
if command -v podman >/dev/null; then
    P=(podman --runtime "$Q")
    img="localhost/qrun-eco:$TAG"
    step "podman import" '' podman import "$W/rootfs.tar" "$img"
    step "podman run" '^hello$' "${P[@]}" run --rm "$img" /bin/echo hello
    p1="eco-p1-$TAG"
    step "podman run -d" '' "${P[@]}" run -d --name "$p1" "$img" /bin/sleep 300
    step "podman exec" '^from exec$' "${P[@]}" exec "$p1" /bin/echo from exec
    status "podman exec exit status 5" 5 "${P[@]}" exec "$p1" /bin/sh -c 'exit 5'
    step "podman exec -i (stdin)" '^piped$' sh -c "echo piped | podman --runtime '$Q' exec -i '$p1' /bin/cat"
    step "podman pause" '' "${P[@]}" pause "$p1"
    step "podman unpause" '' "${P[@]}" unpause "$p1"
    step "podman kill -s SIGSTOP (hibernate)" '' "${P[@]}" kill -s SIGSTOP "$p1"
    step "podman exec wakes it" '^awake$' "${P[@]}" exec "$p1" /bin/echo awake
    step "podman stop -t 2" '' "${P[@]}" stop -t 2 "$p1"
    step "podman stop exit code as runc (137)" '^137$' podman inspect -f '{{.State.ExitCode}}' "$p1"
    step "podman rm" '' "${P[@]}" rm "$p1"
    podman rmi "$img" >/dev/null 2>&1
else
    skip "podman not installed"
fi

echo "== $PASS passed, $FAIL failed, $SKIP skipped"
[ "$FAIL" -eq 0 ]
