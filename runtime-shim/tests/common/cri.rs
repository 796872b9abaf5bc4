//! Kubernetes' CRI for the tests: a containerd of our own with the CRI
//! plugin (private root, state and sockets; runtime handlers `runc` and
//! `qrun`, both containerd's runc shim, qrun as the latter's runc binary),
//! an image imported from a local OCI archive (busybox-static and the
//! `pause` test program: no registry), and `crictl` (cri-tools, built
//! once by scripts/cri-tools.sh).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::qrun;
use super::tmp::TempDir;

/// The image every pod and container here uses; its entrypoint is the
/// pause program, so it is the sandbox image too.
pub const IMAGE: &str = "qrun.test/cri:1";

/// Where containerd's runc shim keeps runtime state for CRI containers
/// (`--root` of every runc/qrun call; shared by every containerd).
pub const RUNC_ROOT: &str = "/run/containerd/runc/k8s.io";

/// Whether `CI` asks for failures instead of skips.
fn ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v.eq_ignore_ascii_case("true") || v == "1")
}

/// A loud skip, or a failure under CI=true.
fn missing(what: &str) -> Option<PathBuf> {
    assert!(!ci(), "{what} and CI=true: this CRI test cannot run");
    eprintln!("\n**** SKIPPED: {what}; this CRI test did NOT run (under CI=true it fails) ****\n");
    None
}

/// The directory holding `crictl` and `critest`: built by
/// scripts/cri-tools.sh on first use (minutes; cached in
/// ~/.cache/qrun-cri after), a loud skip (a failure under CI=true) when it
/// cannot be built. containerd, runc and busybox-static are needed too.
pub fn require_cri_tools() -> Option<PathBuf> {
    for bin in ["containerd", "ctr", "runc"] {
        let ok = Command::new(bin)
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success());
        if !ok {
            return missing(&format!("{bin} is not installed (scripts/deps.sh)"));
        }
    }
    if !Path::new("/bin/busybox").is_file() {
        return missing("/bin/busybox is missing (busybox-static)");
    }
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/cri-tools.sh");
    let out = Command::new(&script)
        .stdin(Stdio::null())
        .output()
        .expect("running scripts/cri-tools.sh");
    if !out.status.success() {
        return missing(&format!(
            "scripts/cri-tools.sh could not build crictl/critest: {}",
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    Some(PathBuf::from(String::from_utf8_lossy(&out.stdout).trim()))
}

/// A containerd with the CRI plugin, killed (and its directory removed)
/// on drop.
pub struct Containerd {
    child: Child,
    pub dir: TempDir,
    crictl: PathBuf,
}

impl Containerd {
    /// Starts it and imports [`IMAGE`] into the `k8s.io` namespace.
    pub fn start(tools: &Path) -> Self {
        let dir = TempDir::new("cri");
        let config = config(dir.path(), &qrun());
        std::fs::write(dir.join("config.toml"), config).expect("writing config.toml");
        let log = std::fs::File::create(dir.join("containerd.log")).expect("log");
        let child = Command::new("containerd")
            .arg("--config")
            .arg(dir.join("config.toml"))
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("dup"))
            .stderr(log)
            .spawn()
            .expect("starting containerd");
        let me = Self {
            child,
            dir,
            crictl: tools.join("crictl"),
        };
        let deadline = Instant::now() + Duration::from_secs(20);
        while !me.crictl(&["version"]).status.success() {
            assert!(
                Instant::now() < deadline,
                "containerd's CRI did not come up: {}",
                me.log()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        let archive = image_archive(me.dir.path());
        let out = Command::new("timeout")
            .arg("60")
            .arg("ctr")
            .arg("--address")
            .arg(me.socket())
            .args(["-n", "k8s.io", "images", "import"])
            .arg(&archive)
            .output()
            .expect("ctr images import");
        assert!(out.status.success(), "ctr images import: {out:?}");
        let images = me.ok(&["images", "-q"]);
        assert!(
            !images.trim().is_empty(),
            "the CRI sees no image after the import"
        );
        me
    }

    pub fn socket(&self) -> PathBuf {
        self.dir.join("c.sock")
    }

    pub fn endpoint(&self) -> String {
        format!("unix://{}", self.socket().display())
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("containerd.log")).unwrap_or_default()
    }

    /// `crictl ARGS` against this containerd (90 s at most).
    pub fn crictl(&self, args: &[&str]) -> Output {
        let ep = self.endpoint();
        Command::new("timeout")
            .arg("90")
            .arg(&self.crictl)
            .args(["--runtime-endpoint", &ep, "--image-endpoint", &ep])
            .args(["--timeout", "60s"])
            .args(args)
            .stdin(Stdio::null())
            .output()
            .expect("running crictl")
    }

    /// `crictl ARGS`, which must succeed: its stdout.
    #[track_caller]
    pub fn ok(&self, args: &[&str]) -> String {
        let o = self.crictl(args);
        assert!(
            o.status.success(),
            "crictl {args:?}: {}\nstdout: {}\nstderr: {}",
            o.status,
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        );
        String::from_utf8_lossy(&o.stdout).into_owned()
    }

    /// `crictl inspect ID` as JSON.
    #[track_caller]
    pub fn inspect(&self, what: &str, id: &str) -> Value {
        serde_json::from_str(&self.ok(&[what, id])).expect("crictl inspect JSON")
    }

    /// A container's `status.state` (CONTAINER_RUNNING, _EXITED, ...).
    pub fn state(&self, id: &str) -> String {
        self.inspect("inspect", id)["status"]["state"]
            .as_str()
            .unwrap_or("")
            .to_owned()
    }

    /// Waits (20 s at most) until container `id` is in `want`.
    #[track_caller]
    pub fn wait_state(&self, id: &str, want: &str) {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let state = self.state(id);
            if state == want {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "container {id} stays {state}, never {want}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

impl Drop for Containerd {
    fn drop(&mut self) {
        // Whatever a failed test left: its pods (and their shims) first.
        let _ = self.crictl(&["rmp", "--all", "--force"]);
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// containerd's config: CRI on, handlers `runc` and `qrun`, private
/// paths, a random streaming port (several may run at once), CNI with
/// Debian's plugins (unused by host-network pods). Pods' oom_score_adj
/// (-998 for a sandbox) is clamped to containerd's own: a machine that is
/// itself a container may refuse lower values, and runc then fails
/// ("failed to update /proc/self/oom_score_adj: Permission denied").
fn config(d: &Path, qrun: &Path) -> String {
    let cni = d.join("cni");
    std::fs::create_dir_all(&cni).expect("mkdir cni");
    let cri = "plugins.\"io.containerd.grpc.v1.cri\"";
    format!(
        r#"version = 2
root = "{d}/root"
state = "{d}/state"
[grpc]
  address = "{d}/c.sock"
[ttrpc]
  address = "{d}/c.sock.ttrpc"
[debug]
  address = "{d}/debug.sock"
[{cri}]
  sandbox_image = "{IMAGE}"
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  restrict_oom_score_adj = true
  [{cri}.cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "{cni}"
  [{cri}.containerd]
    default_runtime_name = "runc"
    [{cri}.containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
    [{cri}.containerd.runtimes.qrun]
      runtime_type = "io.containerd.runc.v2"
      [{cri}.containerd.runtimes.qrun.options]
        BinaryName = "{qrun}"
"#,
        d = d.display(),
        cni = cni.display(),
        qrun = qrun.display(),
    )
}

/// An OCI image archive (oci-layout, index.json, blobs) of one layer:
/// busybox-static with a few applet links, `/pause` (the entrypoint) and
/// an `/etc` for the files the CRI mounts. Named [`IMAGE`] by the
/// `io.containerd.image.name` annotation `ctr images import` reads.
fn image_archive(dir: &Path) -> PathBuf {
    let root = dir.join("image-rootfs");
    for d in ["bin", "etc", "tmp", "proc", "sys", "dev"] {
        std::fs::create_dir_all(root.join(d)).expect("mkdir");
    }
    std::fs::copy("/bin/busybox", root.join("bin/busybox")).expect("copy busybox");
    for applet in [
        "sh", "sleep", "echo", "cat", "true", "id", "ls", "ps", "hostname",
    ] {
        std::os::unix::fs::symlink("busybox", root.join("bin").join(applet)).expect("symlink");
    }
    std::fs::copy(test_apps::path("pause"), root.join("pause")).expect("copy pause");
    std::fs::write(root.join("etc/passwd"), "root:x:0:0:root:/root:/bin/sh\n").expect("passwd");
    std::fs::write(root.join("etc/group"), "root:x:0:\n").expect("group");
    for f in ["hosts", "hostname", "resolv.conf"] {
        std::fs::write(root.join("etc").join(f), "").expect("etc file");
    }

    let oci = dir.join("image-oci");
    let blobs = oci.join("blobs/sha256");
    std::fs::create_dir_all(&blobs).expect("mkdir blobs");
    let layer = oci.join("layer.tar");
    let status = Command::new("tar")
        .args(["--numeric-owner", "--owner=0", "--group=0", "-C"])
        .arg(&root)
        .arg("-cf")
        .arg(&layer)
        .arg(".")
        .status()
        .expect("tar");
    assert!(status.success(), "tar of the image layer");
    let layer_bytes = std::fs::read(&layer).expect("layer");
    std::fs::remove_file(&layer).expect("rm layer.tar");
    let layer_desc = blob(
        &blobs,
        "application/vnd.oci.image.layer.v1.tar",
        &layer_bytes,
    );
    let config = json!({
        "architecture": "amd64",
        "os": "linux",
        "config": {"Env": ["PATH=/bin"], "Entrypoint": ["/pause"], "WorkingDir": "/"},
        "rootfs": {"type": "layers", "diff_ids": [layer_desc["digest"]]},
    });
    let config_desc = blob(
        &blobs,
        "application/vnd.oci.image.config.v1+json",
        config.to_string().as_bytes(),
    );
    let manifest = json!({
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": config_desc,
        "layers": [layer_desc],
    });
    let mut manifest_desc = blob(
        &blobs,
        "application/vnd.oci.image.manifest.v1+json",
        manifest.to_string().as_bytes(),
    );
    manifest_desc["annotations"] = json!({"io.containerd.image.name": IMAGE});
    manifest_desc["platform"] = json!({"architecture": "amd64", "os": "linux"});
    let index = json!({"schemaVersion": 2, "manifests": [manifest_desc]});
    std::fs::write(oci.join("index.json"), index.to_string()).expect("index.json");
    std::fs::write(oci.join("oci-layout"), r#"{"imageLayoutVersion":"1.0.0"}"#).expect("layout");
    let archive = dir.join("image.tar");
    let status = Command::new("tar")
        .arg("-C")
        .arg(&oci)
        .arg("-cf")
        .arg(&archive)
        .args(["oci-layout", "index.json", "blobs"])
        .status()
        .expect("tar");
    assert!(status.success(), "tar of the image archive");
    archive
}

/// Writes `bytes` as a blob; its OCI descriptor.
fn blob(blobs: &Path, media_type: &str, bytes: &[u8]) -> Value {
    let tmp = blobs.join("incoming");
    std::fs::write(&tmp, bytes).expect("blob");
    let out = Command::new("sha256sum")
        .arg(&tmp)
        .output()
        .expect("sha256sum");
    assert!(out.status.success(), "sha256sum: {out:?}");
    let text = String::from_utf8_lossy(&out.stdout);
    let hex = text.split_whitespace().next().expect("a digest").to_owned();
    std::fs::rename(&tmp, blobs.join(&hex)).expect("rename blob");
    json!({"mediaType": media_type, "digest": format!("sha256:{hex}"), "size": bytes.len()})
}
