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

use common::bundle::{busybox_bundle, run_both};
use common::tmp::TempDir;
use common::{assert_same, require_kvm};
use serde_json::json;

#[test]
fn outgrowing_a_small_memory_limit_is_sigkill() {
    if !require_kvm() {
        return;
    }
    let b = TempDir::new("oom");
    // critest's command: dd's 20 MiB buffer does not fit.
    busybox_bundle(
        &b.0,
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
    let (r, q) = run_both(&b.0, &format!("oom-{}", std::process::id()));
    assert_eq!(r.status, 137, "runc: {r:?}");
    assert_same("oom", &r, &q);
}
