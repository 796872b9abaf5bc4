//! The config's `process.capabilities`, `process.user.additionalGids` and
//! `process.rlimits` reach the guest program as runc gives them to its
//! process (issue 17): the same bundle runs `test-apps/c/creds.c` under
//! `runc run` and `qrun run`, which must print the same capability sets
//! (capget, /proc/self/status, PR_CAPBSET_READ, PR_CAP_AMBIENT, after
//! setuid and after execve), groups and limits, and meet the same
//! refusals (chroot without CAP_SYS_CHROOT, setgroups, capset,
//! RLIMIT_NOFILE on fd allocation, raising a hard limit).
//!
//! Needs /dev/kvm: without it a test says SKIPPED loudly, and fails under
//! `CI=true`.

#![forbid(unsafe_code)]

mod common;

use common::bundle::{bundle, qrun_at};
use common::runc::runc;
use common::tmp::TempDir;
use common::{assert_same, require_kvm};
use serde_json::{Value, json};

/// Runs `/creds ARGS` under runc and qrun with `edit` applied to the
/// config; both outputs must agree. Returns qrun's stdout.
fn same_under_runc(name: &str, args: &[&str], edit: impl Fn(&mut Value)) -> String {
    let b = TempDir::new(name);
    let prog = test_apps::path("creds");
    let mut argv = vec!["/creds"];
    argv.extend_from_slice(args);
    bundle(&b.0, &[("/creds", &prog)], &argv, edit);
    let id = format!("{name}-{}", std::process::id());
    let bs = b.str();
    let rroot = TempDir::new("creds-runc-root");
    let runc_out = runc(&rroot.0, &["run", "--bundle", bs, &id]);
    let _ = runc(&rroot.0, &["delete", "--force", &id]);
    let root = TempDir::new("creds-root");
    let qrun = qrun_at(&root.0, &["run", "--bundle", bs, &id]);
    let _ = qrun_at(&root.0, &["delete", "--force", &id]);
    assert_same(name, &runc_out, &qrun);
    String::from_utf8_lossy(&qrun.stdout).into_owned()
}

fn config(c: &mut Value, uid: u32) {
    let bounding = json!([
        "CAP_CHOWN",
        "CAP_DAC_OVERRIDE",
        "CAP_FOWNER",
        "CAP_KILL",
        "CAP_SETGID",
        "CAP_SETUID",
        "CAP_SETPCAP",
        "CAP_NET_BIND_SERVICE",
        "CAP_SYS_CHROOT",
        "CAP_SETFCAP",
        "CAP_SYS_NICE"
    ]);
    let some = json!([
        "CAP_SETGID",
        "CAP_SETUID",
        "CAP_SETPCAP",
        "CAP_SYS_CHROOT",
        "CAP_NET_BIND_SERVICE"
    ]);
    c["process"]["capabilities"] = json!({
        "bounding": bounding,
        "effective": some,
        "permitted": some,
        "inheritable": ["CAP_NET_BIND_SERVICE", "CAP_KILL"],
        "ambient": ["CAP_NET_BIND_SERVICE"],
    });
    c["process"]["user"] = json!({"uid": uid, "gid": uid, "additionalGids": [30, 10, 20]});
    c["process"]["rlimits"] = json!([
        {"type": "RLIMIT_NOFILE", "soft": 200, "hard": 300},
        {"type": "RLIMIT_CORE", "soft": 1000, "hard": 2000},
        {"type": "RLIMIT_NPROC", "soft": 500, "hard": 600},
    ]);
}

#[test]
fn root_with_the_configs_sets_groups_and_limits() {
    if !require_kvm() {
        return;
    }
    let out = same_under_runc("creds-root", &[], |c| config(c, 0));
    // What runc gave, so the comparison means something: root's permitted
    // set after exec is bounding | inheritable.
    assert!(out.contains("start getgroups 3: 10 20 30"), "{out}");
    assert!(out.contains("rlimit 7 200 300"), "{out}");
    assert!(out.contains("ambient 0000000000000400"), "{out}");
    assert!(out.contains("chroot without it: -1 errno 1"), "{out}");
}

#[test]
fn root_that_becomes_a_user() {
    if !require_kvm() {
        return;
    }
    let out = same_under_runc("creds-setuid", &["setuid"], |c| config(c, 0));
    assert!(out.contains("setuid: 0"), "{out}");
}

#[test]
fn a_user_keeps_its_ambient_set() {
    if !require_kvm() {
        return;
    }
    let out = same_under_runc("creds-user", &[], |c| config(c, 1000));
    assert!(out.contains("setgroups: -1 errno 1"), "{out}");
}

#[test]
fn the_default_set_without_a_config() {
    if !require_kvm() {
        return;
    }
    same_under_runc("creds-default", &[], |_| {});
}
