//! OCI bundles and `qrun` invocations for the OCI tests: a bundle is a
//! temporary directory with a `config.json` (made by `qrun spec`, then
//! edited) and a rootfs holding the test program; each test uses its own
//! runtime root so tests never see each other's containers.

use std::path::Path;

use serde_json::Value;

use super::{Outcome, run_qrun};

/// A bundle whose rootfs holds `files` (container path, host file) and
/// whose process runs `args`, with `edit` applied to the default config.
pub fn bundle(dir: &Path, files: &[(&str, &Path)], args: &[&str], edit: impl FnOnce(&mut Value)) {
    let rootfs = dir.join("rootfs");
    for (inside, host) in files {
        let dst = rootfs.join(inside.trim_start_matches('/'));
        std::fs::create_dir_all(dst.parent().expect("has a parent")).expect("mkdir");
        std::fs::copy(host, &dst).expect("copying into the rootfs");
    }
    std::fs::create_dir_all(&rootfs).expect("mkdir rootfs");
    let out = run_qrun(&["spec", "--bundle", &dir.to_string_lossy()]);
    assert_eq!(out.status, 0, "qrun spec: {out:?}");
    let path = dir.join("config.json");
    let mut config: Value =
        serde_json::from_slice(&std::fs::read(&path).expect("reading config.json")).expect("JSON");
    config["process"]["args"] = args.iter().map(|a| Value::from(*a)).collect();
    config["process"]["terminal"] = Value::Bool(false);
    edit(&mut config);
    std::fs::write(&path, serde_json::to_vec_pretty(&config).expect("JSON")).expect("writing");
}

/// A bundle running the static `hello` test program as `/hello`.
pub fn hello_bundle(dir: &Path) {
    let hello = test_apps::path("hello");
    bundle(dir, &[("/hello", &hello)], &["/hello"], |_| {});
}

/// A bundle running busybox `sleep SECS` (found through `PATH`).
pub fn sleep_bundle(dir: &Path, secs: &str) {
    sleep_bundle_with(dir, secs, |_| {});
}

/// [`sleep_bundle`] with `edit` applied to its config.
pub fn sleep_bundle_with(dir: &Path, secs: &str, edit: impl FnOnce(&mut Value)) {
    let busybox = Path::new("/bin/busybox");
    assert!(
        busybox.is_file(),
        "/bin/busybox is missing: scripts/deps.sh installs busybox-static"
    );
    bundle(
        dir,
        &[("/bin/busybox", busybox)],
        &["busybox", "sleep", secs],
        edit,
    );
}

/// A bundle whose rootfs holds only `/bin/busybox` (installed by
/// scripts/deps.sh), running `args`.
pub fn busybox_bundle(dir: &Path, args: &[&str], edit: impl FnOnce(&mut Value)) {
    let busybox = Path::new("/bin/busybox");
    assert!(busybox.is_file(), "/bin/busybox: scripts/deps.sh");
    bundle(dir, &[("/bin/busybox", busybox)], args, edit);
}

/// `run` of bundle `dir` as container `id` under runc, then under qrun,
/// each with a root of its own (the container deleted after): (runc's
/// outcome, qrun's).
pub fn run_both(dir: &Path, id: &str) -> (Outcome, Outcome) {
    let d = dir.to_string_lossy();
    let rroot = super::tmp::TempDir::new("both-runc-root");
    let r = super::runc::runc(&rroot.0, &["run", "--bundle", &d, id]);
    let _ = super::runc::runc(&rroot.0, &["delete", "--force", id]);
    let qroot = super::tmp::TempDir::new("both-qrun-root");
    let q = qrun_at(&qroot.0, &["run", "--bundle", &d, id]);
    let _ = qrun_at(&qroot.0, &["delete", "--force", id]);
    (r, q)
}

/// `qrun --root ROOT ARGS`.
pub fn qrun_at(root: &Path, args: &[&str]) -> Outcome {
    let mut all = vec!["--root".to_string(), root.to_string_lossy().into_owned()];
    all.extend(args.iter().map(|a| a.to_string()));
    run_qrun(&all)
}

/// The state JSON of `id`, or `None` when `state` fails.
pub fn state(root: &Path, id: &str) -> Option<Value> {
    let out = qrun_at(root, &["state", id]);
    (out.status == 0).then(|| serde_json::from_slice(&out.stdout).expect("state prints JSON"))
}

/// The status field of `id`'s state.
pub fn status(root: &Path, id: &str) -> String {
    state(root, id)
        .map(|s| s["status"].as_str().unwrap_or("").to_owned())
        .unwrap_or_else(|| "<no state>".into())
}

/// Polls until `id` has `want` status, at most 10 s.
pub fn wait_status(root: &Path, id: &str, want: &str) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let now = status(root, id);
        if now == want {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "container {id} stayed {now}, expected {want}"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// `qrun --root ROOT ARGS` for commands that leave a sandbox process
/// behind (`create`, `run --detach`): that process inherits stdout and
/// stderr, so they go to the file `out` instead of pipes (whose readers
/// would wait for the container). The outcome's stderr is the file's
/// contents when the command returned.
pub fn qrun_detached(root: &Path, args: &[&str], out: &Path) -> Outcome {
    let file = std::fs::File::create(out).expect("creating the output file");
    let mut child = std::process::Command::new(super::qrun())
        .arg("--root")
        .arg(root)
        .args(args)
        .stdin(std::process::Stdio::null())
        .stdout(file.try_clone().expect("dup"))
        .stderr(file)
        .spawn()
        .expect("spawning qrun");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let status = loop {
        if let Some(s) = child.try_wait().expect("waiting for qrun") {
            break s;
        }
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            panic!("qrun {args:?} did not return within 30 s");
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    };
    Outcome {
        stdout: Vec::new(),
        stderr: std::fs::read(out).unwrap_or_default(),
        status: super::shell_status(status),
    }
}

/// `qrun create` of `id` from bundle `b` (its output in `b/create.log`),
/// then `qrun start`; both must succeed.
pub fn started(root: &Path, b: &Path, id: &str) {
    let log = b.join("create.log");
    let out = qrun_detached(
        root,
        &["create", "--bundle", &b.to_string_lossy(), id],
        &log,
    );
    assert_eq!(out.status, 0, "create: {out:?}");
    let out = qrun_at(root, &["start", id]);
    assert_eq!(out.status, 0, "start: {out:?}");
}
