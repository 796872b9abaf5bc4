//! `pause`/`resume` with the bundle annotation `qrun.hibernate-on-pause`
//! ("true"): `pause` hibernates the sandbox instead of freezing its
//! cgroup and `resume` wakes it, while `state` says `paused` and
//! `running` as runc's does for the same bundle (runc ignores the
//! annotation and freezes). Without the annotation `pause` keeps its
//! freezer meaning (`oci_lifecycle.rs`).
//!
//! Needs /dev/kvm: without it the test says SKIPPED loudly, and fails
//! under `CI=true`.

#![forbid(unsafe_code)]

mod common;

use std::path::Path;

use common::bundle::{qrun_at, sleep_bundle_with, started, status, wait_status};
use common::runc::{runc, runc_ok, runc_state};
use common::tmp::TempDir;
use common::{ctl, require_kvm, wait_for_socket};
use serde_json::json;

/// The sandbox's own answer (the control socket), not the OCI status.
fn hibernation(root: &Path, id: &str) -> String {
    let socket = root.join(id).join("sandbox/ctl.sock");
    wait_for_socket(&socket);
    let st = ctl(&socket, "status").expect("the control socket answers");
    st["state"].as_str().unwrap_or_default().to_owned()
}

/// The cgroup freezer's state of the sandbox process.
fn frozen(pid: i64) -> bool {
    let cgroups = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).unwrap_or_default();
    cgroups.lines().any(|l| {
        let Some(path) = l
            .strip_prefix(|c: char| c.is_ascii_digit())
            .and_then(|r| r.strip_prefix(":freezer:"))
        else {
            return false;
        };
        std::fs::read_to_string(format!("/sys/fs/cgroup/freezer{path}/freezer.state"))
            .is_ok_and(|s| s.trim() != "THAWED")
    })
}

#[test]
fn pause_hibernates_and_resume_wakes_with_the_annotation() {
    if !require_kvm() {
        return;
    }
    let (b, root) = (TempDir::new("hp-b"), TempDir::new("hp-root"));
    sleep_bundle_with(&b.0, "30", |c| {
        c["annotations"] = json!({"qrun.hibernate-on-pause": "true"});
    });
    let id = format!("hp-{}", std::process::id());

    // runc on the same bundle: what the states must read.
    let rroot = TempDir::new("hp-runc-root");
    let bs = b.str();
    runc_ok(&rroot.0, &["run", "--detach", "--bundle", bs, &id]);
    runc_ok(&rroot.0, &["pause", &id]);
    let runc_paused = runc_state(&rroot.0, &id)["status"].clone();
    runc_ok(&rroot.0, &["resume", &id]);
    let runc_resumed = runc_state(&rroot.0, &id)["status"].clone();
    let _ = runc(&rroot.0, &["delete", "--force", &id]);
    assert_eq!(
        (runc_paused.as_str(), runc_resumed.as_str()),
        (Some("paused"), Some("running"))
    );

    started(&root.0, &b.0, &id);
    assert_eq!(hibernation(&root.0, &id), "running");
    let out = qrun_at(&root.0, &["pause", &id]);
    assert_eq!(out.status, 0, "pause: {out:?}");
    let s = common::bundle::state(&root.0, &id).expect("state");
    assert_eq!(s["status"], runc_paused, "{s}");
    assert_eq!(hibernation(&root.0, &id), "hibernated");
    let pid = s["pid"].as_i64().expect("pid");
    assert!(!frozen(pid), "hibernated, not frozen");
    // As runc: pausing twice is refused, and so is exec without
    // --ignore-paused.
    let again = qrun_at(&root.0, &["pause", &id]);
    assert_ne!(again.status, 0, "{again:?}");
    let out = qrun_at(&root.0, &["resume", &id]);
    assert_eq!(out.status, 0, "resume: {out:?}");
    assert_eq!(status(&root.0, &id), runc_resumed.as_str().expect("string"));
    assert_eq!(hibernation(&root.0, &id), "running");
    let again = qrun_at(&root.0, &["resume", &id]);
    assert_ne!(again.status, 0, "resume of a running container: {again:?}");

    // A second cycle, then a kill while paused ends it.
    assert_eq!(qrun_at(&root.0, &["pause", &id]).status, 0);
    assert_eq!(status(&root.0, &id), "paused");
    assert_eq!(qrun_at(&root.0, &["kill", &id, "9"]).status, 0);
    wait_status(&root.0, &id, "stopped");
    assert_eq!(qrun_at(&root.0, &["delete", &id]).status, 0);
}

#[test]
fn pause_freezes_without_the_annotation() {
    if !require_kvm() {
        return;
    }
    let (b, root) = (TempDir::new("hp-b"), TempDir::new("hp-root"));
    sleep_bundle_with(&b.0, "30", |c| {
        c["annotations"] = json!({"qrun.hibernate-on-pause": "no"});
    });
    let id = format!("hpf-{}", std::process::id());
    started(&root.0, &b.0, &id);
    assert_eq!(qrun_at(&root.0, &["pause", &id]).status, 0);
    let s = common::bundle::state(&root.0, &id).expect("state");
    assert_eq!(s["status"], "paused", "{s}");
    assert!(frozen(s["pid"].as_i64().expect("pid")), "frozen: {s}");
    assert_eq!(qrun_at(&root.0, &["resume", &id]).status, 0);
    assert_eq!(status(&root.0, &id), "running");
    assert_eq!(hibernation(&root.0, &id), "running");
    let _ = qrun_at(&root.0, &["delete", "--force", &id]);
}
