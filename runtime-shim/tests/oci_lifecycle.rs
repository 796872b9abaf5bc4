//! The OCI lifecycle through the `qrun` binary: create, start, state,
//! kill, delete, run, pause/resume, and the bad inputs, each failed
//! operation leaving the container's state as it was.

mod common;

use std::path::Path;

use common::bundle::{
    hello_bundle, qrun_at, qrun_detached, sleep_bundle, sleep_bundle_with, started, state, status,
    wait_status,
};
use common::require_kvm;
use common::tmp::TempDir;
use serde_json::Value;

/// What must not change when an operation is refused.
fn snapshot(root: &Path, id: &str) -> Option<(Value, Value, Value)> {
    state(root, id).map(|s| (s["status"].clone(), s["pid"].clone(), s["bundle"].clone()))
}

#[track_caller]
fn refused(root: &Path, id: &str, args: &[&str], needle: &str) {
    let before = snapshot(root, id);
    let out = qrun_at(root, args);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_ne!(out.status, 0, "qrun {args:?} should fail: {out:?}");
    assert!(
        err.contains(needle),
        "qrun {args:?}: expected {needle:?} in {err:?}"
    );
    assert_eq!(
        snapshot(root, id),
        before,
        "qrun {args:?} changed the state"
    );
}

#[test]
fn run_prints_and_cleans_up() {
    if !require_kvm() {
        return;
    }
    let (b, root) = (TempDir::new("b"), TempDir::new("root"));
    hello_bundle(&b.0);
    let out = qrun_at(&root.0, &["run", "--bundle", &b.0.to_string_lossy(), "h1"]);
    assert_eq!(out.status, 0, "{out:?}");
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "hello from a static binary\n"
    );
    assert!(
        state(&root.0, "h1").is_none(),
        "run leaves no container behind"
    );
}

#[test]
fn create_start_state_kill_delete() {
    if !require_kvm() {
        return;
    }
    let (b, root) = (TempDir::new("b"), TempDir::new("root"));
    sleep_bundle(&b.0, "30");
    let pid_file = b.0.join("pid");
    let log = b.0.join("create.log");
    let bundle_arg = b.0.to_string_lossy().into_owned();
    let pid_arg = pid_file.to_string_lossy().into_owned();
    let out = qrun_detached(
        &root.0,
        &[
            "create",
            "--bundle",
            &bundle_arg,
            "--pid-file",
            &pid_arg,
            "c1",
        ],
        &log,
    );
    assert_eq!(out.status, 0, "create: {out:?}");
    let s = state(&root.0, "c1").expect("state after create");
    assert_eq!(s["status"], "created");
    assert_eq!(s["ociVersion"], "1.0.2");
    assert_eq!(s["id"], "c1");
    assert_eq!(s["bundle"].as_str(), Some(bundle_arg.as_str()));
    let pid = std::fs::read_to_string(&pid_file).expect("pid file");
    assert_eq!(s["pid"].to_string(), pid.trim());

    refused(
        &root.0,
        "c1",
        &["create", "--bundle", &bundle_arg, "c1"],
        "already in use",
    );
    // Nothing to hibernate before start: a no-op, as runc's SIGSTOP to
    // its init process leaves the container created.
    let out = qrun_at(&root.0, &["kill", "c1", "SIGSTOP"]);
    assert_eq!(out.status, 0, "SIGSTOP while created: {out:?}");
    assert_eq!(status(&root.0, "c1"), "created");

    let out = qrun_at(&root.0, &["start", "c1"]);
    assert_eq!(out.status, 0, "start: {out:?}");
    assert_eq!(status(&root.0, "c1"), "running");
    let s = state(&root.0, "c1").expect("state");
    assert_eq!(s["annotations"]["qrun.hibernation"], "running", "{s}");

    refused(&root.0, "c1", &["start", "c1"], "already running");
    refused(&root.0, "c1", &["delete", "c1"], "use delete --force");
    refused(&root.0, "c1", &["kill", "c1", "SIGNOPE"], "unknown signal");
    refused(&root.0, "c1", &["kill", "c1", "99"], "unknown signal");
    refused(&root.0, "c1", &["resume", "c1"], "container not paused");

    // The program is pid 1 without a SIGTERM handler: as under runc,
    // SIGTERM does nothing (pid_namespaces(7)); SIGKILL ends it.
    let out = qrun_at(&root.0, &["kill", "c1", "TERM"]);
    assert_eq!(out.status, 0, "kill TERM: {out:?}");
    std::thread::sleep(std::time::Duration::from_millis(300));
    assert_eq!(status(&root.0, "c1"), "running", "SIGTERM to pid 1");
    let out = qrun_at(&root.0, &["kill", "c1", "KILL"]);
    assert_eq!(out.status, 0, "kill KILL: {out:?}");
    wait_status(&root.0, "c1", "stopped");
    let s = state(&root.0, "c1").expect("state");
    assert_eq!(s["annotations"]["qrun.exitStatus"], "137", "{s}");
    refused(&root.0, "c1", &["start", "c1"], "has stopped");
    refused(
        &root.0,
        "c1",
        &["kill", "c1", "KILL"],
        "container not running",
    );
    let out = qrun_at(&root.0, &["kill", "--all", "c1", "KILL"]);
    assert_eq!(out.status, 0, "kill --all of a stopped container: {out:?}");

    let out = qrun_at(&root.0, &["delete", "c1"]);
    assert_eq!(out.status, 0, "delete: {out:?}");
    assert!(state(&root.0, "c1").is_none());
    assert!(
        !root.0.join("c1").exists(),
        "delete removes the state directory"
    );
}

/// SIGSTOP hibernates the sandbox and SIGCONT wakes it; the annotation
/// shows each, the OCI status stays `running`, and a second SIGSTOP while
/// hibernated is a no-op (as SIGSTOP to a stopped process).
#[test]
fn sigstop_hibernates_and_sigcont_wakes() {
    if !require_kvm() {
        return;
    }
    let (b, root) = (TempDir::new("b"), TempDir::new("root"));
    sleep_bundle(&b.0, "30");
    started(&root.0, &b.0, "h");
    let out = qrun_at(&root.0, &["kill", "h", "SIGSTOP"]);
    assert_eq!(out.status, 0, "SIGSTOP: {out:?}");
    let s = state(&root.0, "h").expect("state");
    assert_eq!(s["status"], "running", "{s}");
    assert_eq!(s["annotations"]["qrun.hibernation"], "hibernated", "{s}");
    let out = qrun_at(&root.0, &["kill", "h", "SIGSTOP"]);
    assert_eq!(out.status, 0, "a second SIGSTOP: {out:?}");
    let s = state(&root.0, "h").expect("state");
    assert_eq!(s["annotations"]["qrun.hibernation"], "hibernated", "{s}");
    let out = qrun_at(&root.0, &["kill", "h", "SIGCONT"]);
    assert_eq!(out.status, 0, "SIGCONT: {out:?}");
    let s = state(&root.0, "h").expect("state");
    assert_eq!(s["annotations"]["qrun.hibernation"], "running", "{s}");
    let out = qrun_at(&root.0, &["delete", "--force", "h"]);
    assert_eq!(out.status, 0, "{out:?}");
}

#[test]
fn pause_resume_and_sigkill() {
    if !require_kvm() {
        return;
    }
    let (b, root) = (TempDir::new("b"), TempDir::new("root"));
    sleep_bundle(&b.0, "30");
    started(&root.0, &b.0, "p");
    assert_eq!(qrun_at(&root.0, &["pause", "p"]).status, 0);
    assert_eq!(status(&root.0, "p"), "paused");
    refused(&root.0, "p", &["pause", "p"], "it is paused");
    assert_eq!(qrun_at(&root.0, &["resume", "p"]).status, 0);
    assert_eq!(status(&root.0, "p"), "running");
    let ps = qrun_at(&root.0, &["ps", "--format", "json", "p"]);
    let pids: Vec<i64> = serde_json::from_slice(&ps.stdout).expect("ps prints JSON");
    assert_eq!(pids.len(), 1, "one sandbox process: {pids:?}");
    assert_eq!(qrun_at(&root.0, &["kill", "p", "9"]).status, 0);
    wait_status(&root.0, "p", "stopped");
    let s = state(&root.0, "p").expect("state");
    assert_eq!(s["annotations"]["qrun.exitStatus"], "137", "{s}");
    assert_eq!(qrun_at(&root.0, &["delete", "p"]).status, 0);
}

/// Breaks the bundle's config.json in one way.
type Breaker<'a> = Box<dyn Fn() + 'a>;

#[test]
fn bad_bundles_are_refused_and_leave_nothing() {
    let (b, root) = (TempDir::new("b"), TempDir::new("root"));
    hello_bundle(&b.0);
    let config = b.0.join("config.json");
    let good = std::fs::read(&config).expect("config");
    let bundle_arg = b.0.to_string_lossy().into_owned();
    let cases: Vec<(&str, Breaker)> = vec![
        (
            "key must be a string",
            Box::new(|| std::fs::write(&config, b"{ not json").expect("w")),
        ),
        (
            "process is missing",
            Box::new(|| {
                edit(&config, &good, |c| {
                    c.as_object_mut().expect("object").remove("process");
                })
            }),
        ),
        (
            "process.args is missing",
            Box::new(|| {
                edit(&config, &good, |c| {
                    c["process"]["args"] = Value::Array(vec![]);
                })
            }),
        ),
        (
            "rootfs",
            Box::new(|| {
                edit(&config, &good, |c| {
                    c["root"]["path"] = "no-such-rootfs".into();
                })
            }),
        ),
        (
            "no such executable",
            Box::new(|| {
                edit(&config, &good, |c| {
                    c["process"]["args"] = vec![Value::from("/missing")].into();
                })
            }),
        ),
        (
            "not supported",
            Box::new(|| {
                edit(&config, &good, |c| {
                    // A user namespace is made (tests/oci_userns.rs), not
                    // joined.
                    c["linux"]["namespaces"] = serde_json::json!([
                        {"type": "uts"},
                        {"type": "user", "path": "/proc/1/ns/user"}
                    ]);
                })
            }),
        ),
    ];
    for (needle, break_it) in cases {
        break_it();
        let out = qrun_at(&root.0, &["create", "--bundle", &bundle_arg, "bad"]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_ne!(out.status, 0, "{needle}: create should fail");
        assert!(err.contains(needle), "expected {needle:?} in {err:?}");
        assert!(
            !root.0.join("bad").exists(),
            "{needle}: a failed create left state behind"
        );
    }
    std::fs::remove_file(&config).expect("rm");
    let out = qrun_at(&root.0, &["create", "--bundle", &bundle_arg, "bad"]);
    assert_ne!(out.status, 0);
    assert!(String::from_utf8_lossy(&out.stderr).contains("config.json"));
}

fn edit(path: &Path, good: &[u8], f: impl FnOnce(&mut Value)) {
    let mut c: Value = serde_json::from_slice(good).expect("JSON");
    f(&mut c);
    std::fs::write(path, serde_json::to_vec(&c).expect("JSON")).expect("writing");
}

#[test]
fn bad_commands_and_ids() {
    let root = TempDir::new("root");
    for (args, needle) in [
        (&["frobnicate"][..], "unknown command"),
        (&["start", "nosuch"][..], "does not exist"),
        (&["state", "nosuch"][..], "does not exist"),
        (&["kill", "nosuch", "KILL"][..], "does not exist"),
        (&["delete", "nosuch"][..], "does not exist"),
        (&["state", "../etc"][..], "invalid container id"),
        (&["kill"][..], "missing container id"),
        (&["create", "--nope", "x"][..], "unknown flag"),
    ] {
        let out = qrun_at(&root.0, args);
        assert_ne!(out.status, 0, "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains(needle),
            "{args:?}: expected {needle:?} in {err:?}"
        );
    }
    let out = qrun_at(&root.0, &["features"]);
    assert_eq!(out.status, 0);
    let f: Value = serde_json::from_slice(&out.stdout).expect("features JSON");
    assert!(
        f["linux"]["namespaces"]
            .as_array()
            .is_some_and(|a| !a.is_empty())
    );
    let out = qrun_at(&root.0, &["list", "--format", "json"]);
    assert_eq!(out.status, 0);
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "[]");
}

/// `hostname` is set in the sandbox process's new UTS namespace (and
/// passed to the VMM as `SandboxConfig::hostname`, which the guest's
/// `uname` reports once the VMM wires it through).
#[test]
fn hostname_goes_to_the_uts_namespace() {
    if !require_kvm() {
        return;
    }
    let (b, root) = (TempDir::new("b"), TempDir::new("root"));
    sleep_bundle_with(&b.0, "30", |c| {
        c["hostname"] = "box1".into();
    });
    started(&root.0, &b.0, "n");
    let pid = state(&root.0, "n").expect("state")["pid"].to_string();
    let out = std::process::Command::new("nsenter")
        .args(["-t", &pid, "-u", "/bin/busybox", "hostname"])
        .output()
        .expect("nsenter (util-linux)");
    assert_eq!(String::from_utf8_lossy(&out.stdout), "box1\n", "{out:?}");
    assert_eq!(qrun_at(&root.0, &["delete", "--force", "n"]).status, 0);
}

/// linux.resources become cgroup limits on the sandbox process (v1 here:
/// memory is the guest RAM plus the VMM's allowance, see bundle.rs; pids
/// the limit plus the VMM's threads, see cgroup.rs).
#[test]
fn resources_become_cgroup_limits() {
    if !require_kvm() {
        return;
    }
    let (b, root) = (TempDir::new("b"), TempDir::new("root"));
    sleep_bundle_with(&b.0, "30", |c| {
        c["linux"]["resources"] = serde_json::json!({
            "memory": {"limit": 96 << 20},
            "pids": {"limit": 50},
            "cpu": {"quota": 50000, "period": 100000}
        });
    });
    started(&root.0, &b.0, "r");
    let pid = state(&root.0, "r").expect("state")["pid"]
        .as_i64()
        .expect("pid");
    let cgroups = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).expect("cgroup");
    let path_of = |ctrl: &str| {
        cgroups.lines().find_map(|l| {
            let mut it = l.splitn(3, ':');
            let (_, c, p) = (it.next()?, it.next()?, it.next()?);
            c.split(',').any(|x| x == ctrl).then(|| p.to_owned())
        })
    };
    let read = |p: String| std::fs::read_to_string(p).map(|s| s.trim().to_owned());
    let pids_max = (50 + qvisor::HOST_THREADS).to_string();
    if let Some(mem) = path_of("memory") {
        let limit = read(format!("/sys/fs/cgroup/memory{mem}/memory.limit_in_bytes"));
        assert_eq!(limit.ok(), Some(((96u64 + 64) << 20).to_string()));
        let pids = read(format!(
            "/sys/fs/cgroup/pids{}/pids.max",
            path_of("pids").expect("pids")
        ));
        assert_eq!(pids.ok(), Some(pids_max.clone()));
        let quota = read(format!(
            "/sys/fs/cgroup/cpu{}/cpu.cfs_quota_us",
            path_of("cpu").expect("cpu")
        ));
        assert_eq!(quota.ok().as_deref(), Some("50000"));
    } else {
        let dir = format!("/sys/fs/cgroup{}", path_of("").expect("v2 cgroup"));
        assert_eq!(
            read(format!("{dir}/memory.max")).ok(),
            Some(((96u64 + 64) << 20).to_string())
        );
        assert_eq!(read(format!("{dir}/pids.max")).ok(), Some(pids_max));
    }
    assert_eq!(qrun_at(&root.0, &["delete", "--force", "r"]).status, 0);
    assert!(
        !std::path::Path::new(&format!("/proc/{pid}")).exists()
            || status(&root.0, "r") == "<no state>"
    );
}

/// Kubernetes binds a host file at `/dev/termination-log` in every pod:
/// the program's write there reaches the host file, as under runc (the
/// guest serves null, zero, random … itself and finds other names under
/// /dev in the rootfs view, where the bind is made).
#[test]
fn a_bind_at_dev_termination_log_reaches_the_host() {
    if !require_kvm() {
        return;
    }
    let (b, root) = (TempDir::new("b"), TempDir::new("root"));
    let log = b.join("termination-log");
    std::fs::write(&log, b"").expect("creating the host file");
    let log_src = log.to_string_lossy().into_owned();
    let busybox = Path::new("/bin/busybox");
    common::bundle::bundle(
        &b.0,
        &[("/bin/busybox", busybox)],
        &[
            "busybox",
            "sh",
            "-c",
            "echo done > /dev/termination-log; cat /dev/null",
        ],
        |c| {
            c["mounts"]
                .as_array_mut()
                .expect("qrun spec has mounts")
                .push(serde_json::json!({
                    "destination": "/dev/termination-log", "type": "bind",
                    "source": log_src, "options": ["rbind", "rw"]}));
        },
    );
    let out = qrun_at(&root.0, &["run", "--bundle", &b.0.to_string_lossy(), "tl"]);
    assert_eq!(out.status, 0, "{out:?}");
    assert_eq!(std::fs::read_to_string(&log).expect("reading"), "done\n");
}

/// The hostname without a UTS namespace of the container's own, as runc:
/// a `hostname` is refused ("unable to set hostname without a private UTS
/// namespace"), and with none the program sees its namespace's, here the
/// host's (a CRI host-network pod's containers; qrun's guest said "qrun").
#[test]
fn hostname_without_a_uts_namespace_is_the_hosts() {
    if !require_kvm() {
        return;
    }
    let busybox = std::path::Path::new("/bin/busybox");
    let no_uts = |c: &mut Value| {
        let list = c["linux"]["namespaces"].as_array_mut().expect("namespaces");
        list.retain(|n| n["type"] != "uts");
    };
    let b = TempDir::new("b");
    common::bundle::bundle(
        &b.0,
        &[("/bin/busybox", busybox)],
        &["/bin/busybox", "hostname"],
        |c| {
            no_uts(c);
            c.as_object_mut().expect("object").remove("hostname");
        },
    );
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").expect("hostname");
    let bs = b.str();
    for (rt, out) in [
        (
            "runc",
            common::runc::runc(&TempDir::new("root").0, &["run", "--bundle", bs, "hu1"]),
        ),
        (
            "qrun",
            qrun_at(&TempDir::new("root").0, &["run", "--bundle", bs, "hu1"]),
        ),
    ] {
        assert_eq!(out.status, 0, "{rt}: {out:?}");
        assert_eq!(
            String::from_utf8_lossy(&out.stdout),
            host,
            "{rt}: the host's hostname"
        );
    }

    let b = TempDir::new("b");
    common::bundle::bundle(
        &b.0,
        &[("/bin/busybox", busybox)],
        &["/bin/busybox", "hostname"],
        |c| {
            no_uts(c);
            c["hostname"] = "box2".into();
        },
    );
    let bs = b.str();
    for (rt, out) in [
        (
            "runc",
            common::runc::runc(&TempDir::new("root").0, &["run", "--bundle", bs, "hu2"]),
        ),
        (
            "qrun",
            qrun_at(&TempDir::new("root").0, &["run", "--bundle", bs, "hu2"]),
        ),
    ] {
        assert_ne!(out.status, 0, "{rt}: {out:?}");
        assert!(
            String::from_utf8_lossy(&out.stderr)
                .contains("unable to set hostname without a private UTS namespace"),
            "{rt}: {out:?}"
        );
    }
}
