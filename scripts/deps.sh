#!/usr/bin/env bash
# Installs what building and testing need on a fresh Debian machine:
# musl-gcc (test apps), gcc and libc6-dev (the dynamically linked test
# apps), busybox-static (compat tests), curl (HTTP server
# test), wrk (HTTP benchmark), containerd and runc (the OCI tests and the
# bench's baseline; crun where it runs), nsenter (util-linux), python3 (the
# demo edits config.json with it), nodejs, go and a JDK (runtimes.rs), make
# (processes.rs builds a C project in the sandbox), the CNI plugins
# (critest's pod networks), the Rust toolchain and targets pinned by
# rust-toolchain.toml, and cri-tools' crictl and critest (cri.rs, make
# oci-validate; built once from their Go module into ~/.cache/qrun-cri,
# a few minutes the first time).
set -euo pipefail
cd "$(dirname "$0")/.."

need=()
command -v musl-gcc >/dev/null || need+=(musl-tools)
command -v gcc >/dev/null || need+=(gcc)
[ -e /usr/include/stdio.h ] || need+=(libc6-dev)
[ -x /bin/busybox ] || need+=(busybox-static)
command -v curl >/dev/null || need+=(curl)
command -v wrk >/dev/null || need+=(wrk)
command -v containerd >/dev/null || need+=(containerd)
command -v runc >/dev/null || need+=(runc)
command -v crun >/dev/null || need+=(crun)
command -v nsenter >/dev/null || need+=(util-linux)
command -v python3 >/dev/null || need+=(python3)
# FunctionBench's PNG charts (scripts/functionbench-charts.py, run by Debian's python3).
/usr/bin/python3 -c "import matplotlib" 2>/dev/null || need+=(python3-matplotlib)
command -v node >/dev/null || need+=(nodejs)
command -v go >/dev/null || need+=(golang-go)
command -v javac >/dev/null || need+=(openjdk-17-jdk-headless)
command -v make >/dev/null || need+=(make)
[ -x /usr/lib/cni/bridge ] || need+=(containernetworking-plugins)
if [ ${#need[@]} -gt 0 ]; then
    SUDO=""
    [ "$(id -u)" -eq 0 ] || SUDO=sudo
    echo "deps: installing ${need[*]}"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need[@]}" >/dev/null
fi
# rustup reads rust-toolchain.toml and installs the pinned toolchain,
# components and targets on first use; make it happen now.
rustup show active-toolchain >/dev/null
rustup target add x86_64-unknown-none x86_64-unknown-linux-musl >/dev/null 2>&1 || true
# crictl and critest (cached after the first build; no-op then). They
# need go 1.22 or newer; without them only cri.rs and oci-validate fail.
scripts/cri-tools.sh >/dev/null || echo "deps: crictl/critest not built (see above)" >&2
