//! A memory limit as runc applies it (issue 17, critest's OOMKilled spec):
//! a container with a 15 MiB limit (below the smallest sandbox, 16 MiB:
//! qrun gives it the smallest) starts, and a program that outgrows the
//! limit is killed with SIGKILL (status 137) under both runtimes. The
//! same bundle runs under `runc run` and `qrun run`.
//!
//! Needs /dev/kvm: without it a test says SKIPPED loudly, and fails under
//! `CI=true`.

#![forbid(unsafe_code)]

mod common;

use std::path::Path;

use common::bundle::{bundle, qrun_at};
use common::runc::runc;
use common::tmp::TempDir;
use common::{assert_same, require_kvm};
use serde_json::json;

#[test]
fn outgrowing_a_small_memory_limit_is_sigkill() {
    if !require_kvm() {
        return;
    }
    let b = TempDir::new("oom");
    let busybox = Path::new("/bin/busybox");
    assert!(busybox.is_file(), "/bin/busybox: scripts/deps.sh");
    // critest's command: dd's 20 MiB buffer does not fit.
    bundle(
        &b.0,
        &[("/bin/busybox", busybox)],
        &[
            "busybox",
            "sh",
            "-c",
            "busybox dd if=/dev/zero of=/dev/null bs=20M",
        ],
        |c| {
            c["linux"]["resources"]["memory"] = json!({
                "limit": 15 << 20,
                "swap": 15 << 20,
            });
        },
    );
    let id = format!("oom-{}", std::process::id());
    let rroot = TempDir::new("oom-runc-root");
    let r = runc(&rroot.0, &["run", "--bundle", b.str(), &id]);
    let _ = runc(&rroot.0, &["delete", "--force", &id]);
    let root = TempDir::new("oom-root");
    let q = qrun_at(&root.0, &["run", "--bundle", b.str(), &id]);
    let _ = qrun_at(&root.0, &["delete", "--force", &id]);
    assert_eq!(r.status, 137, "runc: {r:?}");
    assert_same("oom", &r, &q);
}
