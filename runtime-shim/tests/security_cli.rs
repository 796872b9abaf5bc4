//! The CLI's side of the security/reliability review: errors that name
//! their cause, `qrun do` state directories that do not outlive a
//! SIGKILL, configuration qrun cannot honour refused in one line (never
//! skipped), hostile configs failing fast, long ids and socket paths, and
//! a tiny stack limit.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::bundle::{hello_bundle, qrun_at, qrun_detached, sleep_bundle, wait_status};
use common::tmp::TempDir;
use common::{Outcome, qrun, require_kvm, run_qrun, stderr};
use serde_json::{Value, json};

/// Asserts a failure with exactly one line on stderr holding `needle`.
#[track_caller]
fn fails_in_one_line(what: &str, out: &Outcome, needle: &str) {
    let err = stderr(out);
    assert_ne!(out.status, 0, "{what}: should fail: {out:?}");
    assert_ne!(out.status, 134, "{what}: aborted: {out:?}");
    assert_eq!(
        err.trim_end().lines().count(),
        1,
        "{what}: not one line: {err:?}"
    );
    assert!(
        err.contains(needle),
        "{what}: expected {needle:?} in {err:?}"
    );
}

#[test]
fn errors_name_their_cause() {
    let tmp = TempDir::new("sec-err");
    let long_sock = format!("{}/{}.sock", tmp.str(), "s".repeat(120));
    let cases: &[(&[&str], &str)] = &[
        (
            &["do", "--rootfs", "/no/such", "--", "/bin/true"],
            "rootfs /no/such: No such file or directory",
        ),
        (
            &["do", "--rootfs", "/etc/hostname", "--", "/bin/true"],
            "rootfs /etc/hostname: Not a directory",
        ),
        (
            &["ctl", "/no/such.sock", "status"],
            "control socket /no/such.sock: No such file or directory",
        ),
        (&["ctl", &long_sock, "status"], "path too long (1"),
        (
            &["do", "--control-socket", &long_sock, "--", "/bin/true"],
            "path too long (1",
        ),
    ];
    for (args, needle) in cases {
        fails_in_one_line(&format!("{args:?}"), &run_qrun(args), needle);
    }
}

/// `--state-dir` makes its last component only.
#[test]
fn state_dir_parents_are_not_made() {
    let tmp = TempDir::new("sec-sd");
    let deep = tmp.join("a/b");
    let out = run_qrun(&[
        "do",
        "--state-dir",
        deep.to_str().expect("utf-8"),
        "--",
        "/bin/true",
    ]);
    fails_in_one_line("deep --state-dir", &out, "parent directory does not exist");
    assert!(!tmp.join("a").exists(), "a parent of --state-dir was made");
}

/// Every directory under `dir`, recursively, whose name holds `needle`.
fn dirs_named(dir: &Path, needle: &str) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let p = e.path();
        if p.is_dir() && !p.is_symlink() {
            if e.file_name().to_string_lossy().contains(needle) {
                out.push(p.clone());
            }
            out.extend(dirs_named(&p, needle));
        }
    }
    out
}

/// `qrun do` with `$TMPDIR` set to `tmp`.
fn qrun_do_in(tmp: &Path) -> Command {
    let mut cmd = Command::new(qrun());
    cmd.env_clear()
        .env("TMPDIR", tmp)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .arg("do");
    cmd
}

#[test]
fn a_killed_qrun_do_leaves_no_state_directory() {
    if !require_kvm() {
        return;
    }
    let busybox = Path::new("/bin/busybox");
    assert!(
        busybox.is_file(),
        "/bin/busybox is missing (scripts/deps.sh)"
    );
    let tmp = TempDir::new("sec-kill");
    let mut first = qrun_do_in(tmp.path())
        .args(["--", "/bin/busybox", "sleep", "30"])
        .spawn()
        .expect("spawning qrun do");
    let pid = first.id().to_string();
    // Its state directory appears while it runs.
    let deadline = Instant::now() + Duration::from_secs(10);
    while dirs_named(tmp.path(), &pid).is_empty() {
        if Instant::now() > deadline {
            let _ = first.kill();
            panic!("no state directory of qrun do {pid} in {}", tmp.str());
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    first.kill().expect("SIGKILL");
    first.wait().expect("wait");
    assert!(
        !dirs_named(tmp.path(), &pid).is_empty(),
        "gone before the sweep"
    );

    let out = qrun_do_in(tmp.path())
        .args(["--", "/bin/true"])
        .output()
        .expect("second qrun do");
    assert!(out.status.success(), "{out:?}");
    let left = dirs_named(tmp.path(), &pid);
    assert!(
        left.is_empty(),
        "the killed qrun do's state is left: {left:?}"
    );
    // The second run cleaned up after itself too: only the per-user base
    // directory is left, empty.
    for base in std::fs::read_dir(tmp.path()).expect("tmp").flatten() {
        let inside = common::dir_names(&base.path());
        assert!(inside.is_empty(), "{}: {inside:?}", base.path().display());
    }
}

fn edit_config(bundle: &Path, f: impl FnOnce(&mut Value)) {
    let path = bundle.join("config.json");
    let mut c: Value =
        serde_json::from_slice(&std::fs::read(&path).expect("config")).expect("JSON");
    f(&mut c);
    std::fs::write(&path, serde_json::to_vec(&c).expect("JSON")).expect("writing");
}

/// `qrun ARGS` (output to the file `log`) must end within `limit`; the
/// outcome.
fn bounded(root: &Path, args: &[&str], log: &Path, limit: Duration) -> Outcome {
    let start = Instant::now();
    let out = qrun_detached(root, args, log);
    assert!(
        start.elapsed() < limit,
        "qrun {args:?} took {:?}",
        start.elapsed()
    );
    out
}

type Edit = Box<dyn Fn(&mut Value)>;

/// Configs qrun cannot honour and hostile ones: `create` and `run` fail
/// with one line, fast, and leave nothing behind.
#[test]
fn unsupported_and_hostile_configs_are_refused_in_one_line() {
    let (b, root) = (TempDir::new("sec-b"), TempDir::new("sec-root"));
    hello_bundle(b.path());
    let good = std::fs::read(b.join("config.json")).expect("config");
    let deep = (0..5000).fold(json!(1), |v, _| json!([v]));
    let cases: Vec<(&str, Edit)> = vec![
        (
            "no --console-socket",
            Box::new(|c| c["process"]["terminal"] = json!(true)),
        ),
        (
            "mount \"/data\" (type \"nfs\")",
            Box::new(|c| {
                c["mounts"]
                    .as_array_mut()
                    .expect("mounts")
                    .push(json!({"destination": "/data", "type": "nfs", "source": "srv:/x"}))
            }),
        ),
        (
            "mount \"/mnt/proc\" (type \"proc\")",
            Box::new(|c| {
                c["mounts"]
                    .as_array_mut()
                    .expect("mounts")
                    .push(json!({"destination": "/mnt/proc", "type": "proc", "source": "proc"}))
            }),
        ),
        (
            "process.env[1] \"A=b\\0c\" contains a NUL byte",
            Box::new(|c| c["process"]["env"] = json!(["PATH=/bin", "A=b\u{0}c"])),
        ),
        (
            "process.args[1]",
            Box::new(|c| c["process"]["args"] = json!(["/hello", "x\u{0}y"])),
        ),
        (
            "hostname \"a\\0b\" contains a NUL byte",
            Box::new(|c| c["hostname"] = json!("a\u{0}b")),
        ),
        (
            "has no '='",
            Box::new(|c| c["process"]["env"] = json!(["JUSTNAME"])),
        ),
        (
            "invalid type: sequence, expected a string",
            Box::new(move |c| c["process"]["args"] = json!([deep.clone()])),
        ),
        (
            "invalid type",
            Box::new(|c| c["process"]["args"] = json!({"not": "a list"})),
        ),
        (
            "floating point",
            Box::new(|c| c["linux"]["resources"] = json!({"memory": {"limit": 1e300}})),
        ),
        (
            "line\\nbreak",
            Box::new(|c| c["root"]["path"] = json!("line\nbreak")),
        ),
    ];
    let bundle = b.str().to_owned();
    let log = b.join("qrun.log");
    for (needle, edit) in &cases {
        std::fs::write(b.join("config.json"), &good).expect("restore");
        edit_config(b.path(), edit);
        let out = bounded(
            root.path(),
            &["create", "--bundle", &bundle, "c"],
            &log,
            Duration::from_secs(10),
        );
        if out.status == 0 {
            let _ = qrun_at(root.path(), &["delete", "--force", "c"]);
        }
        fails_in_one_line(&format!("create: {needle}"), &out, needle);
        // `run` goes through the same checks; it must not start anything.
        let out = qrun_detached(root.path(), &["run", "--bundle", &bundle, "c"], &log);
        fails_in_one_line(&format!("run: {needle}"), &out, needle);
        assert!(!root.join("c").exists(), "{needle}: state left behind");
    }
    // A console socket without a terminal, as runc refuses it.
    std::fs::write(b.join("config.json"), &good).expect("restore");
    let out = qrun_at(
        root.path(),
        &[
            "create",
            "--bundle",
            &bundle,
            "--console-socket",
            "/no/sock",
            "c",
        ],
    );
    fails_in_one_line(
        "console without terminal",
        &out,
        "process.terminal is false",
    );
}

#[test]
fn ids_longer_than_a_file_name_are_refused_at_the_check() {
    let (b, root) = (TempDir::new("sec-idb"), TempDir::new("sec-idr"));
    hello_bundle(b.path());
    for len in [256, 300, 1024] {
        let id = "i".repeat(len);
        let out = qrun_at(root.path(), &["create", "--bundle", b.str(), &id]);
        fails_in_one_line(
            &format!("id of {len}"),
            &out,
            &format!("invalid container id: {len} characters is too long"),
        );
        let out = qrun_at(root.path(), &["state", &id]);
        fails_in_one_line(&format!("state, id of {len}"), &out, "too long");
    }
    assert!(common::dir_names(root.path()).is_empty());
}

/// The longest id makes the control socket's path longer than a socket
/// address holds: `kill` (a control request) must still reach it.
#[test]
fn the_longest_id_works_end_to_end() {
    if !require_kvm() {
        return;
    }
    let (b, root) = (TempDir::new("sec-lb"), TempDir::new("sec-lr"));
    sleep_bundle(b.path(), "30");
    let id = "l".repeat(255);
    let out = qrun_detached(
        root.path(),
        &["run", "--detach", "--bundle", b.str(), &id],
        &b.join("run.log"),
    );
    assert_eq!(out.status, 0, "run --detach: {out:?}");
    wait_status(root.path(), &id, "running");
    // SIGSTOP (hibernation) is a control request; SIGTERM would be too,
    // but the sleeping pid 1 has no handler and drops it, as under runc.
    let out = qrun_at(root.path(), &["kill", &id, "STOP"]);
    assert_eq!(
        out.status, 0,
        "kill STOP through the control socket: {out:?}"
    );
    let s = common::bundle::state(root.path(), &id).expect("state");
    assert_eq!(s["annotations"]["qrun.hibernation"], "hibernated", "{s}");
    let out = qrun_at(root.path(), &["kill", &id, "KILL"]);
    assert_eq!(out.status, 0, "kill KILL: {out:?}");
    wait_status(root.path(), &id, "stopped");
    let out = qrun_at(root.path(), &["delete", &id]);
    assert_eq!(out.status, 0, "delete: {out:?}");
}

/// `qrun` under `prlimit --stack=LIMIT`, with the same cleared
/// environment as the other helpers.
fn qrun_with_stack(limit: &str, args: &[&str]) -> Outcome {
    let mut all = vec![
        format!("--stack={limit}"),
        qrun().to_string_lossy().into_owned(),
    ];
    all.extend(args.iter().map(|a| a.to_string()));
    let out = Command::new("prlimit")
        .args(&all)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .stdin(Stdio::null())
        .output()
        .expect("prlimit (util-linux) runs");
    Outcome {
        stdout: out.stdout,
        stderr: out.stderr,
        status: common::shell_status(out.status),
    }
}

#[test]
fn a_16k_stack_works_or_fails_clearly() {
    let (b, root) = (TempDir::new("sec-stb"), TempDir::new("sec-str"));
    hello_bundle(b.path());
    let root_s = root.str();
    // Soft and hard limit 16 KiB (what `ulimit -s 16` sets): a clear error.
    let out = qrun_with_stack(
        "16384",
        &["--root", root_s, "run", "--bundle", b.str(), "s1"],
    );
    fails_in_one_line(
        "hard 16 KiB",
        &out,
        "stack size limit (ulimit -s) is 16 KiB",
    );
    // A 16 KiB soft limit under a higher hard limit: qrun works.
    let spec_dir = TempDir::new("sec-sts");
    let out = qrun_with_stack("16384:unlimited", &["spec", "--bundle", spec_dir.str()]);
    assert_eq!(out.status, 0, "spec under a 16 KiB soft limit: {out:?}");
    if !require_kvm() {
        return;
    }
    let out = qrun_with_stack(
        "16384:unlimited",
        &["--root", root_s, "run", "--bundle", b.str(), "s2"],
    );
    assert_eq!(out.status, 0, "run under a 16 KiB soft limit: {out:?}");
    assert!(common::stdout(&out).contains("hello"), "{out:?}");
}
