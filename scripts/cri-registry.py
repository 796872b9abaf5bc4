#!/usr/bin/env python3
"""A local, read-only image registry for critest with no network (issue 17).

critest pulls its images (registry.k8s.io/e2e-test-images/busybox, nginx,
gcr.io/k8s-staging-cri-tools/test-image-*) through the CRI; with no way to
the Internet, containerd's CRI is pointed at this registry as a mirror of
those hosts. Every image is built here from busybox-static (all applets)
plus, for the pod sandbox, the `pause` test program:

    cri-registry.py build DIR PAUSE_BINARY   writes DIR/blobs and DIR/tags.json
    cri-registry.py serve DIR PORT           serves them (HTTP, 127.0.0.1)

Images are two uncompressed layers (OCI media types): busybox, then a file
naming the image, so that no two names share an image unless critest
expects it (test-image-tags:1,2,3). Not rebuilt: e2e's nonewprivs image,
and applets Debian's busybox-static lacks (ipcs). The image pinned by
digest in critest (test-image-digest@sha256:9700...) cannot be rebuilt
byte for byte, so that pull fails under every runtime.
"""

import hashlib
import http.server
import io
import json
import os
import subprocess
import sys
import tarfile

E2E = "e2e-test-images/"
CRI = "k8s-staging-cri-tools/"
PASSWD = (
    "root:x:0:0:root:/root:/bin/sh\n"
    "www-data:x:33:33:www-data:/var/www:/bin/sh\n"
    "default-user:x:1000:1000:default-user:/home/default-user:/bin/sh\n"
    "nobody:x:65534:65534:nobody:/nonexistent:/bin/sh\n"
)
GROUP = (
    "root:x:0:\n"
    "www-data:x:33:\n"
    "default-user:x:1000:\n"
    "group-defined-in-image:x:50000:default-user\n"
    "nogroup:x:65534:\n"
)


def add_file(tar, name, data, mode=0o644):
    info = tarfile.TarInfo(name)
    info.size, info.mode, info.mtime = len(data), mode, 0
    tar.addfile(info, io.BytesIO(data))


def add_dir(tar, name, mode=0o755):
    info = tarfile.TarInfo(name)
    info.type, info.mode, info.mtime = tarfile.DIRTYPE, mode, 0
    tar.addfile(info)


def add_hardlink(tar, name, target):
    info = tarfile.TarInfo(name)
    info.type, info.linkname, info.mode, info.mtime = tarfile.LNKTYPE, target, 0o755, 0
    tar.addfile(info)


def base_layer(pause):
    """busybox-static with a hard link per applet (as busybox images: a
    masked path then masks that applet only), /pause, /etc, a web root."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for d in ["bin", "etc", "tmp", "root", "var", "var/run", "var/www", "www", "home",
                  "home/default-user", "proc", "sys", "dev"]:
            add_dir(tar, d, 0o1777 if d == "tmp" else 0o755)
        with open("/bin/busybox", "rb") as f:
            add_file(tar, "bin/busybox", f.read(), 0o755)
        applets = subprocess.run(["/bin/busybox", "--list"], check=True,
                                 capture_output=True, text=True).stdout.split()
        for a in applets:
            if a != "busybox":
                add_hardlink(tar, "bin/" + a, "bin/busybox")
        with open(pause, "rb") as f:
            add_file(tar, "pause", f.read(), 0o755)
        add_file(tar, "etc/passwd", PASSWD.encode())
        add_file(tar, "etc/group", GROUP.encode())
        for name in ["hosts", "hostname", "resolv.conf"]:
            add_file(tar, "etc/" + name, b"")
        add_file(tar, "www/index.html", b"<html><body>served by busybox httpd</body></html>\n")
    return buf.getvalue()


def marker_layer(text):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        add_file(tar, "image-name", text.encode())
    return buf.getvalue()


class Store:
    def __init__(self, root):
        self.blobs = os.path.join(root, "blobs")
        os.makedirs(self.blobs, exist_ok=True)

    def put(self, media_type, data):
        digest = "sha256:" + hashlib.sha256(data).hexdigest()
        with open(os.path.join(self.blobs, digest[7:]), "wb") as f:
            f.write(data)
        return {"mediaType": media_type, "digest": digest, "size": len(data)}

    def image(self, layers, config):
        descs = [self.put("application/vnd.oci.image.layer.v1.tar", layer) for layer in layers]
        cfg = {
            "architecture": "amd64",
            "os": "linux",
            "config": config,
            "rootfs": {"type": "layers", "diff_ids": [d["digest"] for d in descs]},
        }
        cfg_desc = self.put("application/vnd.oci.image.config.v1+json",
                            json.dumps(cfg, sort_keys=True).encode())
        manifest = {
            "schemaVersion": 2,
            "mediaType": "application/vnd.oci.image.manifest.v1+json",
            "config": cfg_desc,
            "layers": descs,
        }
        return self.put("application/vnd.oci.image.manifest.v1+json",
                        json.dumps(manifest, sort_keys=True).encode())["digest"]


def build(root, pause):
    store = Store(root)
    base = base_layer(pause)
    env = {"Env": ["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"]}

    def image(name, **config):
        """A busybox image of its own (critest checks RepoTags, so two
        names share an image only where critest expects it)."""
        return store.image([base, marker_layer(name)], dict(env, **config))

    shell = {"Cmd": ["sh"]}
    # nginx's pid 1 is its "master process" and writes its pid file; the
    # e2e httpd image logs its command line.
    nginx = ["sh", "-c", "echo $$ >/var/run/nginx.pid; httpd -f -p 80 -h /www",
             "nginx: master process"]
    httpd = ["sh", "-c", "echo \"Command line: 'httpd -D FOREGROUND'\" >&2; "
             "exec httpd -f -p 80 -h /www"]
    tags = {
        E2E + "busybox:1.29-2": image("busybox", **shell),
        E2E + "nginx:1.14-2": image("nginx", Cmd=nginx),
        E2E + "httpd:2.4.39-4": image("httpd", Cmd=httpd),
        CRI + "hostnet-nginx-amd64:latest": image(
            "hostnet-nginx", Cmd=["httpd", "-f", "-p", "12003", "-h", "/www"]),
        "pause:3.6": image("pause", Entrypoint=["/pause"]),
        CRI + "test-image-latest:latest": image("test-image-latest", **shell),
        CRI + "test-image-tag:test": image("test-image-tag-test", **shell),
        CRI + "test-image-tag:all": image("test-image-tag-all", **shell),
        CRI + "test-image-user-uid:latest": image("uid", Cmd=["sh"], User="1002"),
        CRI + "test-image-user-username:latest": image("username", Cmd=["sh"], User="www-data"),
        CRI + "test-image-user-uid-group:latest": image("uid-group", Cmd=["sh"], User="1003:1003"),
        CRI + "test-image-user-username-group:latest": image(
            "username-group", Cmd=["sh"], User="www-data:www-data"),
        CRI + "test-image-predefined-group:latest": image("predefined-group", Cmd=["sh"], User="1000"),
    }
    same = image("test-image-tags", **shell)
    for n in [1, 2, 3]:
        tags[CRI + f"test-image-{n}:latest"] = image(f"test-image-{n}", **shell)
        tags[CRI + f"test-image-tags:{n}"] = same
    with open(os.path.join(root, "tags.json"), "w") as f:
        json.dump(tags, f, indent=1, sort_keys=True)


def serve(root, port):
    with open(os.path.join(root, "tags.json")) as f:
        tags = json.load(f)
    blobs = os.path.join(root, "blobs")

    class Handler(http.server.BaseHTTPRequestHandler):
        def log_message(self, fmt, *args):
            sys.stderr.write("registry: " + (fmt % args) + "\n")

        def reply(self, code, body=b"", ctype="application/json", digest=None):
            self.send_response(code)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            self.send_header("Docker-Distribution-API-Version", "registry/2.0")
            if digest:
                self.send_header("Docker-Content-Digest", digest)
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(body)

        def do_GET(self):
            path = self.path.split("?")[0]
            if path in ("/v2", "/v2/"):
                return self.reply(200, b"{}")
            if not path.startswith("/v2/"):
                return self.reply(404)
            rest = path[4:]
            for kind in ("/manifests/", "/blobs/"):
                if kind in rest:
                    name, ref = rest.rsplit(kind, 1)
                    break
            else:
                return self.reply(404)
            if kind == "/manifests/" and not ref.startswith("sha256:"):
                ref = tags.get(f"{name}:{ref}")
                if ref is None:
                    return self.reply(404, b'{"errors":[{"code":"MANIFEST_UNKNOWN"}]}')
            file = os.path.join(blobs, ref[7:]) if ref.startswith("sha256:") else None
            if not file or "/" in ref[7:] or not os.path.isfile(file):
                return self.reply(404, b'{"errors":[{"code":"BLOB_UNKNOWN"}]}')
            with open(file, "rb") as f:
                body = f.read()
            ctype = "application/octet-stream"
            if kind == "/manifests/":
                ctype = json.loads(body).get("mediaType", ctype)
            return self.reply(200, body, ctype, ref)

        do_HEAD = do_GET

    http.server.ThreadingHTTPServer(("127.0.0.1", int(port)), Handler).serve_forever()


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "build":
        build(sys.argv[2], sys.argv[3])
    elif len(sys.argv) == 4 and sys.argv[1] == "serve":
        serve(sys.argv[2], sys.argv[3])
    else:
        sys.exit(__doc__)
