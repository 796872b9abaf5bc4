//! A non-root `process.user` (uid/gid 1000) runs, as under runc: the
//! sandbox process opens /dev/kvm before it becomes the container's user
//! (it used to fail with "cannot use /dev/kvm"), the guest program sees
//! uid and gid 1000, and host files keep their permissions for it (the
//! VMM reads the rootfs as that user: a root-only file is refused). The
//! same bundle runs under `runc run` and `qrun run`; output and status
//! must agree.
//!
//! Needs /dev/kvm: without it a test says SKIPPED loudly, and fails under
//! `CI=true`.

#![forbid(unsafe_code)]

mod common;

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use common::bundle::{bundle, qrun_at};
use common::runc::runc;
use common::tmp::TempDir;
use common::{Outcome, require_kvm};
use serde_json::json;

fn runc_run(root: &Path, b: &Path, id: &str) -> Outcome {
    let out = runc(root, &["run", "--bundle", &b.to_string_lossy(), id]);
    let _ = runc(root, &["delete", "--force", id]);
    out
}

/// The first line of stderr past any runtime's prefix: busybox's message.
fn error_gist(o: &Outcome) -> String {
    let text = String::from_utf8_lossy(&o.stderr);
    text.lines()
        .find_map(|l| l.find("Permission denied").map(|_| "Permission denied"))
        .unwrap_or("")
        .to_owned()
}

#[test]
fn a_non_root_user_runs_with_its_ids_and_permissions_as_under_runc() {
    if !require_kvm() {
        return;
    }
    let b = TempDir::new("user-bundle");
    let (root, rroot) = (TempDir::new("user-root"), TempDir::new("user-runc-root"));
    let busybox = Path::new("/bin/busybox");
    assert!(busybox.is_file(), "/bin/busybox: scripts/deps.sh");
    let secret = b.join("rootfs/secret");
    std::fs::create_dir_all(b.join("rootfs")).expect("rootfs");
    std::fs::write(&secret, "root only\n").expect("secret");
    std::fs::set_permissions(&secret, std::fs::Permissions::from_mode(0o600)).expect("chmod");
    let cases: &[&[&str]] = &[
        &["busybox", "id", "-u"],
        &["busybox", "id", "-g"],
        &["busybox", "cat", "/secret"],
    ];
    for (n, args) in cases.iter().enumerate() {
        let _ = std::fs::remove_file(b.join("config.json"));
        bundle(&b.0, &[("/bin/busybox", busybox)], args, |c| {
            c["process"]["user"] = json!({"uid": 1000, "gid": 1000});
        });
        let id = format!("user-{}-{n}", std::process::id());
        let runc = runc_run(&rroot.0, &b.0, &id);
        let qrun = qrun_at(&root.0, &["run", "--bundle", b.str(), &id]);
        let _ = qrun_at(&root.0, &["delete", "--force", &id]);
        if args[1] == "cat" {
            assert_eq!(error_gist(&runc), "Permission denied", "runc: {runc:?}");
        }
        assert_eq!(
            (qrun.status, &qrun.stdout, error_gist(&qrun)),
            (runc.status, &runc.stdout, error_gist(&runc)),
            "{args:?}: qrun {qrun:?}, runc {runc:?}"
        );
    }
    // What runc shows, so the comparison above means something.
    let _ = std::fs::remove_file(b.join("config.json"));
    bundle(&b.0, &[("/bin/busybox", busybox)], cases[0], |c| {
        c["process"]["user"] = json!({"uid": 1000, "gid": 1000});
    });
    let id = format!("user-{}-check", std::process::id());
    let out = qrun_at(&root.0, &["run", "--bundle", b.str(), &id]);
    assert_eq!(String::from_utf8_lossy(&out.stdout), "1000\n", "{out:?}");
}
