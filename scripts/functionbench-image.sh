#!/usr/bin/env bash
# The FunctionBench image (issue 19): a Debian bookworm rootfs built offline
# once into a cache directory and reused after, shared read-only by every
# workload bundle of `make functionbench`.
#
#   scripts/functionbench-image.sh     build if missing; print the rootfs path
#
# What it holds: `debootstrap --variant=minbase bookworm` from the Debian
# mirror apt uses (/etc/apt/sources.list*), python3 and python3-pip, then
# CPython 3.11 wheels from PyPI (pyaes: its pure-Python sdist): Pillow, numpy, pyaes, chameleon and
# opencv-python-headless (left out, and recorded so, if it fails to
# install). Inputs are generated inside the image with Pillow (and OpenCV):
# /data/small.jpg (640x480), /data/large.jpg (2640x1760), /data/video.avi
# (MJPG, a few seconds). /functionbench is an empty mount point for the
# workload scripts (a read-only bind from the repository).
#
# Then the other languages' hello servers (a second layer, added to an
# existing rootfs without rebuilding it): Debian's nodejs and
# openjdk-17-jre-headless (apt in the chroot), a static Go binary built on
# the host with CGO_ENABLED=0 from functionbench/hello_go (standard library
# only) at /opt/functionbench/hello_go, and functionbench/Hello.java
# compiled with the host's javac (--release 17) into /opt/functionbench/java.
#
# The cache is $QRUN_FUNCTIONBENCH_CACHE (default ~/.cache/qrun-functionbench):
# rootfs/ and rootfs.stamp (written last: a build that did not finish is
# redone; the second layer appends its `extras` lines to it when done).
set -euo pipefail

VERSION=1
CACHE=${QRUN_FUNCTIONBENCH_CACHE:-$HOME/.cache/qrun-functionbench}
ROOTFS=$CACHE/rootfs
STAMP=$CACHE/rootfs.stamp
PIP_PACKAGES=(Pillow numpy pyaes chameleon)
log() { echo "functionbench-image: $*" >&2; }

command -v go >/dev/null || { [ -x /usr/local/go/bin/go ] && PATH=/usr/local/go/bin:$PATH; }
SRC=$(cd "$(dirname "$0")/.." && pwd)/functionbench
EXTRAS_VERSION=1

base_done() {
    [ -f "$STAMP" ] && [ "$(sed -n 1p "$STAMP")" = "version $VERSION" ] && [ -x "$ROOTFS/usr/bin/python3" ]
}
extras_done() {
    grep -qx "extras $EXTRAS_VERSION" "$STAMP" 2>/dev/null
}

# The second layer: Node.js, a JRE, the Go and Java hello servers. Each
# part that fails is recorded in the stamp with its reason; the bench
# reports those workloads as not built.
extras() {
    local r=$ROOTFS out=$ROOTFS/opt/functionbench lines=() m=()
    mkdir -p "$out/java"
    log "extras: nodejs, openjdk-17-jre-headless (apt in the chroot)"
    mount -t proc proc "$r/proc" && m+=("$r/proc")
    cp /etc/resolv.conf "$r/etc/resolv.conf"
    if timeout 1200 chroot "$r" sh -c 'apt-get update && DEBIAN_FRONTEND=noninteractive \
        apt-get install -y --no-install-recommends nodejs openjdk-17-jre-headless' \
        >"$CACHE/apt-extras.log" 2>&1; then
        lines+=("node $(chroot "$r" node --version 2>&1 | head -1)")
        lines+=("java $(chroot "$r" java -version 2>&1 | head -1)")
    else
        log "apt in the chroot failed; see $CACHE/apt-extras.log"
        lines+=("node not installed: apt failed")
        lines+=("java not installed: apt failed")
    fi
    rm -rf "$r/var/cache/apt/archives/"*.deb "$r/var/lib/apt/lists/"*
    for x in "${m[@]}"; do umount "$x" || umount -l "$x"; done
    log "extras: hello_go (CGO_ENABLED=0), Hello.class"
    if command -v go >/dev/null &&
        (cd "$SRC/hello_go" && CGO_ENABLED=0 GOFLAGS=-buildvcs=false go build -trimpath \
            -ldflags=-s -o "$out/hello_go" .) >"$CACHE/go-extras.log" 2>&1; then
        lines+=("go $(go version | cut -d' ' -f3) static")
    else
        lines+=("go not built: $(command -v go >/dev/null && grep -m1 . "$CACHE/go-extras.log" || echo 'no go on the host')")
    fi
    if command -v javac >/dev/null &&
        javac --release 17 -d "$out/java" "$SRC/Hello.java" >"$CACHE/javac-extras.log" 2>&1; then
        lines+=("javaclass Hello (javac --release 17)")
    else
        lines+=("javaclass not built: $(command -v javac >/dev/null && grep -m1 . "$CACHE/javac-extras.log" || echo 'no javac on the host')")
    fi
    grep -v '^not built yet:' "$STAMP" | sed '/^size /d' >"$STAMP.tmp"
    printf '%s\n' "${lines[@]}" >>"$STAMP.tmp"
    echo "size $(du -sm "$ROOTFS" | cut -f1) MiB" >>"$STAMP.tmp"
    echo "extras $EXTRAS_VERSION" >>"$STAMP.tmp"
    mv "$STAMP.tmp" "$STAMP"
}

if base_done && extras_done; then
    echo "$ROOTFS"
    exit 0
fi
if [ "$(id -u)" != 0 ]; then
    log "building the image needs root (debootstrap, chroot)"
    exit 1
fi
if base_done; then
    extras
    log "done: extras"
    echo "$ROOTFS"
    exit 0
fi
if ! command -v debootstrap >/dev/null; then
    log "installing debootstrap"
    apt-get install -y debootstrap >/dev/null
fi

# The mirror apt uses: the first URIs: (deb822) or deb line naming a debian archive.
mirror() {
    local m
    m=$(grep -hE '^URIs:' /etc/apt/sources.list.d/*.sources 2>/dev/null | awk '{print $2}' |
        grep -v -- '-security' | grep -i debian | head -1 || true)
    if [ -z "$m" ]; then
        m=$(grep -hE '^deb ' /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null |
            awk '{print $2}' | grep -v -- '-security' | grep -i debian | head -1 || true)
    fi
    echo "${m:-http://deb.debian.org/debian}"
}

mkdir -p "$CACHE"
BUILD=$CACHE/rootfs.build
MOUNTED=()
cleanup() {
    for m in "${MOUNTED[@]}"; do umount -l "$m" 2>/dev/null || true; done
}
trap cleanup EXIT
rm -f "$STAMP"
MIRROR=$(mirror)
# A finished debootstrap is kept for a build that failed later (pip).
if [ ! -f "$BUILD/.debootstrap-done" ]; then
    rm -rf "$BUILD"
    log "debootstrap bookworm from $MIRROR into $BUILD"
    debootstrap --variant=minbase --include=python3,python3-pip,ca-certificates \
        bookworm "$BUILD" "$MIRROR" >"$CACHE/debootstrap.log" 2>&1 || {
        log "debootstrap failed; see $CACHE/debootstrap.log"
        tail -5 "$CACHE/debootstrap.log" >&2
        exit 1
    }
    touch "$BUILD/.debootstrap-done"
fi

mount -t proc proc "$BUILD/proc" && MOUNTED+=("$BUILD/proc")
cp /etc/resolv.conf "$BUILD/etc/resolv.conf"
# The host's CA bundle (it may hold a proxy's CA that the image lacks).
cp /etc/ssl/certs/ca-certificates.crt "$BUILD/tmp/host-ca.crt"
pipi() {
    timeout 900 chroot "$BUILD" env PIP_CERT=/tmp/host-ca.crt SSL_CERT_FILE=/tmp/host-ca.crt \
        REQUESTS_CA_BUNDLE=/tmp/host-ca.crt PIP_DISABLE_PIP_VERSION_CHECK=1 \
        python3 -m pip install --break-system-packages --no-cache-dir --prefer-binary "$@"
}
log "pip: ${PIP_PACKAGES[*]}"
pipi "${PIP_PACKAGES[@]}" >"$CACHE/pip.log" 2>&1 || {
    log "pip install failed; see $CACHE/pip.log"
    tail -5 "$CACHE/pip.log" >&2
    exit 1
}
OPENCV=installed
log "pip: opencv-python-headless (optional)"
if ! pipi opencv-python-headless >>"$CACHE/pip.log" 2>&1; then
    OPENCV="not installed: $(grep -m1 -iE 'error' "$CACHE/pip.log" || echo 'pip failed')"
    log "opencv-python-headless: $OPENCV"
fi

log "generating inputs"
mkdir -p "$BUILD/data" "$BUILD/functionbench"
chroot "$BUILD" python3 - <<'EOF'
import random
from PIL import Image, ImageDraw

def picture(w, h, seed):
    # A gradient with shapes and some noise: JPEG sizes like a photo's.
    rnd = random.Random(seed)
    img = Image.linear_gradient("L").resize((w, h)).convert("RGB")
    d = ImageDraw.Draw(img)
    for _ in range(400):
        x, y = rnd.randrange(w), rnd.randrange(h)
        r = rnd.randrange(4, max(5, w // 12))
        d.ellipse((x - r, y - r, x + r, y + r),
                  fill=(rnd.randrange(256), rnd.randrange(256), rnd.randrange(256)))
    noise = Image.effect_noise((w, h), 40).convert("RGB")
    return Image.blend(img, noise, 0.25)

picture(640, 480, 1).save("/data/small.jpg", quality=90)
picture(2640, 1760, 2).save("/data/large.jpg", quality=92)
EOF
if [ "$OPENCV" = installed ]; then
    chroot "$BUILD" env OPENCV_FOR_THREADS_NUM=1 python3 - <<'EOF' || OPENCV="installed, but making the video failed"
import cv2, numpy as np
w, h, fps, seconds = 640, 480, 25, 3
out = cv2.VideoWriter("/data/video.avi", cv2.VideoWriter_fourcc(*"MJPG"), fps, (w, h))
base = cv2.imread("/data/small.jpg")
for i in range(fps * seconds):
    out.write(np.roll(base, i * 8, axis=1))
out.release()
EOF
fi

umount "$BUILD/proc" && MOUNTED=()
rm -f "$BUILD/tmp/host-ca.crt" "$BUILD/.debootstrap-done"
rm -rf "$BUILD/var/cache/apt/archives/"*.deb "$BUILD/var/lib/apt/lists/"*
rm -rf "$ROOTFS"
mv "$BUILD" "$ROOTFS"
{
    echo "version $VERSION"
    echo "built $(date -u +%Y-%m-%dT%H:%M:%SZ) from $MIRROR"
    echo "python $(chroot "$ROOTFS" python3 -c 'import sys; print(sys.version.split()[0])')"
    chroot "$ROOTFS" python3 -m pip list --format=freeze 2>/dev/null |
        grep -iE '^(pillow|numpy|pyaes|chameleon|opencv-python-headless)==' | sed 's/^/pip /'
    echo "opencv $OPENCV"
    echo "size $(du -sm "$ROOTFS" | cut -f1) MiB"
} >"$STAMP.tmp"
mv "$STAMP.tmp" "$STAMP"
extras
log "done: $(sed -n 2p "$STAMP")"
echo "$ROOTFS"
