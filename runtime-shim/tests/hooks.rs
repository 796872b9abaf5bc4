//! OCI hooks in config.json (they used to be ignored): each kind runs at
//! its point of the lifecycle, in runc's order, with the state JSON on its
//! stdin (status creating, running or stopped), exactly its args and env.
//! The same bundle runs under runc (the reference) and the order and
//! statuses must match. A failing or timed-out create-time hook fails
//! `create` with one line and leaves no container; failing poststart and
//! poststop hooks only warn; startContainer is refused.
//!
//! Every test needs /dev/kvm (create sets up the sandbox process): without
//! it a test says SKIPPED loudly, and fails under `CI=true`.

#![forbid(unsafe_code)]

mod common;

use std::path::Path;
use std::time::{Duration, Instant};

use common::bundle::{qrun_at, qrun_detached, sleep_bundle_with, state, wait_status};
use common::require_kvm;
use common::runc::{runc_ok, runc_state};
use common::tmp::TempDir;
use serde_json::{Value, json};

const KINDS: &[&str] = &[
    "prestart",
    "createRuntime",
    "createContainer",
    "poststart",
    "poststop",
];

/// A hook that records, under `out`: its stdin (`NAME.state`), its `$0 $1
/// $HOOK_VAR` and `$PATH` (`NAME.args`), and its name (appended to
/// `order`).
fn recording_hook(out: &Path, name: &str) -> Value {
    let o = out.display();
    let script = format!(
        "cat > {o}/{name}.state; echo \"$0 $1 $HOOK_VAR\" > {o}/{name}.args; \
         echo \"$PATH\" >> {o}/{name}.args; echo {name} >> {o}/order"
    );
    json!({
        "path": "/bin/sh",
        "args": ["sh", "-c", script, name, "second"],
        "env": [format!("HOOK_VAR=v-{name}"), "PATH=/hook/bin:/bin:/usr/bin"],
    })
}

/// A sleeping container whose hooks are `hooks` and that carries an
/// annotation.
fn hooked_bundle(dir: &TempDir, hooks: Value) {
    sleep_bundle_with(&dir.0, "30", |c| {
        c["hooks"] = hooks;
        c["annotations"] = json!({"org.test.hooks": "yes"});
    });
}

fn all_recording(out: &Path) -> Value {
    let mut hooks = json!({});
    for k in KINDS {
        hooks[k] = json!([recording_hook(out, k)]);
    }
    hooks
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn hook_state(out: &Path, kind: &str) -> Value {
    serde_json::from_str(&read(&out.join(format!("{kind}.state")))).expect("state JSON")
}

/// What the hooks recorded that must be the same under runc and qrun:
/// the order, and per hook its status, id, annotations and args.
fn summary(out: &Path, id: &str, bundle: &Path) -> String {
    let mut s = read(&out.join("order"));
    for k in KINDS {
        let st = hook_state(out, k);
        assert_eq!(st["id"], id, "{k}: {st}");
        assert_eq!(st["bundle"], bundle.to_str().expect("utf-8"), "{k}: {st}");
        assert!(st["ociVersion"].is_string(), "{k}: {st}");
        // The pid is the host's (different each run) but for
        // createContainer (as the container sees itself) and poststop.
        let pid = match *k {
            "createContainer" | "poststop" => st["pid"].to_string(),
            _ => "-".into(),
        };
        s += &format!(
            "{k}: {} pid {pid} {} | {}",
            st["status"],
            st["annotations"],
            read(&out.join(format!("{k}.args")))
        );
    }
    s
}

/// create, start, kill, delete under runc; what the hooks recorded.
fn under_runc(id: &str) -> String {
    let (b, out, root) = (
        TempDir::new("hooks-runc-bundle"),
        TempDir::new("hooks-runc-out"),
        TempDir::new("hooks-runc-root"),
    );
    hooked_bundle(&b, all_recording(&out.0));
    runc_ok(&root.0, &["create", "--bundle", b.str(), id]);
    runc_ok(&root.0, &["start", id]);
    runc_ok(&root.0, &["kill", id, "KILL"]);
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        if runc_state(&root.0, id)["status"] == "stopped" {
            break;
        }
        assert!(Instant::now() < deadline, "runc container did not stop");
        std::thread::sleep(Duration::from_millis(10));
    }
    runc_ok(&root.0, &["delete", id]);
    summary(&out.0, id, &b.0)
}

#[test]
fn every_hook_runs_in_order_with_its_state_as_under_runc() {
    if !require_kvm() {
        return;
    }
    let id = format!("hooks-all-{}", std::process::id());
    let (b, out, root) = (
        TempDir::new("hooks-bundle"),
        TempDir::new("hooks-out"),
        TempDir::new("hooks-root"),
    );
    hooked_bundle(&b, all_recording(&out.0));
    let log = out.join("create.log");
    let c = qrun_detached(&root.0, &["create", "--bundle", b.str(), &id], &log);
    assert_eq!(c.status, 0, "create: {c:?}");
    assert_eq!(
        read(&out.join("order")),
        "prestart\ncreateRuntime\ncreateContainer\n"
    );
    // The runtime-side hooks see the sandbox process's host pid.
    let pid = state(&root.0, &id).expect("created")["pid"].clone();
    assert_eq!(hook_state(&out.0, "prestart")["pid"], pid);
    assert_eq!(hook_state(&out.0, "createRuntime")["pid"], pid);
    let s = qrun_at(&root.0, &["start", &id]);
    assert_eq!(s.status, 0, "start: {s:?}");
    assert!(
        out.join("poststart.state").exists(),
        "poststart ran in start"
    );
    assert_eq!(hook_state(&out.0, "poststart")["pid"], pid);
    assert!(
        !out.join("poststop.state").exists(),
        "poststop waits for delete"
    );
    assert_eq!(qrun_at(&root.0, &["kill", &id, "KILL"]).status, 0);
    wait_status(&root.0, &id, "stopped");
    let d = qrun_at(&root.0, &["delete", &id]);
    assert_eq!(d.status, 0, "delete: {d:?}");
    let qrun = summary(&out.0, &id, &b.0);
    for (k, status) in [
        ("prestart", "creating"),
        ("createRuntime", "creating"),
        ("createContainer", "creating"),
        ("poststart", "running"),
        ("poststop", "stopped"),
    ] {
        assert_eq!(hook_state(&out.0, k)["status"], status, "{k}");
        // argv[0] is the config's, and only the config's env is there.
        assert_eq!(
            read(&out.join(format!("{k}.args"))),
            format!("{k} second v-{k}\n/hook/bin:/bin:/usr/bin\n")
        );
    }
    // runc gives poststart the status "created" (it reads its state
    // before the program runs); the program has started by then: qrun
    // says "running", as `state` does.
    let runc = under_runc(&format!("{id}-runc"))
        .replace("poststart: \"created\"", "poststart: \"running\"");
    assert_eq!(qrun, runc);
}

/// Runs `qrun create` on a bundle with `hooks`; its outcome.
fn create_with(hooks: Value, tag: &str) -> (common::Outcome, TempDir, TempDir, String) {
    let id = format!("hooks-{tag}-{}", std::process::id());
    let (b, root) = (TempDir::new("hooks-bundle"), TempDir::new("hooks-root"));
    hooked_bundle(&b, hooks);
    let log = b.join("create.log");
    let out = qrun_detached(&root.0, &["create", "--bundle", b.str(), &id], &log);
    (out, b, root, id)
}

/// Create failed with one line naming `needle`, and left nothing behind.
fn failed_cleanly(out: &common::Outcome, root: &Path, id: &str, needle: &str) {
    let err = String::from_utf8_lossy(&out.stderr);
    assert_ne!(out.status, 0, "create should fail: {out:?}");
    assert_eq!(err.trim_end().lines().count(), 1, "one line: {err}");
    assert!(err.contains(needle), "{err}");
    assert!(state(root, id).is_none(), "no container is left");
    assert!(!root.join(id).exists(), "no state directory is left");
}

#[test]
fn a_failing_create_runtime_hook_fails_create_and_leaves_nothing() {
    if !require_kvm() {
        return;
    }
    let rec = TempDir::new("hooks-out");
    let hooks = json!({
        "prestart": [recording_hook(&rec.0, "prestart")],
        "createRuntime": [{"path": "/bin/sh", "args": ["sh", "-c", "echo boom >&2; exit 3"]}],
        "createContainer": [recording_hook(&rec.0, "createContainer")],
    });
    let (out, _b, root, id) = create_with(hooks, "fail");
    failed_cleanly(
        &out,
        &root.0,
        &id,
        "hook createRuntime[0] /bin/sh: exit status 3 (stderr: boom)",
    );
    // The hooks before it ran, the ones after did not.
    assert_eq!(read(&rec.join("order")), "prestart\n");
}

#[test]
fn a_failing_create_container_hook_fails_create() {
    if !require_kvm() {
        return;
    }
    let hooks = json!({
        "createContainer": [{"path": "/bin/sh", "args": ["sh", "-c", "echo inside >&2; exit 7"]}],
    });
    let (out, _b, root, id) = create_with(hooks, "failcc");
    failed_cleanly(
        &out,
        &root.0,
        &id,
        "hook createContainer[0] /bin/sh: exit status 7 (stderr: inside)",
    );
}

#[test]
fn a_hook_past_its_timeout_is_killed_and_fails_create() {
    if !require_kvm() {
        return;
    }
    let rec = TempDir::new("hooks-out");
    let pidfile = rec.join("pid");
    let script = format!("echo $$ > {}; sleep 30; echo late", pidfile.display());
    let hooks = json!({
        "createRuntime": [{"path": "/bin/sh", "args": ["sh", "-c", script], "timeout": 1}],
    });
    let t = Instant::now();
    let (out, _b, root, id) = create_with(hooks, "timeout");
    assert!(t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());
    failed_cleanly(&out, &root.0, &id, "killed after its timeout of 1 s");
    let pid = read(&pidfile);
    assert!(
        !Path::new(&format!("/proc/{}", pid.trim())).exists(),
        "the hook {pid} is gone"
    );
}

#[test]
fn failing_poststart_and_poststop_hooks_only_warn() {
    if !require_kvm() {
        return;
    }
    let rec = TempDir::new("hooks-out");
    let fail = json!({"path": "/bin/sh", "args": ["sh", "-c", "echo nope >&2; exit 1"]});
    let hooks = json!({
        "poststart": [fail.clone(), recording_hook(&rec.0, "poststart")],
        "poststop": [fail, recording_hook(&rec.0, "poststop")],
    });
    let (c, _b, root, id) = create_with(hooks, "warn");
    assert_eq!(c.status, 0, "create: {c:?}");
    let s = qrun_at(&root.0, &["start", &id]);
    assert_eq!(s.status, 0, "start goes on: {s:?}");
    let err = String::from_utf8_lossy(&s.stderr);
    assert!(
        err.contains("warning: hook poststart[0] /bin/sh: exit status 1 (stderr: nope)"),
        "{err}"
    );
    assert_eq!(state(&root.0, &id).expect("exists")["status"], "running");
    let d = qrun_at(&root.0, &["delete", "--force", &id]);
    assert_eq!(d.status, 0, "delete goes on: {d:?}");
    let err = String::from_utf8_lossy(&d.stderr);
    assert!(err.contains("warning: hook poststop[0]"), "{err}");
    assert!(state(&root.0, &id).is_none(), "deleted");
    // The hooks after the failing ones ran.
    assert_eq!(read(&rec.join("order")), "poststart\npoststop\n");
}

#[test]
fn start_container_hooks_are_refused_in_one_line() {
    if !require_kvm() {
        return;
    }
    let hooks = json!({"startContainer": [{"path": "/bin/true"}]});
    let (out, _b, root, id) = create_with(hooks, "startc");
    failed_cleanly(
        &out,
        &root.0,
        &id,
        "hooks.startContainer is not supported by qrun",
    );
}
